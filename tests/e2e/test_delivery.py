"""An OCI model delivered to pods on the box: a registry served inside the control plane node's
network namespace (plain HTTP, which the operator is told at install, as a cluster admin would),
a Job that runs `noctaya-fetch` in the Noctaya image into a HostPath cache, and a backend that
sees every file once its own node's copy is verified, fetched by the backend's own `fetch-model`
init container where the Job ran on another node. A hostile artifact fails the Job at once, the
service names the refused entry, and deleting the Job tries again."""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fetch.registry import RawLayer, RunningRegistry, push_files, push_layers, run_registry
from helm.chart import Helm
from kubernetes import client as k8s_client
from noctaya.core.cache_planning import HOST_PATH_ROOT
from support.cluster import Cluster, layout
from support.custom_resources import CustomResources
from support.manifests import merged

from .conftest import GPUS
from .pods import one_ready_backend
from .serving import (
    BOX_REGISTRY,
    condition,
    diagnosed,
    example,
    example_runtime,
    status,
    with_box_settings,
)
from .workloads import advertise_gpus, cordoned, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

REGISTRY = BOX_REGISTRY
TITLE = "org.opencontainers.image.title"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


@pytest.fixture(scope="module")
def registry(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningRegistry]:
    """A registry the box's pods reach at the node's address (and the host over its link)."""
    netns = ("ip", "netns", "exec", layout.CONTROL_PLANE.name)
    workdir = tmp_path_factory.mktemp("box-registry")
    with run_registry(workdir, listen=REGISTRY, launcher=netns) as running:
        yield running


@pytest.fixture(scope="module")
def plain_http(cluster: Cluster, installed: None, helm: Helm) -> None:
    """The operator told that the box's registry speaks plain HTTP, as the session installs it
    (an earlier module's upgrade may have reset the chart's values)."""
    with_box_settings(cluster, helm)


@pytest.fixture
def host_cache(cluster: Cluster, namespace: str) -> Iterator[dict[str, Path]]:
    """The service's HostPath cache on each node, by node name, as the host finds it (each
    node's own folder); taken away after the test."""
    caches = {
        node.name: cluster.folders.node(node).host_path(f"{HOST_PATH_ROOT}/{namespace}-demo")
        for node in cluster.nodes
    }
    yield caches
    for cache in caches.values():
        shutil.rmtree(cache, ignore_errors=True)


MODEL = ("config.json", "tokenizer", "model.safetensors")
"""What `model_files` writes, as pushed: two files and a folder (a directory layer)."""


def model_files(folder: Path) -> dict[str, bytes]:
    """A small model: a config, a tokenizer folder (a directory layer) and weights."""
    files = {
        "config.json": b'{"architectures": ["StubForCausalLM"]}',
        "tokenizer/vocab.txt": b"tok0\ntok1\n",
        "model.safetensors": secrets.token_bytes(256 * 1024),
    }
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return files


def service_for(uri: str, runtime: str) -> dict[str, Any]:
    _, service = example()
    spec = {
        "model": {"source": {"uri": uri}},
        "runtime": {"name": runtime},
        "cache": {"strategy": "HostPath"},
        "scaling": {"min": 1},
    }
    service["spec"] = merged(service["spec"], spec)
    return service


@pytest.fixture
def listing_runtime(api_client: k8s_client.ApiClient) -> Iterator[str]:
    """The example runtime whose engine stub logs every file of its --model directory."""
    name = f"list-model-{secrets.token_hex(3)}"
    resources = CustomResources(api_client)
    resources.create(example_runtime(name, {"STUB_LIST_MODEL": "true"}))
    yield name
    resources.delete("InferenceRuntime", name)


def test_an_oci_model_is_staged_by_a_job_and_seen_whole_by_the_backend(
    api_client: k8s_client.ApiClient,
    namespace: str,
    registry: RunningRegistry,
    plain_http: None,
    listing_runtime: str,
    host_cache: dict[str, Path],
    gpus: None,
    tmp_path: Path,
) -> None:
    files = model_files(tmp_path)
    digest = push_files(registry, "models/tiny", "v1", [tmp_path / name for name in MODEL])
    uri = f"oci://{REGISTRY}/models/tiny@{digest}"
    with diagnosed(api_client, namespace):
        CustomResources(api_client).create(service_for(uri, listing_runtime), namespace)
        job = wait_for(
            "the staging Job to succeed",
            lambda: (
                (found := staging_job(api_client, namespace)) and found.status.succeeded and found
            ),
            timeout=300,
        )
        (container,) = job.spec.template.spec.containers
        assert container.command[0] == "noctaya-fetch", container.command
        assert container.command[1:] == [uri, "--cache", "/cache", "--plain-http"]
        assert container.image.startswith("ghcr.io/noctaya/noctaya:"), "the Noctaya image"

        _serves_every_file(api_client, namespace, files)


def test_a_backend_on_a_node_the_job_did_not_run_on_fetches_the_model_onto_its_own_node(
    cluster: Cluster,
    api_client: k8s_client.ApiClient,
    namespace: str,
    registry: RunningRegistry,
    plain_http: None,
    listing_runtime: str,
    host_cache: dict[str, Path],
    tmp_path: Path,
) -> None:
    """Cache `HostPath`, three nodes: the Job runs while the backend's node is cordoned, so on
    another node; the backend then serves from its own node's copy, fetched by its `fetch-model`
    init container (a backend that waited for the Job's marker would wait forever)."""
    core = k8s_client.CoreV1Api(api_client)
    backend_node = cluster.nodes[1].name
    files = model_files(tmp_path)
    digest = push_files(registry, "models/elsewhere", "v1", [tmp_path / name for name in MODEL])
    uri = f"oci://{REGISTRY}/models/elsewhere@{digest}"
    advertise_gpus(core, GPUS, backend_node)
    try:
        with diagnosed(api_client, namespace):
            with cordoned(core, backend_node):
                CustomResources(api_client).create(service_for(uri, listing_runtime), namespace)
                wait_for(
                    "the staging Job to succeed",
                    lambda: (
                        (found := staging_job(api_client, namespace)) and found.status.succeeded
                    ),
                    timeout=300,
                )
            (job_pod,) = [  # the pod that succeeded, not one a retry left failed
                pod
                for pod in core.list_namespaced_pod(
                    namespace, label_selector=f"{JOB_NAME_LABEL}=demo-prewarm"
                ).items
                if pod.status.phase == "Succeeded"
            ]
            job_node = job_pod.spec.node_name
            assert job_node != backend_node

            pod = _serves_every_file(api_client, namespace, files)
            assert pod.spec.node_name == backend_node
            assert [init.name for init in pod.spec.init_containers] == ["fetch-model"]
            marker = Path("oci", f"sha256-{digest.removeprefix('sha256:')}", ".noctaya-ready")
            filled = {node for node, cache in host_cache.items() if (cache / marker).is_file()}
            assert filled == {job_node, backend_node}, "each node its own copy, the third none"
    finally:
        advertise_gpus(core, None, backend_node)


def _serves_every_file(
    api_client: k8s_client.ApiClient, namespace: str, files: dict[str, bytes]
) -> k8s_client.V1Pod:
    """Waits for the service Ready; its backend pod, whose engine listed every model file whole,
    and the marker after them."""
    core = k8s_client.CoreV1Api(api_client)
    ready = wait_for(
        "the service Ready",
        lambda: (found := status(api_client, namespace, "demo")).get("phase") == "Ready" and found,
        timeout=300,
    )
    assert condition(ready, "Degraded")[0] == "False", ready
    pod = one_ready_backend(api_client, namespace)
    log = core.read_namespaced_pod_log(pod.metadata.name, namespace, container="serving")
    listed = [line.split("model file ", 1)[1] for line in log.splitlines() if "model file " in line]
    seen = sorted(entry for entry in listed if not entry.startswith(".noctaya-ready "))
    expected = sorted(
        f"{name} {len(data)} sha256:{hashlib.sha256(data).hexdigest()}"
        for name, data in files.items()
    )
    assert seen == expected, log
    assert any(entry.startswith(".noctaya-ready ") for entry in listed), "after the marker"
    return pod


def test_a_hostile_artifact_fails_the_job_naming_the_entry_and_deleting_the_job_retries(
    api_client: k8s_client.ApiClient,
    namespace: str,
    registry: RunningRegistry,
    plain_http: None,
    listing_runtime: str,
    host_cache: dict[str, Path],
    gpus: None,
    tmp_path: Path,
) -> None:
    batch = k8s_client.BatchV1Api(api_client)
    digest = push_layers(
        registry, "models/hostile", "v1", [RawLayer(b"x", {TITLE: "../escape"})], tmp_path
    )
    uri = f"oci://{REGISTRY}/models/hostile@{digest}"
    with diagnosed(api_client, namespace):
        CustomResources(api_client).create(service_for(uri, listing_runtime), namespace)

        def failed_with_the_entry() -> dict[str, Any] | None:
            found = status(api_client, namespace, "demo")
            degraded = condition(found, "Degraded")
            return found if degraded[:2] == ("True", "PrewarmFailed") else None

        failed = wait_for("the service to report the refused artifact", failed_with_the_entry, 180)
        message = condition_message(failed, "Degraded")
        assert "prewarm Job demo-prewarm failed: " in message, message
        assert "entry '../escape' leaves the artifact directory" in message, message
        first = staging_job(api_client, namespace)
        assert first is not None
        assert (first.status.failed or 0) == 1, "failed at once, not after four retries"
        for cache in host_cache.values():
            assert not any(cache.rglob(".noctaya-ready")), "no marker on a refused artifact"

        batch.delete_namespaced_job("demo-prewarm", namespace, propagation_policy="Background")
        again = wait_for(
            "a new staging Job, and its failure",
            lambda: (
                (job := staging_job(api_client, namespace)) is not None
                and job.metadata.uid != first.metadata.uid
                and (job.status.failed or 0) >= 1
                and job
            ),
            timeout=180,
        )
        assert again.metadata.uid != first.metadata.uid
        refused = wait_for("the retry's failure reported", failed_with_the_entry, 120)
        assert "leaves the artifact directory" in condition_message(refused, "Degraded")


def staging_job(api_client: k8s_client.ApiClient, namespace: str) -> Any:
    with contextlib.suppress(k8s_client.ApiException):
        return k8s_client.BatchV1Api(api_client).read_namespaced_job("demo-prewarm", namespace)
    return None


def condition_message(found: dict[str, Any], kind: str) -> str:
    for item in found.get("conditions") or []:
        if item["type"] == kind:
            return str(item.get("message", ""))
    return ""
