#!/usr/bin/env bash
# Installs the Debian packages that provide the given commands, only those missing.
#
#   install-debian-packages.sh LABEL COMMAND=PACKAGE...
#
# A COMMAND starting with / is a path checked for execute permission; anything else is looked up
# on PATH. Idempotent: with every command present it installs nothing. Installing needs root.
set -euo pipefail

label=$1
shift
missing=()
for pair in "$@"; do
  command=${pair%%=*}
  package=${pair#*=}
  if [[ $command == /* ]]; then [[ -x $command ]] && continue
  else command -v "$command" >/dev/null && continue
  fi
  missing+=("$package")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
echo "$label: installing ${missing[*]}" >&2
[[ $(id -u) -eq 0 ]] || { echo "$label: root is required to install them" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
