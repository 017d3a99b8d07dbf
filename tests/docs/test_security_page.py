"""Security: what the page says about key rotation is what the gateway does
(tests/gateway/test_auth.py: a rotated file refuses the old key at once; a file of two lines
accepts neither), its Pod Security table says what each pod's plan states
(tests/integration/test_pod_security_levels.py holds the plans to the API server's admission),
and what it says the gateway may read is the Role and token the operator renders
(tests/integration/operator/test_gateway_endpoint_access.py holds them to the API server's
RBAC)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml
from noctaya.core.plan.pod_security import RESTRICTED, Level
from noctaya.k8s.render.serving import render_serving
from support.custom_resources import Manifest
from support.plans import serving_plan

PAGE = Path(__file__).resolve().parents[2] / "docs" / "operations" / "security.md"


def test_rotation_is_said_to_have_a_window_because_one_key_is_accepted() -> None:
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    assert "The gateway accepts one key at a time" in text
    assert "a rotation always has a window where some clients fail" in text
    assert "without a window" not in text


RESTRICTED_RUNTIME = PAGE.parents[2] / "examples" / "box" / "engine-stub-restricted.yaml"
# Each row of the Pod Security table, by the start of its first cell, and the level the plan
# states for that pod (the gateway's and the aggregator's are the constant the operator passes).
STATED: dict[str, Callable[[], Level]] = {
    "operator": lambda: Level.RESTRICTED,  # tests/helm/test_chart_pod_security.py
    "gateway": lambda: RESTRICTED.level,
    "demand aggregator": lambda: RESTRICTED.level,
    "prewarm or OCI staging Job (`<llmservice>-prewarm`) on a claim": lambda: prewarm_level(
        {"cache": {"prewarm": True}}
    ),
    "prewarm or OCI staging Job on a `HostPath` cache": lambda: prewarm_level(
        {"cache": {"strategy": "HostPath", "prewarm": True}}
    ),
    "backend (`<llmservice>`), runtime without": lambda: backend_level(),
    "backend, runtime whose": lambda: backend_level(
        runtime=yaml.safe_load(RESTRICTED_RUNTIME.read_text(encoding="utf-8"))["spec"]
    ),
    "backend on a `HostPath` cache": lambda: backend_level({"cache": {"strategy": "HostPath"}}),
    "backend whose runtime probes name a `host`": lambda: backend_level(
        runtime={"health": {"startup": {"tcpSocket": {"port": 8000, "host": "10.0.0.9"}}}}
    ),
}


def backend_level(service: Manifest | None = None, runtime: Manifest | None = None) -> Level:
    return serving_plan(service, runtime).backend.pod_security.level


def prewarm_level(service: Manifest) -> Level:
    prewarm = serving_plan(service).prewarm
    assert prewarm is not None
    return prewarm.pod_security.level


def pod_security_rows() -> list[tuple[str, str]]:
    """(pod, level) of each row of the Pod Security table."""
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("## Pod Security levels", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| ")]
    return [(row[0].removeprefix("| "), row[1].strip("`")) for row in rows[1:]]


def test_the_pod_security_table_says_what_each_pods_plan_states() -> None:
    rows = pod_security_rows()
    assert len(rows) == len(STATED), rows
    for pod, level in rows:
        [stated] = [state for start, state in STATED.items() if pod.startswith(start)]
        assert level == stated(), pod


def test_ascend_host_paths_keep_its_backends_privileged_as_the_table_says() -> None:
    row = next(pod for pod, _ in pod_security_rows() if pod.startswith("backend on a `HostPath`"))
    assert "Ascend" in row
    assert backend_level(runtime={"vendor": "ascend"}) is Level.PRIVILEGED


def endpoint_reader_section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    return text.split("## What the gateway may read from the API server", 1)[1].split("\n## ")[0]


def test_the_endpoint_reader_table_is_the_rendered_roles_one_rule() -> None:
    rendered = render_serving(serving_plan())
    [role] = [obj for obj in rendered.endpoint_access if obj["kind"] == "Role"]
    rows = [
        line.split(" | ") for line in endpoint_reader_section().splitlines() if line[:2] == "| "
    ]
    stated = [
        {
            "apiGroups": [row[0].removeprefix("| ").strip("`")],
            "resources": [row[1].strip("`")],
            "verbs": [verb.strip("`") for verb in row[2].split(", ")],
        }
        for row in rows[1:]
    ]
    assert stated == role["rules"]
    assert rows[1][3] == "the service's namespace |"
    assert role["metadata"]["namespace"] == rendered.gateway_deployment["metadata"]["namespace"]


def test_the_token_lifetime_and_mount_are_the_gateway_pods() -> None:
    section = " ".join(endpoint_reader_section().split())
    pod = render_serving(serving_plan()).gateway_deployment["spec"]["template"]["spec"]
    [volume] = pod["volumes"]
    [token, ca] = volume["projected"]["sources"]
    assert f"expirationSeconds: {token['serviceAccountToken']['expirationSeconds']}" in section
    assert token["serviceAccountToken"]["expirationSeconds"] == 3600  # "expires after an hour"
    assert f"the `{ca['configMap']['name']}` ConfigMap" in section
    [mount] = pod["containers"][0]["volumeMounts"]
    assert f"mounted read-only at `{mount['mountPath']}`" in section
    assert mount["readOnly"] is True
    assert pod["automountServiceAccountToken"] is False
    assert "`<llmservice>-endpoint-reader`" in section
    assert pod["serviceAccountName"] == "chat-endpoint-reader"  # serving_plan's service: chat
