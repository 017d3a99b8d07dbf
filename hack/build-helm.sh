#!/usr/bin/env bash
# Builds the helm binary from its Go module into a cache folder outside the work tree, for the
# chart tests (tests/helm): `helm lint` and `helm template` run for real, no Python imitation.
#
# helm.sh/helm/v3 has no replace directives, so `go install module@version` builds it. The
# -ldflags are those of helm's own Makefile: the release version for `helm version`, and the
# Kubernetes version `helm template`/`helm lint` assume (1.N for the k8s.io/client-go v0.N it
# requires); without them helm assumes Kubernetes 1.20.
#
# Idempotent: with the binary present it only prints its path.
# `--print-path` prints that path without building, so that the tests find the binary by the
# same rule (this file is the one place that pins the version and the path).
set -euo pipefail

HELM_VERSION=v3.22.0

cache_root=${NOCTAYA_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/noctaya/tools}
dest="$cache_root/helm-$HELM_VERSION"

if [[ "${1:-}" == "--print-path" || -x "$dest/helm" ]]; then
  echo "$dest/helm"
  exit 0
fi

command -v go >/dev/null || { echo "build-helm: go is required" >&2; exit 1; }
echo "build-helm: helm $HELM_VERSION" >&2
mkdir -p "$dest"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gomod=$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')
client_go=$(awk '$1 == "k8s.io/client-go" {print $2; exit}' "$gomod")
[[ "$client_go" =~ ^v0\.([0-9]+)\. ]] || { echo "build-helm: no k8s.io/client-go in $gomod" >&2; exit 1; }
kube_minor=${BASH_REMATCH[1]}
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$kube_minor"
done
CGO_ENABLED=0 GOBIN="$work" go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
mv "$work/helm" "$dest/helm.partial"
mv "$dest/helm.partial" "$dest/helm"

echo "$dest/helm"
