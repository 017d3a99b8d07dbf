"""Every value of the chart is in its README and its schema, and lands where the README says.

`EFFECTS` holds one `helm template` check per value: the value set to something other than its
default, and what the rendered objects must then show. A value added to values.yaml without a
README row, a schema entry or a check here fails `test_every_value_*`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from noctaya.core.plugins import VendorRegistry
from noctaya.gateway.process.variables import GATEWAY_SETTINGS
from noctaya.k8s.offline import render_files
from noctaya.k8s.operator.flags import parse_flags, validate

from .chart import CHART, REPO, Helm, Manifest, find, manager_container

pytestmark = pytest.mark.helm

VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
SCHEMA = json.loads((CHART / "values.schema.json").read_text())
README = (CHART / "README.md").read_text()
OPERATOR = "noctaya-controller-manager"
EXAMPLE = REPO / "examples" / "nvidia" / "a10"
Check = Callable[[list[Manifest]], Any]


def leaves(values: dict[str, Any], schema: dict[str, Any], prefix: str = "") -> set[str]:
    """Paths of the chart's own values: a nested object of the schema is walked, anything else
    (a scalar, a list, a Kubernetes object or a string map) is one value."""
    found = set()
    for key, value in values.items():
        path = f"{prefix}{key}"
        nested = schema["properties"][key]
        if isinstance(value, dict) and value and "properties" in nested:
            found |= leaves(value, nested, f"{path}.")
        else:
            found.add(path)
    return found


def documented() -> set[str]:
    """The paths in the first column of the README's table (`a`, `b` rows name several)."""
    rows = re.findall(r"^\| (`[^|]+`) \|", README, re.MULTILINE)
    return {path for row in rows for path in re.findall(r"`([\w.]+)`", row)}


def pod(objects: list[Manifest]) -> Manifest:
    return dict(find(objects, "Deployment", OPERATOR)["spec"]["template"])


def flags(objects: list[Manifest]) -> Any:
    parsed = parse_flags(manager_container(objects)["args"])
    validate(parsed)
    return parsed


def gateway_pod(objects: list[Manifest], which: str = "gateway") -> Manifest:
    """A pod the operator, run with the rendered flags, makes for the A10 example: its gateway,
    or its aggregator (`scaler`; two gateway replicas make one)."""
    parsed = flags(objects)
    outcome = render_files(
        [EXAMPLE],
        VendorRegistry.discover(),
        gateway_image=parsed.gateway_image,
        gateway_replicas=2,
        gateway_defaults=parsed.gateway_defaults(),
    )
    assert outcome.problems == []
    return dict(
        find(outcome.objects, "Deployment", f"qwen3-8b-a10-{which}")["spec"]["template"]["spec"]
    )


def gateway_env(objects: list[Manifest]) -> dict[str, str]:
    env = gateway_pod(objects)["containers"][0]["env"]
    return {item["name"]: item.get("value", "") for item in env}


def metrics_on(**extra: Any) -> dict[str, Any]:
    return {"operator": {"metrics": {"enabled": True, **extra}}}


def monitor(objects: list[Manifest]) -> Manifest:
    return find(objects, "ServiceMonitor", OPERATOR)


EFFECTS: dict[str, tuple[dict[str, Any], Check]] = {
    "image.registry": (
        {"image": {"registry": "registry.example.com/ai"}},
        lambda o: manager_container(o)["image"].startswith("registry.example.com/ai/"),
    ),
    "image.operator": (
        {"image": {"operator": "op"}},
        lambda o: manager_container(o)["image"] == "ghcr.io/noctaya/op:0.1.0",
    ),
    "image.gateway": (
        {"image": {"gateway": "gw"}},
        lambda o: flags(o).gateway_image == "ghcr.io/noctaya/gw:0.1.0",
    ),
    "image.fetch": (
        {"image": {"fetch": "fetcher"}},
        lambda o: flags(o).fetch_image == "ghcr.io/noctaya/fetcher:0.1.0",
    ),
    "image.tag": (
        {"image": {"tag": "1.2.3"}},
        lambda o: (
            manager_container(o)["image"].endswith(":1.2.3")
            and flags(o).gateway_image.endswith(":1.2.3")
        ),
    ),
    "image.pullPolicy": (
        {"image": {"pullPolicy": "Always"}},
        lambda o: manager_container(o)["imagePullPolicy"] == "Always",
    ),
    "imagePullSecrets": (
        {"imagePullSecrets": [{"name": "ghcr"}]},
        lambda o: pod(o)["spec"]["imagePullSecrets"] == [{"name": "ghcr"}],
    ),
    "operator.replicas": (
        {"operator": {"replicas": 3}},
        lambda o: find(o, "Deployment", OPERATOR)["spec"]["replicas"] == 3,
    ),
    "operator.leaderElect": (
        {"operator": {"replicas": 1, "leaderElect": False}},
        lambda o: flags(o).leader_elect is False,
    ),
    "operator.maxConcurrentReconciles": (
        {"operator": {"maxConcurrentReconciles": 3}},
        lambda o: flags(o).max_concurrent_reconciles == 3,
    ),
    "operator.logFormat": (
        {"operator": {"logFormat": "console"}},
        lambda o: flags(o).log_format == "console",
    ),
    "operator.logLevel": (
        {"operator": {"logLevel": "debug"}},
        lambda o: flags(o).log_level == "debug",
    ),
    "operator.resources": (
        {"operator": {"resources": {"limits": {"cpu": None}}}},
        lambda o: manager_container(o)["resources"]["limits"] == {"memory": "256Mi"},
    ),
    "operator.podDisruptionBudget.minAvailable": (
        {"operator": {"replicas": 3, "podDisruptionBudget": {"minAvailable": 2}}},
        lambda o: find(o, "PodDisruptionBudget", OPERATOR)["spec"]["minAvailable"] == 2,
    ),
    "operator.nodeSelector": (
        {"operator": {"nodeSelector": {"node-role/ops": "true"}}},
        lambda o: pod(o)["spec"]["nodeSelector"] == {"node-role/ops": "true"},
    ),
    "operator.tolerations": (
        {"operator": {"tolerations": [{"key": "ops", "operator": "Exists"}]}},
        lambda o: pod(o)["spec"]["tolerations"] == [{"key": "ops", "operator": "Exists"}],
    ),
    "operator.affinity": (
        {"operator": {"affinity": {"nodeAffinity": {"x": 1}}}},
        lambda o: pod(o)["spec"]["affinity"] == {"nodeAffinity": {"x": 1}},
    ),
    "operator.priorityClassName": (
        {"operator": {"priorityClassName": "platform-critical"}},
        lambda o: pod(o)["spec"]["priorityClassName"] == "platform-critical",
    ),
    "operator.podAnnotations": (
        {"operator": {"podAnnotations": {"example.com/scrape": "no"}}},
        lambda o: pod(o)["metadata"]["annotations"] == {"example.com/scrape": "no"},
    ),
    "operator.podLabels": (
        {"operator": {"podLabels": {"team": "platform"}}},
        lambda o: (
            pod(o)["metadata"]["labels"]["team"] == "platform"
            and pod(o)["metadata"]["labels"]["app.kubernetes.io/component"] == "operator"
        ),
    ),
    "operator.podSecurityContext": (
        {"operator": {"podSecurityContext": {"runAsUser": 1000}}},
        lambda o: pod(o)["spec"]["securityContext"]["runAsUser"] == 1000,
    ),
    "operator.securityContext": (
        {"operator": {"securityContext": {"readOnlyRootFilesystem": False}}},
        lambda o: manager_container(o)["securityContext"]["readOnlyRootFilesystem"] is False,
    ),
    "operator.extraArgs": (
        {"operator": {"extraArgs": ["--max-concurrent-reconciles=2"]}},
        lambda o: flags(o).max_concurrent_reconciles == 2,
    ),
    "operator.extraEnv": (
        {"operator": {"extraEnv": [{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}]}},
        lambda o: (
            {"name": "HTTPS_PROXY", "value": "http://proxy:3128"} in manager_container(o)["env"]
        ),
    ),
    "operator.metrics.enabled": (
        metrics_on(),
        lambda o: (
            flags(o).metrics_bind_address == ":8443"
            and find(o, "Service", f"{OPERATOR}-metrics")["spec"]["ports"][0]["port"] == 8443
        ),
    ),
    "operator.metrics.port": (
        metrics_on(port=9443),
        lambda o: (
            flags(o).metrics_bind_address == ":9443"
            and {"name": "metrics", "containerPort": 9443, "protocol": "TCP"}
            in manager_container(o)["ports"]
        ),
    ),
    "operator.metrics.serviceMonitor.enabled": (
        metrics_on(serviceMonitor={"enabled": True}),
        lambda o: monitor(o)["spec"]["endpoints"][0]["scheme"] == "https",
    ),
    "operator.metrics.serviceMonitor.interval": (
        metrics_on(serviceMonitor={"enabled": True, "interval": "1m"}),
        lambda o: monitor(o)["spec"]["endpoints"][0]["interval"] == "1m",
    ),
    "operator.metrics.serviceMonitor.labels": (
        metrics_on(serviceMonitor={"enabled": True, "labels": {"release": "prom"}}),
        lambda o: monitor(o)["metadata"]["labels"]["release"] == "prom",
    ),
    "fetch.plainHTTPRegistries": (
        {"fetch": {"plainHTTPRegistries": ["registry.ai.svc:5000", "10.0.0.7"]}},
        lambda o: flags(o).plain_http_registries == ("registry.ai.svc:5000", "10.0.0.7"),
    ),
    "gateway.replicas": (
        {"gateway": {"replicas": 3}},
        lambda o: flags(o).gateway_replicas == 3,
    ),
    "gateway.resources": (
        {"gateway": {"resources": {"requests": {"cpu": "50m"}, "limits": {"memory": "64Mi"}}}},
        lambda o: (
            gateway_pod(o)["containers"][0]["resources"]
            == {"requests": {"cpu": "50m"}, "limits": {"memory": "64Mi"}}
        ),
    ),
    "gateway.maxRequestBody": (
        {"gateway": {"maxRequestBody": "1Mi"}},
        lambda o: gateway_env(o)["NOCTAYA_MAX_REQUEST_BODY"] == "1048576",
    ),
    "gateway.timeouts.requestBody": (
        {"gateway": {"timeouts": {"requestBody": "30s"}}},
        lambda o: gateway_env(o)["NOCTAYA_REQUEST_BODY_TIMEOUT"] == "30s",
    ),
    "gateway.timeouts.clientSend": (
        {"gateway": {"timeouts": {"clientSend": "2m"}}},
        lambda o: gateway_env(o)["NOCTAYA_CLIENT_SEND_TIMEOUT"] == "2m0s",
    ),
    "gateway.timeouts.backendRead": (
        {"gateway": {"timeouts": {"backendRead": "20m"}}},
        lambda o: gateway_env(o)["NOCTAYA_BACKEND_READ_TIMEOUT"] == "20m0s",
    ),
    "gateway.timeouts.backendHead": (
        {"gateway": {"timeouts": {"backendHead": "45s"}}},
        lambda o: gateway_env(o)["NOCTAYA_BACKEND_HEAD_TIMEOUT"] == "45s",
    ),
    "gateway.nodeSelector": (
        {"gateway": {"nodeSelector": {"pool": "gateways", "zone": "a"}}},
        lambda o: (
            gateway_pod(o)["nodeSelector"]
            == gateway_pod(o, "scaler")["nodeSelector"]
            == {"pool": "gateways", "zone": "a"}
        ),
    ),
    "gateway.tolerations": (
        {"gateway": {"tolerations": [{"key": "gw", "operator": "Exists"}]}},
        lambda o: (
            gateway_pod(o)["tolerations"]
            == gateway_pod(o, "scaler")["tolerations"]
            == [{"key": "gw", "operator": "Exists"}]
        ),
    ),
    "serviceAccount.create": (
        {"serviceAccount": {"create": False}},
        lambda o: not [obj for obj in o if obj["kind"] == "ServiceAccount"],
    ),
    "serviceAccount.name": (
        {"serviceAccount": {"name": "platform-operator"}},
        lambda o: pod(o)["spec"]["serviceAccountName"] == "platform-operator",
    ),
    "serviceAccount.annotations": (
        {"serviceAccount": {"annotations": {"example.com/role": "x"}}},
        lambda o: (
            find(o, "ServiceAccount", OPERATOR)["metadata"]["annotations"]
            == {"example.com/role": "x"}
        ),
    ),
    "monitoring.serviceMonitor.enabled": (
        {"monitoring": {"serviceMonitor": {"enabled": True}}},
        lambda o: bool(find(o, "ServiceMonitor", "noctaya-llmservices")),
    ),
    "monitoring.serviceMonitor.interval": (
        {"monitoring": {"serviceMonitor": {"enabled": True, "interval": "1m"}}},
        lambda o: (
            find(o, "ServiceMonitor", "noctaya-llmservices")["spec"]["endpoints"][0]["interval"]
            == "1m"
        ),
    ),
    "monitoring.serviceMonitor.labels": (
        {"monitoring": {"serviceMonitor": {"enabled": True, "labels": {"release": "p"}}}},
        lambda o: (
            find(o, "ServiceMonitor", "noctaya-llmservices")["metadata"]["labels"]["release"] == "p"
        ),
    ),
    "monitoring.serviceMonitor.namespaces": (
        {"monitoring": {"serviceMonitor": {"enabled": True, "namespaces": ["ai"]}}},
        lambda o: (
            find(o, "ServiceMonitor", "noctaya-llmservices")["spec"]["namespaceSelector"]
            == {"matchNames": ["ai"]}
        ),
    ),
    "monitoring.prometheusRule.enabled": (
        {"monitoring": {"prometheusRule": {"enabled": True}}},
        lambda o: bool(find(o, "PrometheusRule", "noctaya-gateway")),
    ),
    "monitoring.prometheusRule.labels": (
        {"monitoring": {"prometheusRule": {"enabled": True, "labels": {"release": "p"}}}},
        lambda o: (
            find(o, "PrometheusRule", "noctaya-gateway")["metadata"]["labels"]["release"] == "p"
        ),
    ),
}


def test_every_value_is_in_the_readme_table() -> None:
    assert documented() == leaves(VALUES, SCHEMA)


def test_every_value_has_a_described_schema_entry() -> None:
    def entry(path: str) -> dict[str, Any]:
        node = SCHEMA
        for key in path.split("."):
            node = node["properties"][key]
        return dict(node)

    for path in leaves(VALUES, SCHEMA):
        node = entry(path)
        assert "type" in node or "anyOf" in node, path
        assert node.get("description"), path


def test_every_value_has_a_render_check() -> None:
    assert set(EFFECTS) == leaves(VALUES, SCHEMA)


def passes(check: Check, objects: list[Manifest]) -> bool:
    try:
        return bool(check(objects))
    except (AssertionError, KeyError, IndexError):
        return False


@pytest.mark.parametrize("path", sorted(EFFECTS))
def test_a_value_lands_where_the_readme_says(
    helm: Helm, default_render: list[Manifest], path: str
) -> None:
    """And the check can fail: the default render does not pass it."""
    values, check = EFFECTS[path]
    assert passes(check, helm.render(values)), f"{path}: {values}"
    assert not passes(check, default_render), path


@pytest.mark.parametrize(
    ("path", "variable"),
    [
        ("gateway.maxRequestBody", "NOCTAYA_MAX_REQUEST_BODY"),
        ("gateway.timeouts.requestBody", "NOCTAYA_REQUEST_BODY_TIMEOUT"),
        ("gateway.timeouts.clientSend", "NOCTAYA_CLIENT_SEND_TIMEOUT"),
        ("gateway.timeouts.backendRead", "NOCTAYA_BACKEND_READ_TIMEOUT"),
        ("gateway.timeouts.backendHead", "NOCTAYA_BACKEND_HEAD_TIMEOUT"),
    ],
)
def test_an_empty_gateway_default_is_documented_as_the_gateways_own(
    path: str, variable: str
) -> None:
    (setting,) = [s for s in GATEWAY_SETTINGS if s.name == variable]
    assert f'| `{path}` | `""` ({setting.default}) |' in README
