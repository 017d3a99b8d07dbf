"""An OCI model delivered to pods on the box: a registry served inside the box's network
namespace (plain HTTP, which the operator is told at install, as a cluster admin would), a Job
that runs `noctaya-fetch` in the Noctaya image into a HostPath cache, and a backend that waits
for the fetcher's marker and then sees every file. A hostile artifact fails the Job at once, the
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

from .serving import BOX_REGISTRY, condition, diagnosed, example, status, with_box_settings
from .workloads import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

REGISTRY = BOX_REGISTRY
TITLE = "org.opencontainers.image.title"


@pytest.fixture(scope="module")
def registry(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningRegistry]:
    """A registry the box's pods reach at the node's address (and the host over its link)."""
    netns = ("ip", "netns", "exec", layout.NAME)
    workdir = tmp_path_factory.mktemp("box-registry")
    with run_registry(workdir, listen=REGISTRY, launcher=netns) as running:
        yield running


@pytest.fixture(scope="module")
def plain_http(cluster: Cluster, installed: None, helm: Helm) -> None:
    """The operator told that the box's registry speaks plain HTTP, as the session installs it
    (an earlier module's upgrade may have reset the chart's values)."""
    with_box_settings(cluster, helm)


@pytest.fixture
def host_cache(namespace: str) -> Iterator[Path]:
    """The service's HostPath cache: on the node, which is this machine, so taken away after
    the test with the folders above it that the kubelet made for it."""
    cache = Path(HOST_PATH_ROOT, f"{namespace}-demo")
    made = [path for path in (cache.parent.parent, cache.parent) if not path.exists()]
    yield cache
    shutil.rmtree(cache, ignore_errors=True)
    for path in reversed(made):
        with contextlib.suppress(OSError):
            path.rmdir()


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
    runtime, _ = example()
    name = f"list-model-{secrets.token_hex(3)}"
    runtime["metadata"]["name"] = name
    env = [*runtime["spec"]["container"]["env"], {"name": "STUB_LIST_MODEL", "value": "true"}]
    runtime["spec"]["container"]["env"] = env
    resources = CustomResources(api_client)
    resources.create(runtime)
    yield name
    resources.delete("InferenceRuntime", name)


def test_an_oci_model_is_staged_by_a_job_and_seen_whole_by_the_backend(
    api_client: k8s_client.ApiClient,
    namespace: str,
    registry: RunningRegistry,
    plain_http: None,
    listing_runtime: str,
    host_cache: Path,
    gpus: None,
    tmp_path: Path,
) -> None:
    core = k8s_client.CoreV1Api(api_client)
    files = model_files(tmp_path)
    digest = push_files(
        registry, "models/tiny", "v1", [tmp_path / "config.json", tmp_path / "tokenizer",
                                         tmp_path / "model.safetensors"],
    )  # fmt: skip
    uri = f"oci://{REGISTRY}/models/tiny@{digest}"
    with diagnosed(api_client, namespace):
        CustomResources(api_client).create(service_for(uri, listing_runtime), namespace)
        job = wait_for(
            "the staging Job to succeed",
            lambda: (found := _job(api_client, namespace)) and found.status.succeeded and found,
            timeout=300,
        )
        (container,) = job.spec.template.spec.containers
        assert container.command[0] == "noctaya-fetch", container.command
        assert container.command[1:] == [uri, "--cache", "/cache", "--plain-http"]
        assert container.image.startswith("ghcr.io/noctaya/noctaya:"), "the Noctaya image"

        ready = wait_for(
            "the service Ready",
            lambda: (
                (found := status(api_client, namespace, "demo")).get("phase") == "Ready" and found
            ),
            timeout=300,
        )
        assert condition(ready, "Degraded")[0] == "False", ready
        backends = "app.kubernetes.io/name=demo,serving.noctaya.io/runtime"  # not the Job's pod
        (pod,) = core.list_namespaced_pod(namespace, label_selector=backends).items
        log = core.read_namespaced_pod_log(pod.metadata.name, namespace, container="serving")
        listed = [
            line.split("model file ", 1)[1] for line in log.splitlines() if "model file " in line
        ]
        seen = sorted(entry for entry in listed if not entry.startswith(".noctaya-ready "))
        expected = sorted(
            f"{name} {len(data)} sha256:{hashlib.sha256(data).hexdigest()}"
            for name, data in files.items()
        )
        assert seen == expected, log
        assert any(entry.startswith(".noctaya-ready ") for entry in listed), "after the marker"


def test_a_hostile_artifact_fails_the_job_naming_the_entry_and_deleting_the_job_retries(
    api_client: k8s_client.ApiClient,
    namespace: str,
    registry: RunningRegistry,
    plain_http: None,
    listing_runtime: str,
    host_cache: Path,
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
        message = _message(failed, "Degraded")
        assert "prewarm Job demo-prewarm failed: " in message, message
        assert "entry '../escape' leaves the artifact directory" in message, message
        first = _job(api_client, namespace)
        assert first is not None
        assert (first.status.failed or 0) == 1, "failed at once, not after four retries"
        assert not any(host_cache.rglob(".noctaya-ready")), "no marker on a refused artifact"

        batch.delete_namespaced_job("demo-prewarm", namespace, propagation_policy="Background")
        again = wait_for(
            "a new staging Job, and its failure",
            lambda: (
                (job := _job(api_client, namespace)) is not None
                and job.metadata.uid != first.metadata.uid
                and (job.status.failed or 0) >= 1
                and job
            ),
            timeout=180,
        )
        assert again.metadata.uid != first.metadata.uid
        refused = wait_for("the retry's failure reported", failed_with_the_entry, 120)
        assert "leaves the artifact directory" in _message(refused, "Degraded")


def _job(api_client: k8s_client.ApiClient, namespace: str) -> Any:
    with contextlib.suppress(k8s_client.ApiException):
        return k8s_client.BatchV1Api(api_client).read_namespaced_job("demo-prewarm", namespace)
    return None


def _message(found: dict[str, Any], kind: str) -> str:
    for item in found.get("conditions") or []:
        if item["type"] == kind:
            return str(item.get("message", ""))
    return ""
