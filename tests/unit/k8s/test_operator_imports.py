"""The operator loads its metrics stack only when it serves metrics: the chart turns them off,
and prometheus_client with cryptography (its self-signed certificate) cost every operator about
10 MiB of memory and a fifth of its start-up."""

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


def test_the_operator_entry_does_not_import_its_metrics_stack() -> None:
    listing = "import json, sys, noctaya.k8s.operator.main; print(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", listing], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = set(json.loads(result.stdout))
    assert sorted(
        name for name in loaded for stack in METRICS_STACK
        if name == stack or name.startswith(stack + ".")
    ) == []  # fmt: skip
    assert "noctaya.k8s.controller" in loaded, "the entry's own stack is loaded"
