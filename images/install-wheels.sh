#!/usr/bin/env bash
# Install Noctaya's wheels and their locked dependencies into a virtualenv inside a root
# filesystem, with the root filesystem's own Python. The Dockerfile and images/build.sh both run
# this script, so the images they make hold the same packages installed the same way; derive.sh
# runs it to add wheels (a vendor plugin) to the environment of an image already built.
#
# Usage: install-wheels.sh ROOTFS DIST UV
#   ROOTFS  the image's root filesystem; gets /opt/noctaya (needs root: it chroots into ROOTFS)
#   DIST    a directory with the wheels to install and requirements.txt (`uv export`, hashed),
#           or without requirements.txt: wheels added to ROOTFS's existing /opt/noctaya, which
#           must already hold every dependency they have (`pip check` says which is missing)
#   UV      the uv binary that installs them; copied in for the install and removed afterwards
set -euo pipefail

if [[ $# -ne 3 ]]; then
  echo "usage: $0 ROOTFS DIST UV" >&2
  exit 2
fi
rootfs=$1 dist=$2 uv=$3
venv=/opt/noctaya
python=/usr/bin/python3.11
work=/tmp/noctaya-install

shopt -s nullglob
wheels=("$dist"/*.whl)
requirements=$dist/requirements.txt
if [[ ${#wheels[@]} -eq 0 ]]; then
  echo "$dist holds no wheel to install" >&2
  exit 2
fi
if [[ ! -f $requirements && ! -x $rootfs$venv/bin/python ]]; then
  echo "$dist has no requirements.txt and $rootfs has no $venv to add the wheels to" >&2
  exit 2
fi

# uv reaches the index from inside ROOTFS: it needs the builder's name resolution, and its CA
# bundle when the builder sets one (a proxy's own CA, say); it runs Python with /dev/null as
# stdin. The image keeps none of them: the container runtime brings its own.
cleanup() { rm -rf "${rootfs:?}$work" "$rootfs/etc/resolv.conf" "$rootfs/dev/null"; }
trap cleanup EXIT
mkdir -p "$rootfs$work/dist" "$rootfs/dev"
rm -f "$rootfs/dev/null"
mknod -m 666 "$rootfs/dev/null" c 1 3
cp "$uv" "$rootfs$work/uv"
cp "${wheels[@]}" "$rootfs$work/dist/"
cp -L /etc/resolv.conf "$rootfs/etc/resolv.conf"
environment=(PATH=/usr/bin:/bin HOME=$work UV_CACHE_DIR=$work/cache UV_NO_CONFIG=1
  UV_PYTHON_DOWNLOADS=never)
if [[ -n ${SSL_CERT_FILE:-} ]]; then
  cp -L "$SSL_CERT_FILE" "$rootfs$work/ca.pem"
  environment+=(SSL_CERT_FILE=$work/ca.pem)
fi
for name in UV_INDEX_URL UV_DEFAULT_INDEX HTTPS_PROXY https_proxy NO_PROXY no_proxy; do
  if [[ -n ${!name:-} ]]; then environment+=("$name=${!name}"); fi
done

in_rootfs() {
  env -i "${environment[@]}" "$(command -v chroot)" "$rootfs" "$work/uv" "$@"
}
if [[ -f $requirements ]]; then
  cp "$requirements" "$rootfs$work/requirements.txt"
  in_rootfs venv --quiet --no-project --python "$python" "$venv"
  in_rootfs pip install --quiet --python "$venv/bin/python" --no-deps --require-hashes \
    --compile-bytecode --link-mode=copy -r "$work/requirements.txt"
fi
(cd "$rootfs$work/dist" && printf '%s\n' *.whl) | sed "s|^|$work/dist/|" > "$rootfs$work/wheels.txt"
in_rootfs pip install --quiet --python "$venv/bin/python" --no-deps --compile-bytecode \
  --link-mode=copy -r "$work/wheels.txt"
in_rootfs pip check --python "$venv/bin/python"
