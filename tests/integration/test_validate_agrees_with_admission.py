"""`noctaya validate` and admission agree: each manifest of the table goes to both.

Admission is the real API server, asked as `kubectl apply` asks it: a create with strict field
validation, run as a server-side dry run (the CRD's schema and CEL rules and the API server's
own checks of names, labels and annotations, nothing stored). `noctaya validate` is the command
itself, given the manifest and a valid runtime for services to resolve to. Every invalid
manifest must be refused by both, naming the same field; every valid one accepted by both.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException
from noctaya.k8s import cli
from support.custom_resources import CustomResources, Manifest
from support.envtest.api_errors import api_status
from support.manifests import inference_runtime, llmservice

pytestmark = [pytest.mark.integration, pytest.mark.kubernetes_matrix]

RUNTIME = "agreement-runtime"
OCI_URI = "oci://registry.example/models/qwen@sha256:" + "a" * 64
TLS = {"tls": {"serverSecretName": "scaler-tls"}}
TOKEN = "hf_neither_side_repeats_me"


def service(changes: Manifest | None = None, **metadata: Any) -> Manifest:
    manifest = llmservice("agreement", {"runtime": {"name": RUNTIME}, **(changes or {})})
    manifest["metadata"].update(metadata)
    return manifest


def runtime(changes: Manifest | None = None, **metadata: Any) -> Manifest:
    manifest = inference_runtime(RUNTIME, changes)
    manifest["metadata"].update(metadata)
    return manifest


INVALID: list[tuple[str, Manifest, str]] = [
    ("service name with a space", service(name="Bad Name"), "metadata.name"),
    ("service name with a dot", service(name="my.svc"), "metadata.name"),
    ("service name starting with a digit", service(name="1st"), "metadata.name"),
    ("service name of 56 characters", service(name="s" * 56), "metadata.name"),
    ("runtime name with an underscore", runtime(name="vllm_0.8"), "metadata.name"),
    ("label key with a space", service(labels={"team name": "ai"}), "metadata.labels"),
    ("label value of 64 characters", service(labels={"team": "t" * 64}), "metadata.labels"),
    (
        "annotation key with two slashes",
        service(annotations={"a/b/c": "x"}),
        "metadata.annotations",
    ),
    ("unknown field", service({"scaling": {"maxx": 3}}), "spec.scaling.maxx"),
    ("min above max", service({"scaling": {"min": 3, "max": 2}}), "spec.scaling.max"),
    ("negative min", service({"scaling": {"min": -1}}), "spec.scaling.min"),
    (
        "zero activation timeout",
        service({"scaling": {"activationTimeout": "0s"}}),
        "spec.scaling.activationTimeout",
    ),
    (
        "fractional stabilization",
        service({"scaling": {"scaleDownStabilization": "1500ms"}}),
        "spec.scaling.scaleDownStabilization",
    ),
    ("unknown metric", service({"scaling": {"metric": "latency"}}), "spec.scaling.metric"),
    (
        "incomplete scaler TLS",
        service({"scaling": {"externalScaler": TLS}}),
        "spec.scaling.externalScaler.tls",
    ),
    (
        "source and catalogRef",
        service({"model": {"catalogRef": "qwen3-8b"}}),
        "spec.model",
    ),
    ("empty model URI", service({"model": {"source": {"uri": ""}}}), "spec.model.source.uri"),
    (
        "hub URI with a token before the repository",
        service({"model": {"source": {"uri": f"hf://{TOKEN}@acme/tiny"}}}),
        "spec.model.source.uri",
    ),
    (
        "hub URI with an @ after the repository",
        service({"model": {"source": {"uri": f"modelscope://acme/tiny@{TOKEN}"}}}),
        "spec.model.source.uri",
    ),
    (
        "OCI URI with a password",
        service({"model": {"source": {"uri": OCI_URI.replace("oci://", f"oci://u:{TOKEN}@")}}}),
        "spec.model.source.uri",
    ),
    (
        "secretRef on a pvc source",
        service({"model": {"source": {"uri": "pvc://weights/qwen", "secretRef": {"name": "a"}}}}),
        "spec.model.source.secretRef",
    ),
    (
        "name and vendor selector",
        service({"runtime": {"selector": {"vendor": ["nvidia"]}}}),
        "spec.runtime",
    ),
    ("negative CPU", service({"resources": {"cpu": "-500m"}}), "spec.resources.cpu"),
    (
        "memory that is no quantity",
        service({"resources": {"memory": "lots"}}),
        "spec.resources.memory",
    ),
    (
        "zero accelerators",
        service({"resources": {"accelerators": 0}}),
        "spec.resources.accelerators",
    ),
    ("unknown cache strategy", service({"cache": {"strategy": "Fast"}}), "spec.cache.strategy"),
    ("prewarm as a string", service({"cache": {"prewarm": "yes"}}), "spec.cache.prewarm"),
    ("zero queue", service({"endpoint": {"maxQueue": 0}}), "spec.endpoint.maxQueue"),
    (
        "unknown cold-start mode",
        service({"endpoint": {"coldStart": {"mode": "wait"}}}),
        "spec.endpoint.coldStart.mode",
    ),
    (
        "zero heartbeat",
        service({"endpoint": {"coldStart": {"heartbeatInterval": "0s"}}}),
        "spec.endpoint.coldStart.heartbeatInterval",
    ),
    (
        "pull secret named by a number",
        service({"imagePullSecrets": [{"name": 5}]}),
        "spec.imagePullSecrets[0].name",
    ),
    ("unknown family", runtime({"family": "sglang"}), "spec.family"),
    ("vendor not a DNS label", runtime({"vendor": "Nvidia!"}), "spec.vendor"),
    (
        "no resource name",
        runtime({"accelerator": {"resourceName": None}}),
        "spec.accelerator.resourceName",
    ),
    (
        "port out of range",
        runtime({"container": {"port": {"containerPort": 70000}}}),
        "spec.container.port.containerPort",
    ),
    (
        "port name in capitals",
        runtime({"container": {"port": {"name": "HTTP"}}}),
        "spec.container.port.name",
    ),
    (
        "queue without volcano",
        runtime({"accelerator": {"scheduler": {"queue": "q"}}}),
        "spec.accelerator.scheduler.queue",
    ),
    (
        "kvCacheUtil target above 100 percent",
        service({"scaling": {"metric": "kvCacheUtil", "target": 101}}),
        "spec.scaling.target",
    ),
    (
        "readiness path with a space",
        runtime({"health": {"readiness": {"httpGet": {"port": "http", "path": "/he alth"}}}}),
        "spec.health.readiness.httpGet.path",
    ),
    (
        "readiness path not ASCII",
        runtime({"health": {"readiness": {"httpGet": {"port": "http", "path": "/santé"}}}}),
        "spec.health.readiness.httpGet.path",
    ),
    (
        "metrics path with a space",
        runtime({"metrics": {"queueDepth": "q", "path": "/me trics"}}),
        "spec.metrics.path",
    ),
    (
        "zero grace period",
        runtime({"lifecycle": {"terminationGracePeriodSeconds": 0}}),
        "spec.lifecycle.terminationGracePeriodSeconds",
    ),
]
VALID: list[tuple[str, Manifest]] = [
    ("service name of 55 characters", service(name="s" * 55)),
    ("label value of 63 characters", service(labels={"example.com/team": "t" * 63})),
    ("runtime name with dots", runtime(name="vllm-0.8.nvidia")),
    ("OCI model with a persistent cache", service({"model": {"source": {"uri": OCI_URI}}})),
    ("stabilization of 1h", service({"scaling": {"scaleDownStabilization": "1h"}})),
    ("queueDepth target above 100", service({"scaling": {"target": 500}})),
]


def admission_fields(resources: CustomResources, manifest: Manifest, namespace: str) -> list[str]:
    """The fields the API server names in refusing `manifest`; empty if it accepts it."""
    try:
        resources.create(manifest, namespace, dry_run=True, field_validation="Strict")
    except ApiException as error:
        status = api_status(error)
        causes = status.get("details", {}).get("causes") or []
        fields = [str(cause.get("field", "")).lstrip(".") for cause in causes]
        # strict decoding names the unknown field in the message only
        fields += re.findall(r'unknown field "([^"]+)"', str(status.get("message", "")))
        assert fields, status
        return fields
    return []


def validate_output(
    manifest: Manifest, folder: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    """`noctaya validate -f` on the manifest and, for a service, a runtime it resolves to."""
    files = [folder / "manifest.yaml"]
    files[0].write_text(yaml.safe_dump(manifest))
    if manifest["kind"] == "LLMService":
        files.append(folder / "runtime.yaml")
        files[1].write_text(yaml.safe_dump(runtime()))
    code = cli.main(["validate", "-f", *map(str, files)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("manifest", "field"), [case[1:] for case in INVALID], ids=[case[0] for case in INVALID]
)
def test_both_refuse_an_invalid_manifest_naming_the_same_field(
    resources: CustomResources,
    namespace: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    manifest: Manifest,
    field: str,
) -> None:
    refused = admission_fields(resources, manifest, namespace)
    assert field in refused, refused
    code, problems = validate_output(manifest, tmp_path, capsys)
    assert code == 1
    assert f": {field}: " in problems, problems


@pytest.mark.parametrize("manifest", [case[1] for case in VALID], ids=[case[0] for case in VALID])
def test_both_accept_a_valid_manifest(
    resources: CustomResources,
    namespace: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    manifest: Manifest,
) -> None:
    assert admission_fields(resources, manifest, namespace) == []
    code, problems = validate_output(manifest, tmp_path, capsys)
    assert (code, problems) == (0, "")


def test_both_refuse_credentials_in_a_model_uri_without_repeating_them(
    resources: CustomResources,
    namespace: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A narrowing on purpose (the API reference and the changelog say so): the refusal is
    read by whoever reads the events and the command's output, so it names the field only."""
    for _, manifest, _ in INVALID:
        if TOKEN not in yaml.safe_dump(manifest):
            continue
        with pytest.raises(ApiException) as refused:
            resources.create(manifest, namespace, dry_run=True, field_validation="Strict")
        assert TOKEN not in str(api_status(refused.value))
        code, problems = validate_output(manifest, tmp_path, capsys)
        assert code == 1
        assert TOKEN not in problems


def test_the_table_is_large_enough_to_mean_something() -> None:
    assert len(INVALID) >= 20
    assert len({field for _, _, field in INVALID}) >= 20
