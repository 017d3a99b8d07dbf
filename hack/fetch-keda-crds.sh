#!/usr/bin/env bash
# Copies KEDA's CRDs from KEDA's Go module, at the version pinned in control-plane-versions.env,
# into a cache folder outside the work tree, for the integration tests' API server.
#
# Only the CRDs the operator writes or references are copied: the ScaledJob CRD (a full pod
# template schema, most of the module's CRD bytes) would only slow every test session's start.
#
# Idempotent: with the CRDs present it only prints their folder.
# `--print-dir` prints that folder without fetching, so that the test plugin finds the CRDs by
# the same rule (one place pins the version and the path).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=control-plane-versions.env
source "$here/control-plane-versions.env"

crds=(
  keda.sh_scaledobjects.yaml
  keda.sh_triggerauthentications.yaml
  keda.sh_clustertriggerauthentications.yaml
)
cache_root=${NOCTAYA_KEDA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/noctaya/keda}
dest="$cache_root/$KEDA_VERSION/crds"

present() {
  local name
  for name in "${crds[@]}"; do [[ -s "$dest/$name" ]] || return 1; done
}

if [[ "${1:-}" == "--print-dir" ]] || present; then
  echo "$dest"
  exit 0
fi

command -v go >/dev/null || { echo "fetch-keda-crds: go is required" >&2; exit 1; }
echo "fetch-keda-crds: github.com/kedacore/keda/v2 $KEDA_VERSION" >&2
work=$(mktemp -d)
partial="$dest.partial.$$"
trap 'rm -rf "$work" "$partial"' EXIT
# A throwaway module folder: no go.mod around it decides anything about the download.
cd "$work"
go mod init noctaya.local/fetch-keda-crds >/dev/null 2>&1
module_dir=$(GOFLAGS=-mod=mod go mod download -json "github.com/kedacore/keda/v2@$KEDA_VERSION" \
  | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
[[ -n "$module_dir" ]] || { echo "fetch-keda-crds: go mod download gave no module folder" >&2; exit 1; }

mkdir -p "$partial"
for name in "${crds[@]}"; do
  # The module cache is read-only; the copies are ordinary files.
  install -m 0644 "$module_dir/config/crd/bases/$name" "$partial/$name"
done
rm -rf "$dest"
mv "$partial" "$dest"
echo "$dest"
