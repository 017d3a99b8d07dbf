#!/usr/bin/env bash
# Build every image Noctaya ships as OCI archives, without a container daemon or image pulls: the
# wheels of this repository, a Debian root filesystem (build-rootfs.sh), the wheels installed
# into it by install-wheels.sh (the Dockerfile runs the same two scripts), packed by umoci. The
# llama.cpp runtime image is the same root filesystem with llama-cpp-python's OpenAI server
# (the version local mode runs) installed instead of Noctaya, from a wheel compiled for any
# x86-64 CPU by build-llama-cpp-wheel.sh (cached: a second build does not compile again).
#
# Usage: images/build.sh [OUT]   (root; OUT defaults to build/images)
# Writes OUT/noctaya-VERSION.oci.tar, OUT/noctaya-engine-stub-VERSION.oci.tar and
# OUT/noctaya-llamacpp-VERSION.oci.tar, each named for `ctr images import`
# (io.containerd.image.name) as ghcr.io/noctaya/<image>:VERSION, or REGISTRY/<image>:VERSION.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$repo/build/images}" && cd "${1:-$repo/build/images}" && pwd)
uv=${UV:-$(command -v uv || echo "$repo/.tools/bin/uv")}
registry=${REGISTRY:-ghcr.io/noctaya}
version=$("$repo/images/version.sh")
# shellcheck source=images/labels.env
source "$repo/images/labels.env"

missing=()
for tool in mmdebstrap umoci chroot; do
  command -v "$tool" > /dev/null || missing+=("$tool")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "missing ${missing[*]}: run \`apt-get install mmdebstrap umoci\`" >&2
  exit 1
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "images/build.sh needs root (it chroots into the image's root filesystem)" >&2
  exit 1
fi

work=$out/work
rm -rf "$work"
mkdir -p "$work/dist"

llama_wheel=$(bash "$repo/images/build-llama-cpp-wheel.sh" "$uv")
(cd "$repo" && bash images/build-wheels.sh "$work/dist" "$uv")
bash "$repo/images/build-rootfs.sh" "$work/rootfs" "$work/shell"
cp -a "$work/rootfs" "$work/llamacpp-rootfs"
bash "$repo/images/install-wheels.sh" "$work/rootfs" "$work/dist" "$uv"
# The server's locked dependencies from the index, llama-cpp-python itself from the wheel.
mkdir "$work/llamacpp-dist"
cp "$llama_wheel"/*.whl "$work/llamacpp-dist/"
python3 - "$repo/hack/llama-cpp/requirements.txt" "$work/llamacpp-dist/requirements.txt" <<'PY'
import re, sys
source, out = sys.argv[1:]
text = open(source).read()
open(out, "w").write(re.sub(r"(?m)^llama-cpp-python==.*\n(    .*\n)*", "", text))
PY
bash "$repo/images/install-wheels.sh" "$work/llamacpp-rootfs" "$work/llamacpp-dist" "$uv"

created=$(date -u -d "@${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)}" +%Y-%m-%dT%H:%M:%SZ)
layout=$work/oci
umoci init --layout "$layout"
umoci new --image "$layout:noctaya"
umoci insert --image "$layout:noctaya" --history.created "$created" \
  --history.created_by "images/build-rootfs.sh; images/install-wheels.sh" "$work/rootfs" /
umoci config --image "$layout:noctaya" --no-history --created "$created" \
  --config.user 65532:65532 --config.workingdir /home/nonroot \
  --config.env PATH=/opt/noctaya/bin:/usr/bin:/bin --config.env PYTHONDONTWRITEBYTECODE=1 \
  --config.entrypoint noctaya-gateway \
  --config.label "org.opencontainers.image.title=noctaya" \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.source=$SOURCE" \
  --config.label "org.opencontainers.image.licenses=$LICENSES"
umoci config --image "$layout:noctaya" --tag engine-stub --no-history --created "$created" \
  --config.entrypoint noctaya-engine-stub \
  --config.label "org.opencontainers.image.title=noctaya-engine-stub"
umoci insert --image "$layout:engine-stub" --history.created "$created" \
  --history.created_by "busybox as /bin/sh and /bin/sleep (images/build-rootfs.sh)" "$work/shell" /

umoci new --image "$layout:llamacpp"
umoci insert --image "$layout:llamacpp" --history.created "$created" \
  --history.created_by "images/build-rootfs.sh; images/build-llama-cpp-wheel.sh; images/install-wheels.sh" \
  "$work/llamacpp-rootfs" /
umoci config --image "$layout:llamacpp" --no-history --created "$created" \
  --config.user 65532:65532 --config.workingdir /home/nonroot \
  --config.env PATH=/opt/noctaya/bin:/usr/bin:/bin --config.env PYTHONDONTWRITEBYTECODE=1 \
  --config.entrypoint python --config.entrypoint -m --config.entrypoint llama_cpp.server \
  --config.label "org.opencontainers.image.title=noctaya-llamacpp" \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.source=$SOURCE" \
  --config.label "org.opencontainers.image.licenses=$LICENSES"

for image in noctaya engine-stub llamacpp; do
  name=noctaya-${image#noctaya}
  name=${name%-}
  single=$work/$name
  cp -a "$layout" "$single"
  for other in noctaya engine-stub llamacpp; do
    [[ $other == "$image" ]] || umoci rm --image "$single:$other"
  done
  umoci gc --layout "$single"
  bash "$repo/images/write-archive.sh" "$single" "$version" "$registry/$name:$version" \
    "$out/$name-$version.oci.tar"
done
rm -rf "$work"
