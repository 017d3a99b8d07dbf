"""The operator loads its metrics stack only when it serves metrics: the chart turns them off,
and prometheus_client with cryptography (its self-signed certificate) cost every operator about
10 MiB of memory and a fifth of its start-up. Nor does it load the parts of the `kubernetes`
client it never calls in a cluster (`lean_kubernetes`): kubeconfig files' loader with requests and
oauthlib, exec streams with websocket-client, the client's own leader election and informer,
and until called, the date parser of typed models, the thread pool of `async_req` calls and the
YAML printer of dynamic resources."""

from __future__ import annotations

import json
import subprocess
import sys

METRICS_STACK = (
    "cryptography",
    "prometheus_client",
    "noctaya.k8s.operator.metrics",
    "noctaya.k8s.operator.metrics_server",
    "noctaya.k8s.operator.serving_certificate",
)
UNUSED_CLIENT_PARTS = (
    "kubernetes.config.kube_config",
    "requests",
    "requests_oauthlib",
    "oauthlib",
    "kubernetes.stream",
    "websocket",
    "kubernetes.leaderelection",
    "kubernetes.informer",
    "kubernetes.utils.create_from_yaml",
    "yaml",
    "dateutil.parser",
    "multiprocessing.pool",
)


def test_the_operator_entry_imports_neither_its_metrics_stack_nor_unused_client_parts() -> None:
    listing = "import json, sys, noctaya.k8s.operator.main; print(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", listing], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = set(json.loads(result.stdout))
    assert sorted(
        name for name in loaded for stack in METRICS_STACK + UNUSED_CLIENT_PARTS
        if name == stack or name.startswith(stack + ".")
    ) == []  # fmt: skip
    assert "noctaya.k8s.controller" in loaded, "the entry's own stack is loaded"
