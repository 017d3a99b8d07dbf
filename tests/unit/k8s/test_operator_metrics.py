"""Controller metrics count and time reconciles, and the plain metrics endpoint serves them."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from noctaya.k8s.operator.metrics import ControllerMetrics
from noctaya.k8s.operator.metrics_server import MetricsServer


def _fail(key: tuple[str, str]) -> None:
    raise RuntimeError(f"cannot reconcile {key}")


def test_reconciles_are_counted_by_result_and_timed() -> None:
    metrics = ControllerMetrics()
    succeed = metrics.instrument(lambda key: None)
    fail = metrics.instrument(_fail)

    succeed(("ns", "a"))
    succeed(("ns", "b"))
    with pytest.raises(RuntimeError):
        fail(("ns", "c"))

    assert metrics.reconciles("success") == 2
    assert metrics.reconciles("error") == 1
    sample = metrics.registry.get_sample_value
    labels = {"controller": "llmservice"}
    assert sample("controller_runtime_reconcile_errors_total", labels) == 1
    assert sample("controller_runtime_reconcile_time_seconds_count", labels) == 3


def test_the_metrics_endpoint_serves_the_registry_over_plain_http() -> None:
    metrics = ControllerMetrics()
    metrics.instrument(lambda key: None)(("ns", "a"))
    server = MetricsServer("127.0.0.1:0", metrics.registry)
    server.start()
    try:
        url = f"http://127.0.0.1:{server.port}"
        with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
            body = response.read().decode()
            assert response.headers["Content-Type"].startswith("text/plain; version=")
        success = 'controller_runtime_reconcile_total{controller="llmservice",result="success"}'
        assert f"{success} 1.0" in body
        assert "process_cpu_seconds_total" in body
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"{url}/healthz", timeout=5)
        assert missing.value.code == 404
        assert missing.value.read() == b"Not Found\n"
        assert missing.value.headers["Content-Type"] == "text/plain; charset=utf-8"
        assert missing.value.headers["X-Content-Type-Options"] == "nosniff"
    finally:
        server.stop()
