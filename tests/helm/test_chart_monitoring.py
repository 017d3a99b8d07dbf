"""The optional Prometheus Operator objects (ServiceMonitor, PrometheusRule): off by default,
exact when on."""

from __future__ import annotations

import re

import pytest

from .chart import Helm, Manifest, find

pytestmark = pytest.mark.helm

BOUNDED = {"namespace", "llmservice", "le"}
BY_SERVICE = "sum by (namespace, llmservice)"
ALERTS = {  # alert -> (for, expression)
    "NoctayaGatewayQueueSaturated": (
        "10m",
        f'{BY_SERVICE} (rate(noctaya_gateway_rejections_total{{reason="queue_full"}}[5m])) > 0.1',
    ),
    "NoctayaGatewayActivationTimeouts": (
        "5m",
        f"{BY_SERVICE} (increase(noctaya_gateway_rejections_total"
        '{reason="activation_timeout"}[15m])) > 3',
    ),
    "NoctayaGatewayActivationWaitHigh": (
        "10m",
        "histogram_quantile(0.95, sum by (namespace, llmservice, le) "
        "(rate(noctaya_gateway_activation_wait_seconds_bucket[10m]))) > 180",
    ),
    "NoctayaExternalScalerStreamMissing": (
        "5m",
        f"{BY_SERVICE} (noctaya_gateway_scaler_streams) < 1",
    ),
}


@pytest.fixture(scope="module")
def monitoring(helm: Helm) -> list[Manifest]:
    return helm.render(
        {
            "monitoring": {
                "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
                "prometheusRule": {"enabled": True},
            }
        }
    )


def test_monitoring_objects_are_off_by_default(default_render: list[Manifest]) -> None:
    assert not [o for o in default_render if o["apiVersion"].startswith("monitoring.coreos.com")]


def test_service_monitor_scrapes_every_llmservice_http_port(monitoring: list[Manifest]) -> None:
    monitor = find(monitoring, "ServiceMonitor", "noctaya-llmservices")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    spec = monitor["spec"]
    assert spec["namespaceSelector"] == {"any": True}
    assert spec["selector"] == {
        "matchLabels": {"app.kubernetes.io/managed-by": "noctaya"},
        "matchExpressions": [{"key": "serving.noctaya.io/llmservice", "operator": "Exists"}],
    }
    (endpoint,) = spec["endpoints"]
    assert endpoint == {
        "port": "http",
        "path": "/metrics",
        "interval": "15s",
        "relabelings": [
            {
                "action": "replace",
                "sourceLabels": ["__meta_kubernetes_service_label_serving_noctaya_io_llmservice"],
                "targetLabel": "llmservice",
            }
        ],
    }


def test_service_monitor_can_be_limited_to_some_namespaces(helm: Helm) -> None:
    objects = helm.render(
        {"monitoring": {"serviceMonitor": {"enabled": True, "namespaces": ["ai"]}}}
    )
    monitor = find(objects, "ServiceMonitor", "noctaya-llmservices")
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["ai"]}


def test_prometheus_rule_holds_the_four_gateway_alerts(monitoring: list[Manifest]) -> None:
    rule = find(monitoring, "PrometheusRule", "noctaya-gateway")
    (group,) = rule["spec"]["groups"]
    assert group["name"] == "noctaya-gateway"
    alerts = {alert["alert"]: alert for alert in group["rules"]}
    assert set(alerts) == set(ALERTS)
    for name, (duration, expression) in ALERTS.items():
        assert (alerts[name]["for"], alerts[name]["expr"]) == (duration, expression)


def test_alerts_aggregate_to_bounded_labels_and_name_the_service(
    monitoring: list[Manifest],
) -> None:
    """No pod, model or error label survives an alert; helm prints `{{ $labels.x }}` literally."""
    (group,) = find(monitoring, "PrometheusRule", "noctaya-gateway")["spec"]["groups"]
    for alert in group["rules"]:
        groupings = re.findall(r"by \(([^)]*)\)", alert["expr"])
        assert groupings, alert["alert"]
        for grouping in groupings:
            assert {label.strip() for label in grouping.split(",")} <= BOUNDED, alert["alert"]
        summary = alert["annotations"]["summary"]
        assert "{{ $labels.namespace }}/{{ $labels.llmservice }}" in summary
        assert alert["labels"]["severity"] in {"warning", "critical"}
