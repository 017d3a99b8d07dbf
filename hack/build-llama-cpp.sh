#!/usr/bin/env bash
# Builds llama.cpp's OpenAI-compatible server (llama-cpp-python with its `server` extra, compiled
# from its source distribution on the package index) into a virtual environment in a cache folder
# outside the work tree: the real CPU engine that local mode's tests serve a tiny model with.
#
# Why an environment of its own rather than a dependency group of the workspace: `make sync` runs
# `uv sync --locked`, which makes .venv exactly what uv.lock says and so removes any package
# installed beside it, and a group in uv.lock would be built by every sync that includes it (the
# sdist compiles for minutes; `make demo` on a fresh clone must not wait for it). A separate
# environment is never touched by a sync, is built once per pinned set and reused by every later
# run and every worktree, and keeps the server's own dependencies (fastapi, uvicorn, starlette)
# out of the environment the product is tested in.
#
# What is pinned: llama-cpp-python and everything it installs, with hashes
# (llama-cpp/requirements.txt), and its build backend (llama-cpp/build-constraints.txt); both are
# compiled from the .in files beside them by the command in their header. The build is lean: the
# CPU backend only (no GPU backend is enabled by default, none is asked for), without the
# multimodal library, curl or OpenSSL; GGML_NATIVE stays on, as the folder is this machine's.
#
# The folder's name carries the version and a digest of the pins, the build flags and the Python
# version, so a change of any of them builds anew beside the old one. A build runs under a lock
# (a second caller waits for it), in a temporary folder that is renamed into place only after the
# server imports and reports no GPU offload: the folder exists complete or not at all.
#
# Idempotent: with the folder present it only prints its path.
# `--print-dir` prints that path without building, so that the tests find the server by the same
# rule (this file is the one place that pins the versions and the path).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pins="$here/llama-cpp"
python=python3
uv=${UV:-uv}
cmake_args="-DLLAVA_BUILD=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF"

version=$(sed -n 's/^llama-cpp-python\[server\]==\([^ ]*\)$/\1/p' "$pins/requirements.in")
[[ -n $version ]] || { echo "build-llama-cpp: no pinned version in $pins/requirements.in" >&2; exit 1; }
python_version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
digest=$(cat "$pins/requirements.txt" "$pins/build-constraints.txt" <(echo "$cmake_args") \
  | sha256sum | cut -c1-12)
cache_root=${NOCTAYA_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/noctaya/tools}
dest="$cache_root/llama-cpp-python-$version-py$python_version-$digest"

if [[ "${1:-}" == "--print-dir" || -x "$dest/bin/python" ]]; then
  echo "$dest"
  exit 0
fi

bash "$here/install-debian-packages.sh" build-llama-cpp cc=gcc c++=g++ cmake=cmake ninja=ninja-build
mkdir -p "$cache_root"
exec 9>"$cache_root/.llama-cpp-python.lock"
flock 9
if [[ -x "$dest/bin/python" ]]; then  # built by the caller we waited for
  echo "$dest"
  exit 0
fi

echo "build-llama-cpp: llama-cpp-python $version (Python $python_version)" >&2
work=$(mktemp -d "$cache_root/.llama-cpp-python-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$uv" venv --quiet --relocatable --python "$python" "$work/env"
# --no-cache: uv's cache keys a wheel built from an sdist by the sdist alone, not by CMAKE_ARGS,
# so a wheel built elsewhere with other flags could be taken for this one.
CMAKE_ARGS="$cmake_args" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
  "$uv" pip install --no-cache --python "$work/env/bin/python" --require-hashes --no-deps \
  --build-constraints "$pins/build-constraints.txt" -r "$pins/requirements.txt"
"$work/env/bin/python" -c '
import llama_cpp, llama_cpp.server.app
assert llama_cpp.__version__ == "'"$version"'", llama_cpp.__version__
assert not llama_cpp.llama_supports_gpu_offload(), "a GPU backend was built"
'
mv "$work/env" "$dest"

echo "$dest"
