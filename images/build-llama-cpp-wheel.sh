#!/usr/bin/env bash
# A wheel of llama-cpp-python for the llama.cpp runtime image, compiled here from the sdist that
# hack/llama-cpp/requirements.txt pins (the version local mode runs), for any x86-64 CPU: local
# mode's build (hack/build-llama-cpp.sh) is tuned to the machine it runs on, an image runs on
# whatever node the scheduler picks. GGML_NATIVE=OFF alone would still assume AVX2, FMA and F16C
# (x86-64-v3), so every instruction-set extension is turned off: the CPU backend uses SSE2, which
# every x86-64 CPU has. GGML_OPENMP=OFF: ggml's own thread pool, so the image needs no libgomp.
# The image holds no compiler: the wheel is built on the builder and installed into the image.
#
# The wheel is kept in a cache folder named for a digest of the pins, the build flags and the
# Python version, so a second `make images` reuses it instead of compiling for minutes.
#
# Usage: images/build-llama-cpp-wheel.sh UV   (prints the folder holding the wheel)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
uv=$1
pins=$repo/hack/llama-cpp
python=python3
cmake_args="-DLLAVA_BUILD=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF"
cmake_args+=" -DGGML_SSE42=OFF -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_BMI2=OFF -DGGML_FMA=OFF"
cmake_args+=" -DGGML_F16C=OFF -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF"

version=$(sed -n 's/^llama-cpp-python\[server\]==\([^ ]*\)$/\1/p' "$pins/requirements.in")
sdist_hash=$(sed -n '/^llama-cpp-python==/{n;s/.*--hash=sha256:\([0-9a-f]*\).*/\1/p}' "$pins/requirements.txt")
[[ -n $version && -n $sdist_hash ]] || { echo "no pinned llama-cpp-python in $pins" >&2; exit 1; }
python_version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
digest=$(cat "$pins/requirements.txt" "$pins/build-constraints.txt" <(echo "$cmake_args") \
  | sha256sum | cut -c1-12)
cache_root=${NOCTAYA_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/noctaya/tools}
dest=$cache_root/llama-cpp-python-wheel-$version-py$python_version-x86-64-$digest

shopt -s nullglob
wheels=("$dest"/*.whl)
if [[ ${#wheels[@]} -eq 1 ]]; then
  echo "$dest"
  exit 0
fi

bash "$repo/hack/install-debian-packages.sh" build-llama-cpp cc=gcc c++=g++ cmake=cmake ninja=ninja-build \
  >&2
mkdir -p "$cache_root"
work=$(mktemp -d "$cache_root/.llama-cpp-python-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
sdist=$work/llama_cpp_python-$version.tar.gz
"$python" - "$version" "$sdist" <<'PY'
import json, sys, urllib.request
version, out = sys.argv[1:]
name = f"llama_cpp_python-{version}.tar.gz"
index = urllib.request.Request(
    "https://pypi.org/simple/llama-cpp-python/",
    headers={"Accept": "application/vnd.pypi.simple.v1+json"},
)
files = json.load(urllib.request.urlopen(index, timeout=60))["files"]
(url,) = [f["url"] for f in files if f["filename"] == name]
urllib.request.urlretrieve(url, out)
PY
echo "$sdist_hash  $sdist" | sha256sum --check --quiet
echo "build-llama-cpp-wheel: llama-cpp-python $version for any x86-64 CPU" >&2
CMAKE_ARGS="$cmake_args" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
  "$uv" build --quiet --no-cache --wheel --python "$python" \
  --build-constraint "$pins/build-constraints.txt" --out-dir "$work/wheel" "$sdist" >&2
mv "$work/wheel" "$dest"
echo "$dest"
