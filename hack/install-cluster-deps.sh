#!/usr/bin/env bash
# Installs the Debian packages the single-node test cluster runs on: containerd and runc (the
# kubelet speaks CRI v1 to Debian 12's containerd 1.6), the CNI plugins, iproute2 (`ip netns`),
# iptables (kube-proxy) and busybox-static (the test image's userland).
#
# Idempotent: with every command present it installs nothing. Needs root.
set -euo pipefail

declare -A package_of=(
  [containerd]=containerd
  [containerd-shim-runc-v2]=containerd
  [runc]=runc
  [/usr/lib/cni/bridge]=containernetworking-plugins
  [ip]=iproute2
  [iptables]=iptables
  [nsenter]=util-linux
  [/bin/busybox]=busybox-static
)
missing=()
for command in "${!package_of[@]}"; do
  if [[ $command == /* ]]; then [[ -x $command ]] && continue
  else command -v "$command" >/dev/null && continue
  fi
  missing+=("${package_of[$command]}")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
echo "install-cluster-deps: ${missing[*]}" >&2
[[ $(id -u) -eq 0 ]] || { echo "install-cluster-deps: root is required to install them" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
