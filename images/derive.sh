#!/usr/bin/env bash
# A derived image: an image build.sh made, plus wheels (a vendor plugin, say) installed into its
# Python environment by install-wheels.sh, as build.sh installs the project's own, in one more
# layer. The images have no pip and no shell: a package is added from outside, as they were
# built, and needs no container daemon.
#
# Usage: images/derive.sh BASE NAME OUT WHEEL...   (root; umoci)
#   BASE   the archive to start from, e.g. build/images/noctaya-0.1.0.oci.tar
#   NAME   the derived image's name, e.g. registry.example.com/noctaya/noctaya-example:0.1.0
#   OUT    the archive to write (for `ctr images import` or `skopeo copy oci-archive:OUT ...`)
#   WHEEL  wheels to install; each may depend on what the image holds already, nothing more
set -euo pipefail

if [[ $# -lt 4 ]]; then
  echo "usage: $0 BASE NAME OUT WHEEL..." >&2
  exit 2
fi
base=$1 name=$2 out=$3
shift 3
repo=$(cd "$(dirname "$0")/.." && pwd)
uv=${UV:-$(command -v uv || echo "$repo/.tools/bin/uv")}
if ! command -v umoci > /dev/null; then
  echo "umoci missing: run \`apt-get install umoci\`" >&2
  exit 1
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "images/derive.sh needs root (it chroots into the image's root filesystem)" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/layout" "$work/dist"
tar -xf "$base" -C "$work/layout"
tag=$(python3 -c 'import json, sys; (m,) = json.load(open(sys.argv[1]))["manifests"]; print(m["annotations"]["org.opencontainers.image.ref.name"])' "$work/layout/index.json")
cp "$@" "$work/dist/"

umoci unpack --image "$work/layout:$tag" "$work/bundle"
bash "$repo/images/install-wheels.sh" "$work/bundle/rootfs" "$work/dist" "$uv"
umoci repack --image "$work/layout:$tag" --history.created_by \
  "images/derive.sh: $(cd "$work/dist" && printf '%s ' *.whl)" "$work/bundle"
umoci gc --layout "$work/layout"
bash "$repo/images/write-archive.sh" "$work/layout" "$tag" "$name" "$out"
