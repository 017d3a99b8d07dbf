#!/usr/bin/env bash
# The Kubernetes support matrix: for each release of kubernetes-matrix.env, builds its
# kube-apiserver (build-control-plane.sh, beside the pinned etcd) and runs the tests marked
# `kubernetes_matrix` against it: the CRD admission suite, `noctaya validate` beside admission,
# and the operator reconciling a service to all its objects and status. The release below the
# matrix runs the `kubernetes_floor` test instead, which expects its API server to refuse the CRDs.
#
# Usage: test-kubernetes-matrix.sh [--oldest | VERSION...]   (no argument: every release, and
# the one below). Prints a table: seconds spent building (0: already built), testing, outcome.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=kubernetes-matrix.env
source "$here/kubernetes-matrix.env"
read -ra matrix <<< "$KUBERNETES_MATRIX"

case "${1:-}" in
  --oldest) versions=("${matrix[0]}") ;;
  "") versions=("${matrix[@]}" "$KUBERNETES_BELOW_MATRIX") ;;
  *) versions=("$@") ;;
esac

cd "$repo"
rows=()
status=0
for version in "${versions[@]}"; do
  export NOCTAYA_KUBERNETES_VERSION=$version
  started=$SECONDS
  bash "$here/build-control-plane.sh" > /dev/null
  built=$((SECONDS - started))
  marker=kubernetes_matrix
  [[ $version == "$KUBERNETES_BELOW_MATRIX" ]] && marker=kubernetes_floor
  started=$SECONDS
  outcome=passed
  .venv/bin/pytest -q -p no:cacheprovider -m "$marker" tests || { outcome=FAILED; status=1; }
  rows+=("$(printf '%-9s %-17s %6ss %6ss  %s' "$version" "$marker" "$built" "$((SECONDS - started))" "$outcome")")
done
unset NOCTAYA_KUBERNETES_VERSION

printf '%-9s %-17s %7s %7s  %s\n' release tests build test outcome
printf '%s\n' "${rows[@]}"
exit "$status"
