# Set-up and test entry points. `make test` is what CI runs (through .ci/run).
SHELL := /bin/bash
UV_VERSION := 0.13.8
export UV_PYTHON_DOWNLOADS := never
UV := $(shell command -v uv 2>/dev/null || echo .tools/bin/uv)

.PHONY: test sync control-plane helm test-packages llama-cpp lint crds docs proto demo cluster-deps cluster images matrix dist

$(UV):
	python3 -m venv .tools && .tools/bin/pip install -q uv==$(UV_VERSION)

sync: $(UV)
	$(UV) sync --locked --all-packages

control-plane:
	bash hack/build-control-plane.sh

helm:
	bash hack/build-helm.sh

# llama.cpp's server (llama-cpp-python[server], compiled from its sdist once per pinned set into
# ~/.cache/noctaya/tools): the real CPU engine local mode's tests serve a generated model with.
# It lives in an environment of its own because `make sync` (`uv sync --locked`) removes from
# .venv whatever uv.lock does not list; see the script for why it is not a dependency group.
llama-cpp: $(UV)
	UV=$(UV) bash hack/build-llama-cpp.sh

# Debian packages the suite runs as real peers (the OCI registry for the fetcher tests).
test-packages:
	bash hack/install-test-packages.sh

# The three-node test cluster (tests/e2e): Debian packages (root), then the Go builds.
cluster-deps:
	bash hack/install-cluster-deps.sh

cluster: control-plane cluster-deps
	bash hack/build-cluster.sh

# The main and engine-stub images as OCI archives in build/images (root; apt-get install mmdebstrap umoci).
images: $(UV)
	UV=$(UV) bash images/build.sh

lint: sync
	.venv/bin/ruff check .
	.venv/bin/mypy packages/noctaya-core/src

# The e2e tests (tests/e2e, in the three-node test cluster) run after the rest of the suite, which
# deselects them (pyproject.toml addopts). The main suite runs on the newest Kubernetes release
# of the support matrix; the oldest runs its CRD and operator tests in between.
test: sync control-plane helm test-packages cluster llama-cpp lint
	bash hack/fetch-keda-crds.sh
	.venv/bin/pytest
	bash hack/test-kubernetes-matrix.sh --oldest
	.venv/bin/pytest -m e2e tests/e2e

# Every release of the Kubernetes support matrix (hack/kubernetes-matrix.env), and the release
# below it, which must still refuse the CRDs: builds each kube-apiserver once (about 5 minutes).
matrix: sync
	bash hack/fetch-keda-crds.sh
	bash hack/test-kubernetes-matrix.sh

demo: sync
	.venv/bin/python -m noctaya.local.demo examples/local/engine-stub.yaml

crds: sync
	.venv/bin/noctaya crds --output config/crd/bases
	.venv/bin/noctaya crds --output charts/noctaya/crds
	.venv/bin/noctaya rbac --output config/rbac

docs: sync
	.venv/bin/noctaya docs api-reference --output docs/reference/api.md
	.venv/bin/noctaya docs operator-flags --output docs/operations/operator-flags.md
	.venv/bin/python hack/gen-metrics-docs.py
	.venv/bin/python hack/gen-metrics-docs.py --page gateway-settings
	.venv/bin/mkdocs build --strict -d site

# A wheel and an sdist of every distribution under packages/ into dist/ (DIST=DIR for another
# folder), each wheel built from its sdist: `pip install dist/*.whl` installs Noctaya without a
# clone, its dependencies from the package index. tests/release installs what this builds.
dist: $(UV)
	$(UV) build --all-packages --clear --out-dir $(or $(DIST),dist)

proto: sync
	.venv/bin/python hack/gen-scaler-proto.py
