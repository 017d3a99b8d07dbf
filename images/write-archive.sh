#!/usr/bin/env bash
# Write an OCI layout holding one image as an archive `ctr images import` and skopeo's
# oci-archive: read: its manifest annotated with the tag (org.opencontainers.image.ref.name) and
# the full name containerd imports it as (io.containerd.image.name). Shared by build.sh and
# derive.sh, so both archives are the same kind of file.
#
# Usage: write-archive.sh LAYOUT TAG NAME OUT
set -euo pipefail

if [[ $# -ne 4 ]]; then
  echo "usage: $0 LAYOUT TAG NAME OUT" >&2
  exit 2
fi
layout=$1 tag=$2 name=$3 out=$4

python3 - "$layout/index.json" "$tag" "$name" <<'PY'
import json, sys
path, tag, name = sys.argv[1:]
index = json.load(open(path))
(manifest,) = index["manifests"]
manifest["annotations"] = {"org.opencontainers.image.ref.name": tag, "io.containerd.image.name": name}
json.dump(index, open(path, "w"))
PY
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@0" -C "$layout" \
  -cf "$out.tmp" oci-layout index.json blobs
mv "$out.tmp" "$out"
