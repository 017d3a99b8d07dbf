"""Cache `SharedPVC`, three nodes: the staging Job's pod is cut off from the network in the
middle of its download, and its replacement starts on another node while the first still runs
there, both fetching into the same ReadWriteMany destination.

The registry serves blobs at a fixed rate (a throttling proxy in front of it), so the download
is under way when the node is cut off. Kubernetes replaces the Job's pod only once the old one
is terminal; for a node that does not come back by itself the admin says so with the
`node.kubernetes.io/out-of-service` taint (Kubernetes' non-graceful node shutdown), whose pod
collector marks the old pod failed at once. Here the node is only cut off, so the first
fetcher is still alive, holding the destination's lock: the box's shared volume is one folder
every node's kernel sees, as an NFS volume with working locks is one file every node locks. The
replacement must wait for it, never write beside it; once the node is back its kubelet stops
the deleted pod, the replacement takes over (or adopts what the first finished), and the
backend sees every file whole behind a marker its writer verified.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fetch.registry import RunningRegistry, push_files, run_registry
from kubernetes import client as k8s_client
from support import throttled_proxy
from support.cluster import Cluster, layout
from support.cluster.storage import SHARED_CLASS
from support.custom_resources import CustomResources
from support.manifests import merged

from .pods import BACKEND_PODS, SERVICE_NAME, is_ready, live_pods
from .serving import condition, diagnosed, status
from .test_claims_across_nodes import listed_files, whole
from .test_delivery import (
    JOB_NAME_LABEL,
    MODEL,
    REGISTRY,
    listing_runtime,  # noqa: F401  (a fixture)
    plain_http,  # noqa: F401  (a fixture)
    service_for,
    staging_job,
)
from .workloads import node_back, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

RATE = 512 * 1024
"""Bytes per second the registry serves: the weights below take about 30 s to download."""
WEIGHTS = 16 * 1024 * 1024
UNDER_WAY = 2 * 1024 * 1024
"""Bytes of the weights on the volume at which the download counts as under way."""
OUT_OF_SERVICE = {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown"}
UPSTREAM_PORT = 5002
"""Where the registry itself listens, on the control plane node beside the proxy (the box's
image registry has 5001)."""


@pytest.fixture(scope="module")
def slow_registry(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningRegistry]:
    """The registry the operator knows as plain HTTP (`REGISTRY`), answering through the
    throttling proxy; pushes go through it at full speed."""
    netns = ("ip", "netns", "exec", layout.CONTROL_PLANE.name)
    host, _ = REGISTRY.rsplit(":", 1)
    upstream = f"{host}:{UPSTREAM_PORT}"
    workdir = tmp_path_factory.mktemp("slow-registry")
    with run_registry(workdir, listen=upstream, launcher=netns) as running:
        proxy = subprocess.Popen(
            [*netns, sys.executable, throttled_proxy.__file__, REGISTRY, upstream, str(RATE)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proxy.stdout is not None
            assert proxy.stdout.readline().strip() == "listening", "the proxy did not start"
            yield RunningRegistry(REGISTRY, running.root, None)
        finally:
            proxy.kill()
            proxy.wait()


def _model(folder: Path) -> dict[str, bytes]:
    files = {
        "config.json": b'{"architectures": ["StubForCausalLM"]}',
        "tokenizer/vocab.txt": b"tok0\ntok1\n",
        "model.safetensors": os.urandom(WEIGHTS),
    }
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return files


def _volume_folder(cluster: Cluster, namespace: str) -> Path | None:
    """The claim's folder in the shared volumes every node sees (`<pv>_<namespace>_<claim>`)."""
    for folder in cluster.folders.shared_volumes.iterdir():
        if f"_{namespace}_" in folder.name:
            return folder
    return None


def _largest_file(folder: Path) -> int:
    sizes = [0]
    for root, _, names in os.walk(folder):
        for name in names:
            with contextlib.suppress(OSError):  # renamed or removed meanwhile
                sizes.append(os.lstat(os.path.join(root, name)).st_size)
    return max(sizes)


def _job_pods(api_client: k8s_client.ApiClient, namespace: str) -> list[k8s_client.V1Pod]:
    return live_pods(api_client, namespace, f"{JOB_NAME_LABEL}=demo-prewarm")


def test_a_staging_pod_cut_off_mid_download_and_its_replacement_leave_one_verified_tree(
    cluster: Cluster,
    api_client: k8s_client.ApiClient,
    namespace: str,
    slow_registry: RunningRegistry,
    plain_http: None,  # noqa: F811
    listing_runtime: str,  # noqa: F811
    gpus: None,
    tmp_path: Path,
) -> None:
    core = k8s_client.CoreV1Api(api_client)
    control_plane, *_ = cluster.nodes
    files = _model(tmp_path)
    digest = push_files(slow_registry, "models/slow", "v1", [tmp_path / name for name in MODEL])
    service = service_for(f"oci://{REGISTRY}/models/slow@{digest}", listing_runtime)
    cache = {"strategy": "SharedPVC", "storageClassName": SHARED_CLASS, "size": "1Gi"}
    service = merged(service, {"spec": {"cache": cache}})
    cut: list[str] = []
    # The first pod must land on a worker: the control plane's node is never cut off.
    core.patch_node(control_plane.name, {"spec": {"unschedulable": True}})
    try:
        with diagnosed(api_client, namespace):
            CustomResources(api_client).create(service, namespace)
            (first,) = wait_for(
                "the staging pod running",
                lambda: (
                    [p for p in _job_pods(api_client, namespace) if p.status.phase == "Running"]
                    or None
                ),
                timeout=180,
            )
            core.patch_node(control_plane.name, {"spec": {"unschedulable": None}})
            wait_for(
                "the download under way",
                lambda: (
                    (folder := _volume_folder(cluster, namespace))
                    and _largest_file(folder) >= UNDER_WAY
                ),
                timeout=120,
            )
            cut.append(str(first.spec.node_name))
            cluster.cut_off(cluster.node(cut[0]))
            wait_for(
                "the cut-off node not ready",
                lambda: not node_back(core, cut[0]),
                timeout=120,
            )
            taint = {**OUT_OF_SERVICE, "effect": "NoExecute"}
            core.patch_node(cut[0], {"spec": {"taints": [taint]}})
            (second,) = wait_for(
                "a replacement staging pod on another node",
                lambda: (
                    [
                        p
                        for p in _job_pods(api_client, namespace)
                        if p.metadata.name != first.metadata.name and p.spec.node_name
                    ]
                    or None
                ),
                timeout=180,
            )
            assert second.spec.node_name != cut[0]
            waiting = wait_for(
                "the replacement waiting for the first fetcher's lock",
                lambda: "waiting for" in (log := _log(core, namespace, second)) and log,
                timeout=120,
            )
            assert first.metadata.name in waiting, waiting  # the owner it waits for: the first pod
            found = status(api_client, namespace, SERVICE_NAME)
            assert condition(found, "Ready")[0] != "True", found
            assert condition(found, "Degraded")[0] != "True", found  # a disruption, no failure
            _reconnect(cluster, core, cut)
            job = wait_for(
                "the staging Job to succeed",
                lambda: (j := staging_job(api_client, namespace)) and j.status.succeeded and j,
                timeout=300,
            )
            assert not job.status.failed, "an evicted pod is no failed try"
            said = _log(core, namespace, second).splitlines()
            (summary,) = [line for line in said if "; ready at /" in line]  # the closing line
            took_over = any(
                "taking over from" in line and first.metadata.name in line for line in said
            )
            # One download wins: the first's, which the replacement waited for, or the
            # replacement's own after it took over from the first.
            first_won = "completed by" in summary and first.metadata.name in summary
            assert first_won or (took_over and " fetched " in summary), said
            print("the download that won:", "the first's" if first_won else "the replacement's")
            (backend,) = wait_for(
                "a ready backend",
                lambda: (
                    [p for p in live_pods(api_client, namespace, BACKEND_PODS) if is_ready(p)]
                    or None
                ),
                timeout=300,
            )
            assert listed_files(api_client, namespace, backend) == whole(files)
            folder = _volume_folder(cluster, namespace)
            assert folder is not None
            found_tree = _tree(folder)
            expected, marker = _expected_tree(files, digest)
            assert found_tree.pop(marker, 0) > 0, "the marker on the tree"
            assert found_tree == expected, "nothing beside the one tree"
    finally:
        core.patch_node(control_plane.name, {"spec": {"unschedulable": None}})
        _reconnect(cluster, core, cut)


def _tree(folder: Path) -> dict[str, int]:
    """Every regular file under the claim's folder, with its size."""
    return {
        str(path.relative_to(folder)): path.lstat().st_size
        for path in folder.rglob("*")
        if path.is_file() and not path.is_symlink()
    }


def _expected_tree(files: dict[str, bytes], digest: str) -> tuple[dict[str, int], str]:
    """The model's files in the fetcher's folder for the digest with its empty lock file beside
    it; and the marker's path."""
    destination = f"oci/{digest.replace(':', '-')}"
    tree = {f"{destination}/{name}": len(data) for name, data in files.items()}
    return {**tree, f"{destination}.lock": 0}, f"{destination}/.noctaya-ready"


def _log(core: k8s_client.CoreV1Api, namespace: str, pod: k8s_client.V1Pod) -> str:
    with contextlib.suppress(k8s_client.ApiException):  # not started yet
        return str(core.read_namespaced_pod_log(pod.metadata.name, namespace))
    return ""


def _reconnect(cluster: Cluster, core: k8s_client.CoreV1Api, cut: list[str]) -> None:
    """The cut-off node back on the network, its out-of-service taint taken away, Ready."""
    if cut:
        (name,) = cut
        cut.clear()
        cluster.reconnect(cluster.node(name))
        node = core.read_node(name)
        kept = [t for t in node.spec.taints or [] if t.key != OUT_OF_SERVICE["key"]]
        core.patch_node(name, {"spec": {"taints": kept or None}})
        wait_for("the node back, Ready, untainted", lambda: node_back(core, name), 180)
