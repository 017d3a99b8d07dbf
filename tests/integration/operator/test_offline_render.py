"""`noctaya render` prints what the operator applies, and `noctaya validate` says what it reports.

Each scenario renders the manifests offline (the real command, in its own process), then lets
the reconciler apply the same manifests on the real API server and compares: the same objects,
each holding every rendered field (the server adds defaults, the owner reference and the
applied-hash annotation beside them).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client
from noctaya.core.errors import NoctayaError
from noctaya.k8s.apply import contains
from noctaya.k8s.reconciler import LLMServiceReconciler
from support.custom_resources import CustomResources, Manifest
from support.manifests import llmservice, merged

from .cluster import ENDPOINT_READER_KINDS, WRITTEN_KINDS, conditions, everything_in
from .conftest import GATEWAY_IMAGE

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def noctaya(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "noctaya.k8s.cli", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def example(profile: str, runtime_name: str) -> tuple[Manifest, Manifest]:
    """The profile's runtime and service, the runtime renamed to this test's unique name."""
    documents = [
        yaml.safe_load(path.read_text(encoding="utf-8"))
        for path in sorted((EXAMPLES / profile).glob("*.yaml"))
    ]
    runtime = next(d for d in documents if d["kind"] == "InferenceRuntime")
    service = next(d for d in documents if d["kind"] == "LLMService")
    runtime["metadata"]["name"] = runtime_name
    service["spec"]["runtime"]["name"] = runtime_name
    return runtime, service


def without_metrics_warning(stderr: str) -> str:
    """`stderr` less the warning every example runtime draws: they name their engine's metrics,
    which Noctaya does not act on (tests/unit/k8s/test_offline_cli.py checks that warning)."""
    return "".join(
        line
        for line in stderr.splitlines(keepends=True)
        if ": warning: spec.metrics: has no effect: " not in line
    )


def write(path: Path, *documents: Manifest) -> str:
    path.write_text(yaml.safe_dump_all(documents), encoding="utf-8")
    return str(path)


def identity(obj: Manifest) -> tuple[str, str]:
    return obj["kind"], obj["metadata"]["name"]


def comparable(obj: Manifest) -> Manifest:
    """The demand Secret's token is random per rendering; everything else must match."""
    return {
        key: value for key, value in obj.items() if not (obj["kind"] == "Secret" and key == "data")
    }


@pytest.mark.parametrize(
    ("profile", "gateway_replicas"),
    [("nvidia/a10", 1), ("ascend/910b3", 1), ("nvidia/a100", 2), ("ascend/310p-duo", 2)],
)
def test_render_prints_exactly_the_objects_the_operator_applies(
    tmp_path: Path,
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    make_reconciler: Callable[..., LLMServiceReconciler],
    profile: str,
    gateway_replicas: int,
) -> None:
    runtime, service = example(profile, runtime_name)
    rendered = noctaya(
        "render",
        "-f",
        write(tmp_path / "manifests.yaml", runtime, service),
        "-n",
        namespace,
        "--gateway-image",
        GATEWAY_IMAGE,
        "--gateway-replicas",
        str(gateway_replicas),
    )
    assert (rendered.returncode, without_metrics_warning(rendered.stderr)) == (0, "")
    offline = list(yaml.safe_load_all(rendered.stdout))

    resources.create(runtime)
    resources.create(service, namespace)
    make_reconciler(gateway_replicas=gateway_replicas).reconcile(
        (namespace, service["metadata"]["name"])
    )

    live: dict[tuple[str, str], Any] = {
        identity(o): o
        for o in everything_in(api_client, namespace, WRITTEN_KINDS + ENDPOINT_READER_KINDS)
    }
    assert sorted(identity(o) for o in offline) == sorted(live)
    for obj in offline:
        assert contains(live[identity(obj)], comparable(obj)), identity(obj)


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param(
            {
                "model": {"source": {"uri": "oci://r.io/m@sha256:" + "a" * 64}},
                "cache": {"strategy": "None"},
            },
            id="oci-without-persistent-cache",
        ),
        pytest.param({"cache": {"strategy": "BakedImage"}}, id="reserved-cache-strategy"),
        pytest.param({"runtime": {"argsOverride": ["{{ .Nope }}"]}}, id="unknown-template-field"),
        pytest.param({"runtime": {"name": "no-such-runtime"}}, id="missing-runtime"),
    ],
)
def test_validate_reports_the_reason_and_message_of_the_operators_condition(
    tmp_path: Path,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    changes: Manifest,
) -> None:
    runtime, _ = example("nvidia/a10", runtime_name)
    service = llmservice("broken", merged({"runtime": {"name": runtime_name}}, changes))
    validated = noctaya(
        "validate", "-n", namespace, "-f", write(tmp_path / "all.yaml", runtime, service)
    )

    resources.create(runtime)
    resources.create(service, namespace)
    with pytest.raises(NoctayaError):
        reconciler.reconcile((namespace, "broken"))
    ready = conditions(resources.get("LLMService", "broken", namespace)["status"])["Ready"]

    assert validated.returncode == 1
    assert without_metrics_warning(validated.stderr) == (
        f"{tmp_path / 'all.yaml'} (document 2): LLMService {namespace}/broken: "
        f"{ready['reason']}: {ready['message']}\n"
    )
