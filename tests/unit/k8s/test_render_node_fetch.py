"""A cache kept on each node apart (HostPath) with an artifact to stage: each backend pod runs the
staging Job's fetcher before serving instead of waiting for a marker the Job may have written on
another node; caches every node shares (claims) still wait for the Job's marker."""

from __future__ import annotations

from typing import Any

import pytest
from noctaya.k8s.render.serving import render_serving
from support.plans import serving_plan

DIGEST = "a" * 64
OCI = {"source": {"uri": f"oci://registry.example/models/tiny@sha256:{DIGEST}"}}
WITH_SECRET = {"source": {**OCI["source"], "secretRef": {"name": "pull"}}}


def _rendered(strategy: str, model: dict[str, Any] = OCI, **runtime: Any) -> tuple[Any, Any]:
    plan = serving_plan({"model": model, "cache": {"strategy": strategy}}, runtime or None)
    rendered = render_serving(plan)
    pod = rendered.deployment["spec"]["template"]["spec"]
    assert rendered.prewarm_job is not None
    return pod, rendered.prewarm_job["spec"]["template"]["spec"]


def test_a_backend_on_a_host_folder_fetches_with_the_jobs_fetcher_before_serving() -> None:
    pod, job = _rendered("HostPath")

    [fetch] = pod["initContainers"]
    [prewarm] = job["containers"]
    assert fetch["name"] == "fetch-model"
    for field in ("image", "command", "env", "volumeMounts"):
        assert fetch[field] == prewarm[field], field
    assert fetch["command"][0] == "noctaya-fetch"
    assert {"name": "model-cache", "mountPath": "/cache"} in fetch["volumeMounts"]
    [serving] = pod["containers"]
    assert {"name": "model-cache", "mountPath": "/cache", "readOnly": True} in serving[
        "volumeMounts"
    ]
    names = [volume["name"] for volume in pod["volumes"]]
    assert len(names) == len(set(names))
    assert {"model-cache", "scratch"} <= set(names)


def test_the_fetch_runs_as_root_on_the_host_folder_with_nothing_to_escalate_to() -> None:
    """The folder the kubelet creates is root's, as for the Job; whatever the runtime's own
    context asks of its serving container (here: never root), the fetch overrides it."""
    context = {"runAsUser": 1000, "runAsNonRoot": True, "allowPrivilegeEscalation": False}
    pod, _ = _rendered("HostPath", container={"securityContext": context})

    [fetch] = pod["initContainers"]
    assert fetch["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "runAsUser": 0,
        "runAsGroup": 0,
        "runAsNonRoot": False,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert pod["securityContext"]["runAsNonRoot"] is True  # the serving container's, untouched


def test_the_fetch_reads_the_registry_credentials_as_the_job_does() -> None:
    pod, job = _rendered("HostPath", WITH_SECRET)

    [fetch] = pod["initContainers"]
    assert "--registry-config" in fetch["command"]
    auth = [volume for volume in pod["volumes"] if volume["name"] == "oci-registry-auth"]
    assert auth == [v for v in job["volumes"] if v["name"] == "oci-registry-auth"]
    assert auth[0]["secret"]["secretName"] == "pull"


@pytest.mark.parametrize("strategy", ["NodeLocalPVC", "SharedPVC"])
def test_a_claim_is_waited_for_as_before(strategy: str) -> None:
    """A claim is one volume wherever the pod lands: the Job's marker is seen there."""
    pod, _ = _rendered(strategy)

    [wait] = pod["initContainers"]
    assert wait["name"] == "wait-for-prewarm"
    assert wait["command"][:2] == ["python3", "-c"]
