#!/usr/bin/env bash
# Builds kube-apiserver and etcd from their Go modules into a cache folder outside the work
# tree, for the integration tests (the envtest pattern: a real API server, no kubelet).
#
# k8s.io/kubernetes cannot be `go install`ed: its go.mod replaces every k8s.io staging module
# with a local path. A throwaway module that requires it and replaces each staging module with
# its published v0.x.y twin builds it as any other module. etcd gets a throwaway module of its
# own so that the two dependency graphs never constrain each other.
#
# Idempotent: with both binaries present it only prints their folder.
# `--print-dir` prints that folder without building, so that the test plugin finds the binaries
# by the same rule (one place pins versions and paths).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=control-plane-versions.env
source "$here/control-plane-versions.env"

cache_root=${NOCTAYA_CONTROL_PLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/noctaya/control-plane}
dest="$cache_root/kubernetes-$KUBERNETES_VERSION-etcd-$ETCD_VERSION"

if [[ "${1:-}" == "--print-dir" || ( -x "$dest/kube-apiserver" && -x "$dest/etcd" ) ]]; then
  echo "$dest"
  exit 0
fi

command -v go >/dev/null || { echo "build-control-plane: go is required" >&2; exit 1; }
mkdir -p "$dest"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod CGO_ENABLED=0

staging_version="v0.${KUBERNETES_VERSION#v1.}"

if [[ ! -x "$dest/kube-apiserver" ]]; then
  echo "build-control-plane: kube-apiserver $KUBERNETES_VERSION (staging $staging_version)" >&2
  mkdir -p "$work/kube" && cd "$work/kube"
  go mod init noctaya.local/build-kube-apiserver >/dev/null 2>&1
  gomod=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')
  go_line=$(grep -m1 '^go ' "$gomod")
  sed -i "s/^go .*/$go_line/" go.mod
  grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging/src/k8s\.io/[a-z0-9-]+' "$gomod" \
    | awk -v v="$staging_version" '{print "replace " $1 " => " $1 " " v}' >> go.mod
  go get "k8s.io/kubernetes/cmd/kube-apiserver@$KUBERNETES_VERSION"
  go build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION" \
    -o "$dest/kube-apiserver.partial" k8s.io/kubernetes/cmd/kube-apiserver
  mv "$dest/kube-apiserver.partial" "$dest/kube-apiserver"
fi

if [[ ! -x "$dest/etcd" ]]; then
  echo "build-control-plane: etcd $ETCD_VERSION" >&2
  mkdir -p "$work/etcd" && cd "$work/etcd"
  go mod init noctaya.local/build-etcd >/dev/null 2>&1
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$dest/etcd.partial" go.etcd.io/etcd/server/v3
  mv "$dest/etcd.partial" "$dest/etcd"
fi

echo "$dest"
