#!/usr/bin/env bash
# Build the wheels the images carry, and their locked dependencies as a hashed requirements.txt,
# into DIST. images/build.sh and the Dockerfile both run this script, so both images hold the
# same distributions.
#
# The images carry what runs in a cluster: the operator, the gateway and aggregator, the
# noctaya-fetch of the prewarm and staging Jobs, the vendor adapters. Local mode (noctaya-local)
# serves one machine and is installed there with pip; leaving it out keeps grpcio and protobuf,
# which only it needs, out of every image (19 MiB installed).
#
# Usage: build-wheels.sh DIST UV   (run from the repository's root)
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 DIST UV" >&2
  exit 2
fi
dist=$1 uv=$2
packages=(noctaya-core noctaya-k8s noctaya-gateway noctaya-fetch noctaya-vendor-nvidia noctaya-vendor-ascend noctaya-vendor-cpu)

export_args=()
for package in "${packages[@]}"; do
  "$uv" build --quiet --package "$package" --wheel -o "$dist"
  export_args+=(--package "$package")
done
"$uv" export --quiet --frozen --no-dev "${export_args[@]}" --no-emit-workspace \
  -o "$dist/requirements.txt"
