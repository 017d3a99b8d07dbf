"""The claim cache strategies on three nodes, with the box's real provisioner (storage.py): a
`SharedPVC` (ReadWriteMany, the `shared-path` class) filled once by the staging Job and read by
backends on two nodes; a `NodeLocalPVC` (ReadWriteOnce, the default `local-path` class, whose
volumes carry node affinity) that keeps every replica on its volume's node, and whose backend,
once that node is drained or lost, says why it cannot run and serves again elsewhere once the
claim is given up as docs/caches.md says, or, once the Node is deleted, once the operator has
given it up by itself.

The model is an `oci://` artifact in the box's registry, so each backend's engine stub lists
every file it sees: a backend serving a partial or missing tree fails the test.
"""

from __future__ import annotations

import contextlib
import hashlib
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fetch.registry import RunningRegistry, push_files
from kubernetes import client as k8s_client
from noctaya.k8s.prewarm_identity import FILLED_CLAIM_ANNOTATION as CLAIM_UID_ANNOTATION
from support.cluster import Cluster, locate_programs
from support.cluster.components import NODE_MONITOR_GRACE, UNREACHABLE_TOLERATION
from support.cluster.storage import NODE_LOCAL_CLASS, SHARED_CLASS
from support.custom_resources import CustomResources
from support.manifests import merged

from .pods import BACKEND_PODS, SERVICE_NAME, is_ready, live_pods
from .serving import condition, diagnosed, status
from .test_delivery import (
    MODEL,
    REGISTRY,
    condition_message,
    listing_runtime,  # noqa: F401  (a fixture)
    model_files,
    plain_http,  # noqa: F401  (a fixture)
    registry,  # noqa: F401  (a fixture)
    service_for,
    staging_job,
)
from .workloads import advertise_gpus, node_back, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
CLAIM = f"{SERVICE_NAME}-cache"
NODE_LOCAL = {"strategy": "NodeLocalPVC"}


@pytest.fixture
def gpus_on_every_node(cluster: Cluster, api_client: k8s_client.ApiClient) -> Iterator[None]:
    """One GPU per node: two backends cannot share a node unless something pins them there."""
    core = k8s_client.CoreV1Api(api_client)
    for node in cluster.nodes:
        advertise_gpus(core, "1", node.name)
    yield
    for node in cluster.nodes:
        advertise_gpus(core, None, node.name)


@dataclass(frozen=True)
class ClaimedModels:
    """A test's services, each serving a model pushed to the box's registry through the runtime
    whose engine stub lists every file it sees."""

    api_client: k8s_client.ApiClient
    namespace: str
    registry: RunningRegistry
    runtime: str
    folder: Path

    def serve(self, name: str, cache: dict[str, Any], **scaling: int) -> dict[str, bytes]:
        """Pushes a model as `models/<name>` and creates the service serving it by digest on
        `cache`; the model's files."""
        folder = self.folder / name
        folder.mkdir()
        files = model_files(folder)
        digest = push_files(self.registry, f"models/{name}", "v1", [folder / f for f in MODEL])
        service = service_for(f"oci://{REGISTRY}/models/{name}@{digest}", self.runtime)
        service = merged(service, {"spec": {"cache": cache, "scaling": scaling}})
        CustomResources(self.api_client).create(service, self.namespace)
        return files


@pytest.fixture
def models(
    api_client: k8s_client.ApiClient,
    namespace: str,
    registry: RunningRegistry,  # noqa: F811
    plain_http: None,  # noqa: F811
    listing_runtime: str,  # noqa: F811
    gpus_on_every_node: None,
    tmp_path: Path,
) -> ClaimedModels:
    """The test's models, served with one GPU per node while the test runs."""
    return ClaimedModels(api_client, namespace, registry, listing_runtime, tmp_path)


def ready_backends(
    api_client: k8s_client.ApiClient,
    namespace: str,
    count: int,
    *,
    not_on: str | None = None,
    timeout: float = 300,
) -> list[Any]:
    """The service's `count` backend pods, each Ready (and on a node other than `not_on`), once
    no other is left: a pod of a lost node keeps saying Ready until it is collected."""

    def found() -> list[Any] | None:
        pods = live_pods(api_client, namespace, BACKEND_PODS)
        fine = all(is_ready(pod) and pod.spec.node_name != not_on for pod in pods)
        return pods if len(pods) == count and fine else None

    return wait_for(f"{count} Ready backend pod(s)", found, timeout=timeout)


def listed_files(api_client: k8s_client.ApiClient, namespace: str, pod: Any) -> list[str]:
    """The model files the pod's engine stub saw, each as `name size sha256:digest`."""
    log = k8s_client.CoreV1Api(api_client).read_namespaced_pod_log(
        pod.metadata.name, namespace, container="serving"
    )
    listed = [line.split("model file ", 1)[1] for line in log.splitlines() if "model file " in line]
    return sorted(entry for entry in listed if not entry.startswith(".noctaya-ready "))


def whole(files: dict[str, bytes]) -> list[str]:
    return sorted(
        f"{name} {len(data)} sha256:{hashlib.sha256(data).hexdigest()}"
        for name, data in files.items()
    )


def volume_of(api_client: k8s_client.ApiClient, namespace: str) -> k8s_client.V1PersistentVolume:
    core = k8s_client.CoreV1Api(api_client)

    def bound() -> k8s_client.V1PersistentVolumeClaim | None:
        with contextlib.suppress(k8s_client.ApiException):  # not made again yet
            claim = core.read_namespaced_persistent_volume_claim(CLAIM, namespace)
            if claim.status.phase == "Bound" and not claim.metadata.deletion_timestamp:
                return claim
        return None

    claim = wait_for(f"claim {CLAIM} bound", bound, timeout=180)
    return core.read_persistent_volume(claim.spec.volume_name)


def volume_node(volume: k8s_client.V1PersistentVolume) -> str | None:
    """The node a volume's node affinity pins it to; None for a volume every node reaches."""
    affinity = volume.spec.node_affinity
    if affinity is None:
        return None
    (term,) = affinity.required.node_selector_terms
    (expression,) = term.match_expressions
    (node,) = expression.values
    return str(node)


def test_a_shared_claim_filled_once_is_read_whole_by_backends_on_two_nodes(
    api_client: k8s_client.ApiClient,
    namespace: str,
    models: ClaimedModels,
) -> None:
    """Cache `SharedPVC`, three nodes: one Job fills the ReadWriteMany volume; two backends, one
    GPU per node, so on two nodes, each wait for the Job's marker and see every file whole."""
    cache = {"strategy": "SharedPVC", "storageClassName": SHARED_CLASS, "size": "1Gi"}
    with diagnosed(api_client, namespace):
        files = models.serve("shared", cache, min=2, max=2)
        backends = ready_backends(api_client, namespace, 2)
        assert len({pod.spec.node_name for pod in backends}) == 2, "on two nodes"
        for pod in backends:
            assert listed_files(api_client, namespace, pod) == whole(files), pod.metadata.name
        job = staging_job(api_client, namespace)
        assert (job.status.succeeded, job.status.failed or 0) == (1, 0), "filled once"
        volume = volume_of(api_client, namespace)
        assert volume.spec.access_modes == ["ReadWriteMany"]
        assert volume_node(volume) is None
        found = status(api_client, namespace, SERVICE_NAME)
        assert condition(found, "Ready")[0] == "True", found


def test_a_node_local_claim_keeps_both_replicas_on_its_node(
    api_client: k8s_client.ApiClient,
    namespace: str,
    models: ClaimedModels,
) -> None:
    """Cache `NodeLocalPVC`, three nodes, one GPU each: the scheduler would spread two replicas,
    but the volume's node affinity pins both to the volume's node; the second, finding no GPU
    left there, waits (a delay, not a fault) until the node has room, then serves."""
    core = k8s_client.CoreV1Api(api_client)
    with diagnosed(api_client, namespace):
        files = models.serve("node-local", NODE_LOCAL, min=2, max=2)
        volume = volume_of(api_client, namespace)
        assert volume.spec.storage_class_name == NODE_LOCAL_CLASS
        node = volume_node(volume)
        assert node is not None, "a local volume carries node affinity"

        def waiting() -> str | None:
            for pod in live_pods(api_client, namespace, BACKEND_PODS):
                for said in pod.status.conditions or []:
                    if said.type == "PodScheduled" and said.status == "False":
                        return str(said.message)
            return None

        said = wait_for("the second backend waiting for room", waiting, timeout=240)
        assert "Insufficient nvidia.com/gpu" in said, said  # the volume's node is full
        assert "didn't match PersistentVolume's node affinity" in said, said  # the others
        found = status(api_client, namespace, SERVICE_NAME)
        assert condition(found, "Degraded")[0] == "False", found  # room may come: no fault
        advertise_gpus(core, "2", node)
        backends = ready_backends(api_client, namespace, 2)
        assert {pod.spec.node_name for pod in backends} == {node}
        for pod in backends:
            assert listed_files(api_client, namespace, pod) == whole(files), pod.metadata.name


def test_a_node_local_claim_on_a_drained_node_says_why_and_serves_elsewhere_once_given_up(
    cluster: Cluster,
    api_client: k8s_client.ApiClient,
    namespace: str,
    models: ClaimedModels,
) -> None:
    """Cache `NodeLocalPVC`, three nodes: `kubectl drain` of the backend's node evicts it; its
    replacement cannot follow the claim's volume anywhere, so the service reports
    `CacheNodeUnavailable`, naming the conflict; deleting the claim, the one step
    docs/caches.md gives, lets the operator make a new claim and a new staging Job for it, and
    the model is fetched again on another node."""
    kubectl = Kubectl(cluster, namespace)
    with diagnosed(api_client, namespace):
        files = models.serve("drained", NODE_LOCAL, min=1, max=1)
        (backend,) = ready_backends(api_client, namespace, 1)
        drained = backend.spec.node_name
        first = Filled.now(api_client, namespace)
        assert volume_node(first.volume) == drained
        kubectl(
            "drain", drained, "--ignore-daemonsets", "--delete-emptydir-data",
            f"--pod-selector=app.kubernetes.io/name={SERVICE_NAME}", "--timeout=120s",
        )  # fmt: skip
        try:
            _says_why(api_client, namespace, timeout=180)
            kubectl("delete", "pvc", CLAIM, "--wait=false", namespaced=True)
            moved = _serves_from_a_new_claim(api_client, namespace, files, first)
        finally:
            kubectl("uncordon", drained)
        assert moved.spec.node_name != drained


def test_a_node_local_claim_on_a_lost_node_says_why_and_serves_elsewhere_once_given_up(
    cluster: Cluster,
    api_client: k8s_client.ApiClient,
    namespace: str,
    models: ClaimedModels,
) -> None:
    """Cache `NodeLocalPVC`, three nodes: the backend's node loses power; once its pods are
    evicted the replacement cannot follow the volume, and the service reports
    `CacheNodeUnavailable`, while the operator keeps the copy of a node that may come back (no
    `CacheNodeLost`); the page's recovery for a lost node (the evicted pod, stuck Terminating
    on an unreachable node, deleted with `--force`, and the claim) lets it serve elsewhere."""
    kubectl = Kubectl(cluster, namespace)
    with diagnosed(api_client, namespace), _backend_on_a_worker(cluster, api_client) as lose:
        files = models.serve("lost", NODE_LOCAL, min=1)
        lost = lose(namespace)
        first = Filled.now(api_client, namespace)
        _says_why(api_client, namespace, timeout=NODE_LOSS_BOUND)
        assert not _events(api_client, namespace, "CacheNodeLost"), "the node may come back"
        backends = f"app.kubernetes.io/name={SERVICE_NAME}"
        forced = ("--force", "--grace-period=0")
        kubectl("delete", "pod", "-l", backends, *forced, namespaced=True)
        kubectl("delete", "pvc", CLAIM, "--wait=false", namespaced=True)
        moved = _serves_from_a_new_claim(api_client, namespace, files, first)
        assert moved.spec.node_name != lost


def test_a_node_local_claim_whose_node_is_deleted_is_given_up_by_the_operator(
    cluster: Cluster,
    api_client: k8s_client.ApiClient,
    namespace: str,
    models: ClaimedModels,
) -> None:
    """Cache `NodeLocalPVC`, three nodes: the backend's node loses power and its Node object is
    deleted (what a cloud's node controller does with a machine that is gone); with no other
    step the operator finds the volume's node gone, gives up the claim and its Job (Warning
    `CacheNodeLost` naming the node), and the backend serves from a new claim elsewhere."""
    kubectl = Kubectl(cluster, namespace)
    with diagnosed(api_client, namespace), _backend_on_a_worker(cluster, api_client) as lose:
        files = models.serve("deleted", NODE_LOCAL, min=1)
        lost = lose(namespace)
        first = Filled.now(api_client, namespace)
        kubectl("delete", "node", lost)
        moved = _serves_from_a_new_claim(
            api_client, namespace, files, first, timeout=NODE_DELETED_BOUND
        )
        assert moved.spec.node_name != lost
        (event,) = _events(api_client, namespace, "CacheNodeLost")
        assert event.type == "Warning"
        assert lost in event.message, event.message
        assert CLAIM in event.message, event.message


NODE_LOSS_BOUND = NODE_MONITOR_GRACE + UNREACHABLE_TOLERATION + 90
"""Seconds from a power cut to the service saying why: not ready, evicted, replaced, refused."""
POD_GC_QUARANTINE = 40
"""Seconds the pod garbage collector waits before it deletes the pods of a deleted Node."""
NODE_DELETED_BOUND = POD_GC_QUARANTINE + 30 + 240
"""Seconds from a deleted Node to a backend serving again: its pods collected, the operator's
next look (every 30 s while a backend waits), a new claim filled by a new Job, a backend
started."""


@dataclass(frozen=True)
class Filled:
    """A claim's volume and the staging Job that filled it."""

    volume: k8s_client.V1PersistentVolume
    job_uid: str

    @classmethod
    def now(cls, api_client: k8s_client.ApiClient, namespace: str) -> Filled:
        job = staging_job(api_client, namespace)
        return cls(volume_of(api_client, namespace), str(job.metadata.uid))


@contextlib.contextmanager
def _backend_on_a_worker(
    cluster: Cluster, api_client: k8s_client.ApiClient
) -> Iterator[Callable[[str], str]]:
    """Yields `lose(namespace)`, which waits for the service's one backend Ready, powers its node
    off and returns the node's name. Until then the control plane's node is cordoned: it is
    never the one lost. The lost node is powered on again, Ready and untainted, at the end."""
    core = k8s_client.CoreV1Api(api_client)
    control_plane, *_ = cluster.nodes
    lost: list[str] = []

    def lose(namespace: str) -> str:
        (backend,) = ready_backends(api_client, namespace, 1)
        core.patch_node(control_plane.name, {"spec": {"unschedulable": None}})
        lost.append(str(backend.spec.node_name))
        cluster.power_off(cluster.node(lost[0]))
        return lost[0]

    core.patch_node(control_plane.name, {"spec": {"unschedulable": True}})
    try:
        yield lose
    finally:
        core.patch_node(control_plane.name, {"spec": {"unschedulable": None}})
        if lost:
            (name,) = lost
            cluster.power_on(cluster.node(name))
            wait_for("the lost node Ready, untainted", lambda: node_back(core, name), 180)


class Kubectl:
    """The kubectl of the guide, on the box, in the test's namespace where a command has one."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        kubectl = str(locate_programs().path("kubectl"))
        self.prefix = [kubectl, "--kubeconfig", str(cluster.kubeconfig)]
        self.namespace = namespace

    def __call__(self, *args: str, namespaced: bool = False) -> None:
        scope = ["-n", self.namespace] if namespaced else []
        done = subprocess.run(
            [*self.prefix, *scope, *args], capture_output=True, text=True, timeout=180, check=False
        )
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stdout}{done.stderr}"


def _says_why(api_client: k8s_client.ApiClient, namespace: str, *, timeout: float) -> None:
    """Waits for `CacheNodeUnavailable` on `Degraded`, the scheduler's conflict named, and
    `Ready` not True."""
    found = wait_for(
        "the service saying its cache is on a node it cannot use",
        lambda: (
            (s := status(api_client, namespace, SERVICE_NAME))
            and condition(s, "Degraded") == ("True", "CacheNodeUnavailable")
            and s
        ),
        timeout=timeout,
    )
    assert condition(found, "Ready")[0] != "True", found
    said = condition_message(found, "Degraded")
    assert "didn't match PersistentVolume's node affinity" in said, said


def _serves_from_a_new_claim(
    api_client: k8s_client.ApiClient,
    namespace: str,
    files: dict[str, bytes],
    first: Filled,
    *,
    timeout: float = 300,
) -> Any:
    """The backend serving every file whole from a new claim's volume, on the node that volume
    is pinned to, filled by a new staging Job that records the new claim; the service Ready and
    not Degraded again."""
    lost = volume_node(first.volume)
    (moved,) = ready_backends(api_client, namespace, 1, not_on=lost, timeout=timeout)
    second = Filled.now(api_client, namespace)
    assert second.volume.metadata.name != first.volume.metadata.name
    assert volume_node(second.volume) == moved.spec.node_name
    assert second.job_uid != first.job_uid, "a new Job for the new claim"
    claim = k8s_client.CoreV1Api(api_client).read_namespaced_persistent_volume_claim(
        CLAIM, namespace
    )
    job = staging_job(api_client, namespace)
    recorded = (job.metadata.annotations or {}).get(CLAIM_UID_ANNOTATION)
    assert recorded == claim.metadata.uid, (recorded, claim.metadata.uid)
    assert listed_files(api_client, namespace, moved) == whole(files)
    found = wait_for(
        "the service Ready again",
        lambda: (s := status(api_client, namespace, SERVICE_NAME)).get("phase") == "Ready" and s,
    )
    assert condition(found, "Degraded")[0] == "False", found
    return moved


def _events(api_client: k8s_client.ApiClient, namespace: str, reason: str) -> list[Any]:
    events = k8s_client.CoreV1Api(api_client).list_namespaced_event(
        namespace, field_selector=f"reason={reason}"
    )
    return list(events.items)
