#!/usr/bin/env bash
# Builds kube-apiserver and etcd from their Go modules into a cache folder outside the work
# tree, for the integration tests (the envtest pattern: a real API server, no kubelet).
#
# kube-apiserver is built in the throwaway module of lib/kubernetes-module.sh; etcd gets a
# throwaway module of its own so that the two dependency graphs never constrain each other.
#
# Idempotent: with both binaries present it only prints their folder.
# `--print-dir` prints that folder without building, so that the test plugin finds the binaries
# by the same rule (one place pins versions and paths).
#
# NOCTAYA_KUBERNETES_VERSION builds another kube-apiserver release of the support matrix
# (kubernetes-matrix.env) beside the pinned one, with the same etcd: etcd's v3 API is what every
# release of the matrix speaks, so the etcd binary already built is linked, not built again.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=control-plane-versions.env
source "$here/control-plane-versions.env"
# shellcheck source=lib/kubernetes-module.sh
source "$here/lib/kubernetes-module.sh"
KUBERNETES_VERSION=${NOCTAYA_KUBERNETES_VERSION:-$KUBERNETES_VERSION}

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

if [[ ! -x "$dest/kube-apiserver" ]]; then
  echo "build-control-plane: kube-apiserver $KUBERNETES_VERSION" >&2
  started=$SECONDS
  mkdir -p "$work/kube" && cd "$work/kube"
  kubernetes_module build-kube-apiserver "$KUBERNETES_VERSION"
  go get "k8s.io/kubernetes/cmd/kube-apiserver@$KUBERNETES_VERSION"
  go build -trimpath -ldflags "$(kubernetes_ldflags "$KUBERNETES_VERSION")" \
    -o "$dest/kube-apiserver.partial" k8s.io/kubernetes/cmd/kube-apiserver
  mv "$dest/kube-apiserver.partial" "$dest/kube-apiserver"
  echo "build-control-plane: kube-apiserver $KUBERNETES_VERSION built in $((SECONDS - started)) s" >&2
fi

if [[ ! -x "$dest/etcd" ]]; then
  for built in "$cache_root"/kubernetes-*-etcd-"$ETCD_VERSION"/etcd; do
    if [[ -x "$built" ]]; then
      ln -f "$built" "$dest/etcd.partial"
      mv "$dest/etcd.partial" "$dest/etcd"
      break
    fi
  done
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
