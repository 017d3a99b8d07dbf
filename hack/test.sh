#!/usr/bin/env bash
# `make test` once its set-up is done: the main suite, then the oldest Kubernetes release's CRD
# and operator tests, then the e2e tests in the three-node cluster.
#
# The main suite leaves more than half of a 2-core machine idle (it waits on its peers more than
# it computes), and needs neither the box's programs nor the oldest release's kube-apiserver. On
# a machine without them, those build meanwhile at the lowest CPU priority, so they take only the
# time the suite leaves; the suite's own kubectl (the kustomize guide's test) builds first, with
# the box's Kubernetes commands. With everything built (CI's warm caches) the builds only check
# their folders. Their output goes to build/background-builds.log, printed if they fail.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here/.."
# shellcheck source=kubernetes-matrix.env
source "$here/kubernetes-matrix.env"
read -ra matrix <<< "$KUBERNETES_MATRIX"

bash "$here/fetch-keda-crds.sh"
bash "$here/build-cluster.sh" kubernetes > /dev/null

mkdir -p build
log=build/background-builds.log
# A session of its own, so that a failing suite takes the builds' go processes down with it.
setsid nice -n 19 bash -c '
  set -euo pipefail
  bash "$1/build-cluster.sh" > /dev/null
  NOCTAYA_KUBERNETES_VERSION=$2 bash "$1/build-control-plane.sh" > /dev/null
' background-builds "$here" "${matrix[0]}" > "$log" 2>&1 &
builds=$!
trap 'kill -- -"$builds" 2> /dev/null || true' EXIT

.venv/bin/pytest
started=$SECONDS
if ! wait "$builds"; then
  echo "test: building the box's programs or the oldest kube-apiserver failed:" >&2
  cat "$log" >&2
  exit 1
fi
trap - EXIT
echo "test: waited $((SECONDS - started)) s after the main suite for the background builds" >&2
bash "$here/test-kubernetes-matrix.sh" --oldest
.venv/bin/pytest -m e2e tests/e2e
