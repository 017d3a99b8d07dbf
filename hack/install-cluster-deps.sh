#!/usr/bin/env bash
# Installs the Debian packages the three-node test cluster runs on: containerd and runc (the
# kubelet speaks CRI v1 to Debian 12's containerd 1.6), the CNI plugins, iproute2 (`ip netns`),
# iptables (kube-proxy, kube-router), ipset (kube-router's NetworkPolicy address sets),
# util-linux (`nsenter`, `unshare`), busybox-static (the test image's userland) and
# docker-registry (the registry every node pulls its images from).
set -euo pipefail
exec bash "$(dirname "$0")/install-debian-packages.sh" install-cluster-deps \
  containerd=containerd \
  containerd-shim-runc-v2=containerd \
  runc=runc \
  /usr/lib/cni/bridge=containernetworking-plugins \
  ip=iproute2 \
  iptables=iptables \
  ipset=ipset \
  nsenter=util-linux \
  /bin/busybox=busybox-static \
  docker-registry=docker-registry
