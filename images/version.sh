#!/usr/bin/env bash
# The release version: noctaya-k8s's package version, which the chart, kustomize and the
# operator's --gateway-image default follow too.
set -euo pipefail
exec python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' \
  "$(dirname "$0")/../packages/noctaya-k8s/pyproject.toml"
