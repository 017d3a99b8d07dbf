"""Noctaya installed in the box the way the install guide says (images imported, `helm install`),
and what the lifecycle tests read from it: streams through the gateway Service, the service's
status, and the events and logs printed when a test fails."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from helm.chart import DEFAULT_NAMESPACE, RELEASE, Helm
from kubernetes import client as k8s_client
from support.cluster import Cluster
from support.cluster.images import import_archives
from support.custom_resources import CustomResources

from .workloads import wait_for

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "box" / "engine-stub.yaml"
OPERATOR = "noctaya-controller-manager"
SERVICE_NAME = "demo"  # the example's LLMService
_LOG_LINES = 40
_POLL_SECONDS = 0.25


# The install guide's command, word for word (tests/e2e/test_install_guide.py checks the page).
HELM_INSTALL = (
    f"helm install {RELEASE} charts/noctaya --namespace {DEFAULT_NAMESPACE} --create-namespace"
)


def install(cluster: Cluster, archives: list[Path], helm: Helm) -> None:
    """Imports the images into the node's containerd and installs the chart as the install
    guide says, then waits for the operator."""
    import_archives(cluster.folders.run / "containerd.sock", archives)
    args = [str(REPO / word) if word == "charts/noctaya" else word for word in HELM_INSTALL.split()]
    done = helm.run(*args[1:], "--kubeconfig", str(cluster.kubeconfig))
    assert done.returncode == 0, f"helm install failed:\n{done.stderr}"
    apps = k8s_client.AppsV1Api(cluster.api_client)

    def available() -> int:
        found = apps.read_namespaced_deployment(OPERATOR, DEFAULT_NAMESPACE)
        return int(found.status.available_replicas or 0)

    wait_for("the operator Available", lambda: available() >= 1, timeout=300)


def example(**overrides: Any) -> list[dict[str, Any]]:
    """The example's InferenceRuntime and LLMService; `overrides` are merged into the
    LLMService's spec (one level deep per key)."""
    runtime, service = yaml.safe_load_all(EXAMPLE.read_text())
    for key, value in overrides.items():
        current = service["spec"].get(key)
        service["spec"][key] = {**current, **value} if isinstance(current, dict) else value
    return [runtime, service]


@dataclass(frozen=True)
class Chunk:
    at: float  # time.monotonic() when the line arrived
    line: bytes


def chat(
    api_client: k8s_client.ApiClient,
    namespace: str,
    service: str,
    *,
    tokens: int | None = None,
    timeout: float = 180.0,
) -> Any:
    """Sends a streaming chat completion to the gateway Service through the API server's
    service proxy; the urllib3 response, unread. `tokens` asks the engine stub for that many."""
    config = api_client.configuration
    path = f"/api/v1/namespaces/{namespace}/services/{service}:http/proxy/v1/chat/completions"
    query = f"?tokens={tokens}" if tokens else ""
    body = {"model": service, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    return api_client.rest_client.pool_manager.request(
        "POST",
        f"{config.host}{path}{query}",
        body=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        preload_content=False,
        timeout=timeout,
    )


def stream_chat(
    api_client: k8s_client.ApiClient, namespace: str, service: str, tokens: int | None = None
) -> Iterator[Chunk]:
    """A streaming chat completion's lines as they arrive; fails unless answered 200."""
    response = chat(api_client, namespace, service, tokens=tokens)
    try:
        assert response.status == 200, response.read().decode(errors="replace")
        buffer = b""
        for data in response.stream(1024, decode_content=False):
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                yield Chunk(time.monotonic(), line)
    finally:
        response.release_conn()


def status(api_client: k8s_client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    found = CustomResources(api_client).get("LLMService", name, namespace)
    return dict(found.get("status") or {})


@contextlib.contextmanager
def phases_seen(api_client: k8s_client.ApiClient, namespace: str, name: str) -> Iterator[list[str]]:
    """The service's phases while the block runs, in order, each change once."""
    seen: list[str] = []
    stop = threading.Event()

    def record() -> None:
        while not stop.is_set():
            phase = status(api_client, namespace, name).get("phase", "")
            if not seen or seen[-1] != phase:
                seen.append(phase)
            stop.wait(_POLL_SECONDS)

    recorder = threading.Thread(target=record, daemon=True)
    recorder.start()
    try:
        yield seen
    finally:
        stop.set()
        recorder.join()


def condition(found: dict[str, Any], kind: str) -> tuple[str, str]:
    """(status, reason) of the condition `kind`; ("", "") when it is not reported."""
    for item in found.get("conditions") or []:
        if item["type"] == kind:
            return item["status"], item.get("reason", "")
    return "", ""


def backend_replicas(api_client: k8s_client.ApiClient, namespace: str, name: str) -> int:
    deployment = k8s_client.AppsV1Api(api_client).read_namespaced_deployment(name, namespace)
    return int(deployment.spec.replicas or 0)


@contextlib.contextmanager
def diagnosed(api_client: k8s_client.ApiClient, namespace: str) -> Iterator[None]:
    """On failure, prints the namespace's events and the operator, gateway and KEDA logs."""
    try:
        yield
    except BaseException:
        print(diagnostics(api_client, namespace))
        raise


def diagnostics(api_client: k8s_client.ApiClient, namespace: str) -> str:
    core = k8s_client.CoreV1Api(api_client)
    events = sorted(
        core.list_namespaced_event(namespace).items,
        key=lambda e: str(e.last_timestamp or e.event_time or ""),
    )
    lines = ["---- events"]
    lines += [
        f"{e.involved_object.kind}/{e.involved_object.name} {e.type} {e.reason}: {e.message}"
        for e in events
    ]
    for where, selector in (
        (DEFAULT_NAMESPACE, "app.kubernetes.io/component=operator"),
        (namespace, "serving.noctaya.io/gateway"),
        ("keda", "app=keda-operator"),
    ):
        for pod in core.list_namespaced_pod(where, label_selector=selector).items:
            lines.append(f"---- {where}/{pod.metadata.name} log")
            try:
                log = core.read_namespaced_pod_log(
                    pod.metadata.name, where, tail_lines=_LOG_LINES, container=None
                )
            except k8s_client.ApiException as error:
                log = f"(no log: {error.reason})"
            lines.append(log)
    return "\n".join(lines)
