#!/usr/bin/env bash
# The images' root filesystems from Debian bookworm's packages, unpacked without running their
# maintainer scripts, so no shell is needed in them. Python is Debian's python3.11 (the
# interpreter is pinned by the Debian release), run by an unprivileged user. libstdc++ is for
# grpcio's extension.
#
# Usage: build-rootfs.sh ROOTFS SHELL
#   ROOTFS  the main image's root filesystem (created; must not exist)
#   SHELL   busybox as /bin/sh and /bin/sleep, the one extra layer of the engine-stub image
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 ROOTFS SHELL" >&2
  exit 2
fi
rootfs=$1 shell=$2
if [[ -e $rootfs || -e $shell ]]; then
  echo "$rootfs and $shell must not exist yet" >&2
  exit 2
fi

# Nothing runs inside the tree while it is unpacked, so nothing is mounted in it.
mmdebstrap --quiet --variant=extract --skip=chroot/mount \
  --include=python3.11-minimal,libpython3.11-stdlib,libstdc++6,busybox \
  bookworm "$rootfs"

# mmdebstrap unpacks dpkg and tar into every tree; an image is replaced, never upgraded in place.
# Documentation, translations and package-manager state are not read by anything in the image;
# the container runtime brings /dev, the host name and name resolution.
rm -rf "$rootfs"/dev/* "$rootfs"/etc/{hostname,resolv.conf,fstab} \
  "$rootfs"/{etc/apt,etc/dpkg,etc/alternatives,etc/cron.daily,etc/logrotate.d,etc/rmt} \
  "$rootfs"/{var/lib/dpkg,var/lib/apt,var/cache/apt,var/log/*} \
  "$rootfs"/{bin/tar,sbin/start-stop-daemon,usr/sbin/*,usr/bin/dpkg*,usr/bin/update-alternatives} \
  "$rootfs"/usr/share/{binfmts,bug,doc,dpkg,info,initramfs-tools,lintian,locale,man,polkit-1}

# busybox moves to its own layer; the main image keeps no shell.
mkdir -p "$shell/bin"
mv "$rootfs/bin/busybox" "$shell/bin/busybox"
ln -s busybox "$shell/bin/sh"
ln -s busybox "$shell/bin/sleep"

cat > "$rootfs/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
PASSWD
cat > "$rootfs/etc/group" <<'GROUP'
root:x:0:
nonroot:x:65532:
GROUP
mkdir -p "$rootfs/root" "$rootfs/home/nonroot"
chmod 0700 "$rootfs/root"
chown 65532:65532 "$rootfs/home/nonroot"
chmod 1777 "$rootfs/tmp"
