"""Pod Security admission on the box: a namespace that enforces a level serves what meets it
and refuses what does not, with a status that names the label that would admit it.

- `restricted`: a runtime that opts in (the engine stub image, as its user 65532) serves a
  model that the staging Job (restricted itself) pulls from an OCI registry into a claim;
- `baseline`: a root image (the engine stub with its config's user set to root) serves;
- a HostPath cache in the `baseline` namespace: the backend's and the prewarm Job's pods are
  refused, and each service says so, naming `pod-security.kubernetes.io/enforce=privileged`.

The registry serves HTTPS in the box's network namespace with a CA of the test's own; the
operator runs its staging Jobs from an image that trusts it (the main image plus the CA bundle,
chart value `image.fetch`), as a cluster with a private registry would. One service per
namespace and level, and every wait is bounded.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from fetch.registry import RegistryTLS, push_files, run_registry
from helm.chart import Helm
from images.conftest import release
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException
from kubernetes.stream import stream
from noctaya.core.plan.pod_security import ENFORCE_LABEL
from support.cluster import Cluster, layout
from support.custom_resources import CustomResources
from support.envtest.pki import write_pki

from .derived_images import derive
from .pods import one_ready_backend
from .serving import (
    REPO,
    SERVICE_NAME,
    diagnosed,
    example,
    example_runtime,
    status,
    stream_chat,
    upgrade,
    wait_idle,
)
from .workloads import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

RESTRICTED_RUNTIME = REPO / "examples" / "box" / "engine-stub-restricted.yaml"
REGISTRY = f"{layout.NODE_IP}:5443"
CA_BUNDLE = "/etc/noctaya-test/ca.pem"
FETCH_REPOSITORY = "noctaya-fetch-test-ca"
IMAGE_USER = 65532
WEIGHTS = b"restricted weights " * 1024
ADMITTED_BY = f"label the namespace {ENFORCE_LABEL}=privileged to admit them"


@pytest.fixture(scope="module")
def enforcing(api_client: k8s_client.ApiClient) -> Iterator[dict[str, str]]:
    """A namespace enforcing `restricted` and one enforcing `baseline`, for the module."""
    core = k8s_client.CoreV1Api(api_client)
    suffix = secrets.token_hex(3)
    names = {level: f"enforce-{level}-{suffix}" for level in ("restricted", "baseline")}
    for level, name in names.items():
        core.create_namespace({"metadata": {"name": name, "labels": {ENFORCE_LABEL: level}}})
    yield names
    for name in names.values():
        core.delete_namespace(name)


@dataclass(frozen=True)
class StagedModel:
    uri: str
    ca: bytes
    """The CA of the registry's certificate."""


@pytest.fixture(scope="module")
def staged_model(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StagedModel]:
    """An artifact in a registry that pods reach at the node's address over HTTPS. It is
    pushed over loopback first, then served from the same storage."""
    folder = tmp_path_factory.mktemp("registry")
    weights = folder / "weights.bin"
    weights.write_bytes(WEIGHTS)
    with run_registry(folder) as pushing:
        digest = push_files(pushing, "models/stub", "v1", [weights])
    pki = write_pki(folder / "pki", serving_ips=[layout.NODE_IP], serving_names=[])
    tls = RegistryTLS(pki.serving_cert, pki.serving_key, pki.ca_cert)
    netns = ("ip", "netns", "exec", layout.CONTROL_PLANE.name)
    with run_registry(folder, listen=REGISTRY, tls=tls, launcher=netns):
        yield StagedModel(f"oci://{REGISTRY}/models/stub@{digest}", pki.ca_cert.read_bytes())


@pytest.fixture(scope="module")
def fetching_from_the_registry(
    cluster: Cluster,
    installed: None,
    helm: Helm,
    built_images: dict[str, Path],
    staged_model: StagedModel,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    """The operator's Jobs run from the main image plus the registry's CA, for the module."""
    name = f"ghcr.io/noctaya/{FETCH_REPOSITORY}:{release()}"
    archive = derive(
        built_images["noctaya"],
        tmp_path_factory.mktemp("fetch-image"),
        name,
        files={CA_BUNDLE: staged_model.ca},
        env={"REQUESTS_CA_BUNDLE": CA_BUNDLE},
    )
    cluster.push_images([archive])
    upgrade(cluster, helm, f"image.fetch={FETCH_REPOSITORY}")
    yield
    upgrade(cluster, helm, "image.fetch=")


@pytest.fixture(scope="module")
def root_engine_stub(
    cluster: Cluster, built_images: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> str:
    """The engine stub image with its config's user set to root; its name."""
    name = f"ghcr.io/noctaya/noctaya-engine-stub-root:{release()}"
    folder = tmp_path_factory.mktemp("root-image")
    archive = derive(built_images["noctaya-engine-stub"], folder, name, user="0:0")
    cluster.push_images([archive])
    return name


def runtime_named(name: str, image: str) -> dict[str, Any]:
    """The example's engine-stub runtime as `name`, serving `image`."""
    runtime = example_runtime(name, {})
    runtime["spec"]["container"]["image"] = image
    return runtime


def cache_volume(api_client: k8s_client.ApiClient, namespace: str, folder: Path) -> str:
    """A volume for the service's cache claim, as an administrator provisions one by hand (the
    box has no provisioner): a node folder that the image's user owns, bound to the claim."""
    os.chown(folder, IMAGE_USER, IMAGE_USER)
    name = f"{namespace}-cache"
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": {"namespace": namespace, "name": f"{SERVICE_NAME}-cache"},
            "hostPath": {"path": str(folder), "type": "Directory"},
        },
    }
    k8s_client.CoreV1Api(api_client).create_persistent_volume(volume)
    return name


def test_a_restricted_namespace_serves_a_runtime_that_opts_in_with_a_model_staged_by_the_job(
    api_client: k8s_client.ApiClient,
    enforcing: dict[str, str],
    staged_model: StagedModel,
    fetching_from_the_registry: None,
    gpus: None,
    tmp_path: Path,
) -> None:
    namespace = enforcing["restricted"]
    resources = CustomResources(api_client)
    runtime = yaml.safe_load(RESTRICTED_RUNTIME.read_text())
    runtime["spec"]["health"] = example()[0]["spec"]["health"]  # probed every second
    runtime["spec"]["container"]["env"].append({"name": "STUB_LIST_MODEL", "value": "1"})
    volume = cache_volume(api_client, namespace, tmp_path)
    resources.create(runtime)
    try:
        with diagnosed(api_client, namespace):
            _, service = example(
                model={"source": {"uri": staged_model.uri}},
                runtime={"name": "engine-stub-restricted"},
                cache={"strategy": "NodeLocalPVC", "size": "1Gi"},
            )
            resources.create(service, namespace)
            wait_for(
                "the staging Job to succeed", lambda: _job_succeeded(api_client, namespace), 300
            )
            wait_idle(api_client, namespace)

            lines = [chunk.line for chunk in stream_chat(api_client, namespace, SERVICE_NAME)]

            assert b"data: [DONE]" in lines, lines
            pod = one_ready_backend(api_client, namespace)
            log = k8s_client.CoreV1Api(api_client).read_namespaced_pod_log(
                pod.metadata.name, namespace, container="serving"
            )
            assert f"weights.bin {len(WEIGHTS)} sha256:" in log, log
    finally:
        resources.delete("InferenceRuntime", "engine-stub-restricted")
        k8s_client.CoreV1Api(api_client).delete_persistent_volume(volume)


def test_a_baseline_namespace_serves_a_root_image(
    api_client: k8s_client.ApiClient,
    enforcing: dict[str, str],
    installed: None,
    root_engine_stub: str,
    gpus: None,
) -> None:
    namespace = enforcing["baseline"]
    resources = CustomResources(api_client)
    resources.create(runtime_named("engine-stub-root", root_engine_stub))
    try:
        with diagnosed(api_client, namespace):
            _, service = example(runtime={"name": "engine-stub-root"})
            resources.create(service, namespace)
            wait_idle(api_client, namespace)

            lines = [chunk.line for chunk in stream_chat(api_client, namespace, SERVICE_NAME)]

            assert b"data: [DONE]" in lines, lines
            pod = one_ready_backend(api_client, namespace)
            assert _user_of_pid_1(api_client, namespace, pod.metadata.name) == "0"
    finally:
        resources.delete("InferenceRuntime", "engine-stub-root")


def _job_succeeded(api_client: k8s_client.ApiClient, namespace: str) -> bool:
    try:
        job = k8s_client.BatchV1Api(api_client).read_namespaced_job(
            f"{SERVICE_NAME}-prewarm", namespace
        )
    except ApiException as missing:
        if missing.status == 404:  # the operator has not created it yet
            return False
        raise
    return bool(job.status.succeeded)


def _user_of_pid_1(api_client: k8s_client.ApiClient, namespace: str, pod: str) -> str:
    """The real user id of the serving container's first process, read with the image's
    shell builtins (busybox sh holds no `id`)."""
    script = (
        'while read -r key uid rest; do [ "$key" = "Uid:" ] && echo "$uid"; done < /proc/1/status'
    )
    exec_client = k8s_client.ApiClient(api_client.configuration)  # `stream` patches it
    try:
        output = stream(
            k8s_client.CoreV1Api(exec_client).connect_get_namespaced_pod_exec,
            pod,
            namespace,
            container="serving",
            command=["sh", "-c", script],
            stderr=True,
            stdout=True,
            stdin=False,
            tty=False,
        )
    finally:
        exec_client.close()  # type: ignore[no-untyped-call]
    return str(output).strip()


@pytest.mark.parametrize(
    ("name", "changes", "refused"),
    [
        pytest.param(
            "host-cache",
            {"cache": {"strategy": "HostPath"}, "scaling": {"min": 1}},
            'Pod Security admission rejects the backend Pods: pods "host-cache-',
            id="backend",
        ),
        pytest.param(
            "host-prewarm",
            {"cache": {"strategy": "HostPath", "prewarm": True}},
            "Pod Security admission rejects the pods of prewarm Job host-prewarm-prewarm: "
            'Error creating: pods "host-prewarm-prewarm-',
            id="prewarm-job",
        ),
    ],
)
def test_a_host_folder_cache_in_a_baseline_namespace_says_which_label_admits_it(
    api_client: k8s_client.ApiClient,
    enforcing: dict[str, str],
    installed: None,
    name: str,
    changes: dict[str, Any],
    refused: str,
) -> None:
    namespace = enforcing["baseline"]
    with diagnosed(api_client, namespace):
        _, service = example(**changes)
        service["metadata"]["name"] = name
        CustomResources(api_client).create(service, namespace)

        def degraded() -> tuple[str, str] | None:
            for item in status(api_client, namespace, name).get("conditions") or []:
                if item["type"] == "Degraded" and item["status"] == "True":
                    return item["reason"], item["message"]
            return None

        reason, message = wait_for("the refusal in the service's status", degraded, timeout=120)

    assert reason == "PodSecurityRejected", message
    assert message.startswith(refused), message
    assert 'violates PodSecurity "baseline:latest": hostPath volumes (volume "model-cache")' in (
        message
    )
    assert message.endswith(ADMITTED_BY), message
