#!/usr/bin/env bash
# Builds the three-node test cluster's programs from their Go modules into a cache folder
# outside the work tree (the control plane's etcd and kube-apiserver come from
# build-control-plane.sh; containerd, runc and the CNI plugins are Debian's, installed by
# install-cluster-deps.sh):
#   - kube-controller-manager, kube-scheduler, kubelet, kube-proxy, and kubectl (the e2e tests
#     run the getting-started guide's kubectl commands with it): one `go build` of those
#     missing in the throwaway k8s.io/kubernetes module of lib/kubernetes-module.sh;
#   - coredns, kube-router (the NetworkPolicy enforcer, run with only its firewall controller)
#     and local-path-provisioner (PersistentVolumes in node folders): `go install`, their go.mod
#     files have no replace directives;
#   - keda, keda-adapter and box-agent (the tests' workload, box-agent/main.go, which serves
#     KEDA's external scaler protocol): one `go build` in a wrapper module carrying the replace
#     directives of KEDA's go.mod, so the build resolves what KEDA's own build resolves; KEDA's
#     config/ (CRDs, RBAC, Deployments, APIService) is copied beside them.
#
# Idempotent: with everything present it only prints the folder. `--print-dir` prints it without
# building. Optional arguments (kubernetes, coredns, keda, kube-router, local-path-provisioner)
# build only those parts.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=control-plane-versions.env
source "$here/control-plane-versions.env"
# shellcheck source=cluster-versions.env
source "$here/cluster-versions.env"
# shellcheck source=lib/kubernetes-module.sh
source "$here/lib/kubernetes-module.sh"

agent_hash=$(sha256sum "$here/box-agent/main.go" | cut -c1-12)
cache_root=${NOCTAYA_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/noctaya/cluster}
dest="$cache_root/kubernetes-$KUBERNETES_VERSION-coredns-$COREDNS_VERSION-keda-$KEDA_VERSION"
dest+="-kube-router-$KUBE_ROUTER_VERSION-local-path-$LOCAL_PATH_PROVISIONER_VERSION-agent-$agent_hash"
kube_commands=(kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)

present() {
  local name
  for name in "$@"; do [[ -x "$dest/$name" ]] || return 1; done
}
all_present() {
  present "${kube_commands[@]}" coredns keda keda-adapter box-agent kube-router \
    local-path-provisioner && [[ -d "$dest/keda-config" ]]
}

if [[ "${1:-}" == "--print-dir" ]] || all_present; then
  echo "$dest"
  exit 0
fi

command -v go >/dev/null || { echo "build-cluster: go is required" >&2; exit 1; }
mkdir -p "$dest"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod CGO_ENABLED=0
parts=("$@")
[[ ${#parts[@]} -gt 0 ]] || parts=(kubernetes coredns keda kube-router local-path-provisioner)

# build_into OUT_NAMES... -- PACKAGES...: one `go build` of PACKAGES, each binary (named by the
# package's last path element) moved into $dest under the matching OUT_NAME.
build_into() {
  local names=() packages=() out="$work/out.$RANDOM" i
  while [[ $1 != -- ]]; do names+=("$1"); shift; done
  shift
  packages=("$@")
  mkdir -p "$out"
  go build -trimpath -ldflags "$ldflags" -o "$out/" "${packages[@]}"
  for i in "${!packages[@]}"; do
    mv "$out/${packages[$i]##*/}" "$dest/${names[$i]}"
  done
}

for part in "${parts[@]}"; do
  started=$SECONDS
  case $part in
    kubernetes)
      # Only the missing ones: a command added to the list does not relink the others.
      missing=()
      for name in "${kube_commands[@]}"; do present "$name" || missing+=("$name"); done
      [[ ${#missing[@]} -eq 0 ]] && continue
      echo "build-cluster: ${missing[*]} $KUBERNETES_VERSION" >&2
      mkdir -p "$work/kube" && cd "$work/kube"
      kubernetes_module build-cluster-kubernetes "$KUBERNETES_VERSION"
      packages=()
      for name in "${missing[@]}"; do packages+=("k8s.io/kubernetes/cmd/$name"); done
      go get "${packages[@]/%/@$KUBERNETES_VERSION}"
      ldflags=$(kubernetes_ldflags "$KUBERNETES_VERSION")
      build_into "${missing[@]}" -- "${packages[@]}"
      ;;
    coredns)
      present coredns && continue
      echo "build-cluster: coredns $COREDNS_VERSION" >&2
      GOBIN="$work/coredns-bin" go install -trimpath -ldflags "-s -w" \
        "github.com/coredns/coredns@$COREDNS_VERSION"
      mv "$work/coredns-bin/coredns" "$dest/coredns"
      ;;
    keda)
      present keda keda-adapter box-agent && [[ -d "$dest/keda-config" ]] && continue
      echo "build-cluster: keda, keda-adapter $KEDA_VERSION and box-agent" >&2
      mkdir -p "$work/keda/box-agent" && cd "$work/keda"
      go mod init noctaya.local/build-cluster-keda >/dev/null 2>&1
      info=$(go mod download -json "github.com/kedacore/keda/v2@$KEDA_VERSION")
      gomod=$(sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p' <<<"$info")
      module_dir=$(sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p' <<<"$info")
      sed -i "s/^go .*/$(grep -m1 '^go ' "$gomod")/" go.mod
      # KEDA's replace directives, blocks and single lines, verbatim.
      awk '/^replace \($/,/^\)$/ {print; next} /^replace / {print}' "$gomod" >> go.mod
      cp "$here/box-agent/main.go" box-agent/
      keda=github.com/kedacore/keda/v2
      go get "$keda/cmd/operator@$KEDA_VERSION" "$keda/cmd/adapter@$KEDA_VERSION"
      ldflags="-s -w -X $keda/version.Version=$KEDA_VERSION"
      build_into keda keda-adapter box-agent -- "$keda/cmd/operator" "$keda/cmd/adapter" \
        noctaya.local/build-cluster-keda/box-agent
      rm -rf "$dest/keda-config.partial"
      cp -r "$module_dir/config" "$dest/keda-config.partial"
      chmod -R u+w "$dest/keda-config.partial"
      mv "$dest/keda-config.partial" "$dest/keda-config"
      ;;
    kube-router)
      present kube-router && continue
      echo "build-cluster: kube-router $KUBE_ROUTER_VERSION" >&2
      router=github.com/cloudnativelabs/kube-router/v2
      GOBIN="$work/kube-router-bin" go install -trimpath \
        -ldflags "-s -w -X $router/pkg/version.Version=$KUBE_ROUTER_VERSION" \
        "$router/cmd/kube-router@$KUBE_ROUTER_VERSION"
      mv "$work/kube-router-bin/kube-router" "$dest/kube-router"
      ;;
    local-path-provisioner)
      present local-path-provisioner && continue
      echo "build-cluster: local-path-provisioner $LOCAL_PATH_PROVISIONER_VERSION" >&2
      GOBIN="$work/local-path-bin" go install -trimpath \
        -ldflags "-s -w -X main.VERSION=$LOCAL_PATH_PROVISIONER_VERSION" \
        "github.com/rancher/local-path-provisioner@$LOCAL_PATH_PROVISIONER_VERSION"
      mv "$work/local-path-bin/local-path-provisioner" "$dest/local-path-provisioner"
      ;;
    *)
      echo "build-cluster: unknown part $part" \
        "(kubernetes, coredns, keda, kube-router, local-path-provisioner)" >&2
      exit 2
      ;;
  esac
  echo "build-cluster: $part built in $((SECONDS - started)) s" >&2
done

echo "$dest"
