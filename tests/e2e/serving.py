"""Noctaya installed in the box the way the install guide says (images imported, `helm install`),
and what the lifecycle tests read from it: streams through the gateway Service, the service's
status, and the events and logs printed when a test fails."""

from __future__ import annotations

import contextlib
import functools
import http.client
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from helm.chart import DEFAULT_NAMESPACE, RELEASE, Helm
from kubernetes import client as k8s_client
from kubernetes.stream import portforward
from noctaya.core.plan.identity import AGGREGATOR_PORT
from support.cluster import Cluster, layout
from support.cluster.host import connect_in_box
from support.custom_resources import CustomResources
from urllib3.exceptions import HTTPError

from .pods import BACKEND_PODS, SERVICE_NAME, rolled_out
from .workloads import wait_for

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "box" / "engine-stub.yaml"
OPERATOR = "noctaya-controller-manager"
GATEWAY_PORT = 8080
BOX_REGISTRY = f"{layout.NODE_IP}:5000"
"""Where the delivery tests serve an OCI registry: the node's address, which pods reach."""
LEASE = "6d7012cb.noctaya.io"  # the operator's leader-election Lease, as the install guide names it
_LOG_LINES = 40
_POLL_SECONDS = 0.25


# The install guide's command, word for word (tests/e2e/test_install_guide.py checks the page).
HELM_INSTALL = (
    f"helm install {RELEASE} charts/noctaya --namespace {DEFAULT_NAMESPACE} --create-namespace"
)


def install(cluster: Cluster, archives: list[Path], helm: Helm, *settings: str) -> None:
    """Pushes the images to the box's registry, which the nodes pull from, and installs the
    chart as the install guide says (with `settings` as `--set`s), then waits for the operator."""
    cluster.push_images(archives)
    args = [str(REPO / word) if word == "charts/noctaya" else word for word in HELM_INSTALL.split()]
    sets = [word for setting in settings for word in ("--set", setting)]
    done = helm.run(*args[1:], *sets, "--kubeconfig", str(cluster.kubeconfig))
    assert done.returncode == 0, f"helm install failed:\n{done.stderr}"
    wait_for("the operator rolled out", lambda: operator_rolled_out(cluster.api_client), 300)


BOX_SETTINGS = (f"fetch.plainHTTPRegistries={{{BOX_REGISTRY}}}",)
"""The box's own chart settings: the registry its delivery tests serve speaks plain HTTP."""


def install_serving(cluster: Cluster, archives: list[Path], helm: Helm) -> None:
    """Installed as the guide says, with the box's settings and the example's runtime: what
    the serving tests share."""
    install(cluster, archives, helm, *BOX_SETTINGS)
    CustomResources(cluster.api_client).create(example()[0])


def with_box_settings(cluster: Cluster, helm: Helm) -> None:
    """The release with the box's settings again if a test's upgrade reset them (a rollout
    then; none when they are in place)."""
    deployment = k8s_client.AppsV1Api(cluster.api_client).read_namespaced_deployment(
        OPERATOR, DEFAULT_NAMESPACE
    )
    args = deployment.spec.template.spec.containers[0].args or []
    if f"--plain-http-registry={BOX_REGISTRY}" not in args:
        upgrade(cluster, helm, *BOX_SETTINGS)


def example(**overrides: Any) -> list[dict[str, Any]]:
    """The example's InferenceRuntime and LLMService; `overrides` are merged into the
    LLMService's spec (one level deep per key)."""
    runtime, service = yaml.safe_load_all(EXAMPLE.read_text())
    for key, value in overrides.items():
        current = service["spec"].get(key)
        service["spec"][key] = {**current, **value} if isinstance(current, dict) else value
    return [runtime, service]


def example_runtime(name: str, env: dict[str, str], **spec: Any) -> dict[str, Any]:
    """The example's InferenceRuntime named `name`, its engine stub's variables `env` set (in
    place of those of the same names), and the `spec` keys given replaced."""
    runtime, _ = example()
    runtime["metadata"]["name"] = name
    container = runtime["spec"]["container"]
    kept = [variable for variable in container["env"] if variable["name"] not in env]
    container["env"] = kept + [{"name": k, "value": v} for k, v in env.items()]
    runtime["spec"].update(spec)
    return runtime


@dataclass(frozen=True)
class Chunk:
    at: float  # time.monotonic() when the line arrived
    line: bytes


def gateway_address(
    api_client: k8s_client.ApiClient, namespace: str, service: str, pod: str | None = None
) -> tuple[str, int]:
    """Where a pod in the cluster sends `service`'s requests: its gateway Service's address
    (port `http`), or one gateway `pod`'s."""
    core = k8s_client.CoreV1Api(api_client)
    if pod:
        return str(core.read_namespaced_pod(pod, namespace).status.pod_ip), GATEWAY_PORT
    spec = core.read_namespaced_service(service, namespace).spec
    return str(spec.cluster_ip), next(int(port.port) for port in spec.ports if port.name == "http")


def chat(
    api_client: k8s_client.ApiClient,
    namespace: str,
    service: str,
    *,
    tokens: int | None = None,
    timeout: float = 180.0,
    pod: str | None = None,
    stream: bool = True,
) -> http.client.HTTPResponse:
    """Sends a chat completion (streaming unless `stream` is False) to the gateway Service, or
    to one gateway `pod`, from inside the box's network namespace as a pod would send it; the
    response, unread (closing it, or reading it to its end, closes its connection). `tokens`
    asks the engine stub for that many.

    Not through the API server's proxy, which cuts a stream whose head comes back at once, as
    a held stream's does: its HTTP/1 server closes the request's body when it writes the
    response head, while its transport may still have to read that body's end; that read fails
    and the transport closes its connection to the gateway (golang/go#40747; the API server
    logs `ReverseProxy read error during body copy: use of closed network connection`)."""
    address = gateway_address(api_client, namespace, service, pod)
    return _post_in_box(address, service, stream=stream, tokens=tokens, timeout=timeout)[0]


def chat_body(model: str, stream: bool = True) -> bytes:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    return json.dumps(body).encode()


def stream_chat(
    api_client: k8s_client.ApiClient,
    namespace: str,
    service: str,
    tokens: int | None = None,
    pod: str | None = None,
) -> Iterator[Chunk]:
    """A streaming chat completion's lines as they arrive (see `chat`); fails unless answered
    200."""
    address = gateway_address(api_client, namespace, service, pod)
    for line in chat_lines_in_box(address, service, tokens=tokens):
        yield Chunk(time.monotonic(), line)


@dataclass
class Exchange:
    """One request's answer as its client saw it, read to the end in a thread of its own."""

    stream: bool
    started: float = field(default_factory=time.monotonic)
    status: int = 0
    retry_after: str = ""
    lines: list[bytes] = field(default_factory=list)
    broken: str = ""  # why the answer ended before its end (a cut connection, a timeout)
    ended: float = 0.0  # time.monotonic() when the answer ended, however it ended; 0 until then
    over: threading.Event = field(default_factory=threading.Event)
    _cut: Callable[[], object] | None = None  # ends the connection under the reading thread
    was_cut: bool = False

    def cut(self) -> None:
        """Ends an answered exchange (its status set) from the client's side, as a client that
        leaves does, and waits for its reader to stop; one already over is left as it is."""
        if self._cut is not None and not self.over.is_set():
            self.was_cut = True
            with contextlib.suppress(OSError):  # the answer ended meanwhile: its socket is closed
                self._cut()
        assert self.over.wait(30), "the exchange's reader did not stop after its connection was cut"

    @property
    def completed(self) -> bool:
        """Answered in full by the backend: tokens then `[DONE]`, or a whole JSON completion."""
        if self.broken or self.status != 200:
            return False
        if self.stream:
            return b"data: [DONE]" in self.lines and self.tokens > 0
        return b'"choices"' in b"".join(self.lines)

    @property
    def tokens(self) -> int:
        """The completion chunks a stream has carried so far (the engine stub sends one a
        token), so a test can tell a whole stream from one cut short."""
        return sum(1 for line in self.lines if line.startswith(b"data: {") and b'"choices"' in line)

    @property
    def retryable(self) -> bool:
        """Answered "retry": 503 with `Retry-After`, or on a stream already answered 200, the
        gateway's closing error event with the code `cold_start` (the drain's answer)."""
        if self.broken:
            return False
        if self.status == 503:
            return int(self.retry_after or 0) > 0
        return (
            self.stream
            and self.status == 200
            and b"event: error" in self.lines
            and any(b'"code":"cold_start"' in line for line in self.lines)
            and b"data: [DONE]" not in self.lines
        )

    @property
    def heartbeats(self) -> int:
        return sum(1 for line in self.lines if line.startswith(b": heartbeat"))

    def describe(self) -> str:
        took = f" after {self.ended - self.started:.1f}s" if self.ended else ""
        return f"{self.status}{took} broken={self.broken!r} {self.lines[-4:]!r}"


def start_chat(
    api_client: k8s_client.ApiClient,
    namespace: str,
    service: str,
    *,
    pod: str | None = None,
    stream: bool = True,
    tokens: int | None = None,
) -> Exchange:
    """Starts a chat completion (see `chat`) and reads its answer in the background;
    `Exchange.over` is set once it has ended, however it ended."""
    address = gateway_address(api_client, namespace, service, pod)
    return start_chat_in_box(address, service, stream=stream, tokens=tokens)


def start_chat_in_box(
    address: tuple[str, int],
    service: str,
    *,
    stream: bool = True,
    timeout: float = 180.0,
    tokens: int | None = None,
) -> Exchange:
    """As `start_chat`, sent to a known address: one that needs no API server to look up."""
    exchange = Exchange(stream)

    def read() -> None:
        try:
            response, sock = _post_in_box(
                address, service, stream=stream, tokens=tokens, timeout=timeout
            )
            with contextlib.closing(response):
                exchange._cut = functools.partial(sock.shutdown, socket.SHUT_RDWR)
                exchange.retry_after = response.getheader("Retry-After") or ""
                exchange.status = response.status
                for line in response:  # kept as read, if the answer breaks
                    exchange.lines.append(line.rstrip(b"\n"))
        except (OSError, http.client.HTTPException) as error:
            exchange.broken = f"{type(error).__name__}: {error}"
        finally:
            exchange.ended = time.monotonic()
            exchange.over.set()

    threading.Thread(target=read, daemon=True).start()
    return exchange


def routed_in_box(address: tuple[str, int], path: str = "/healthz") -> None:
    """Waits until a GET of `path` at the Service `address` is answered 200 from inside the
    box's network namespace: a pod is Ready, and its EndpointSlice says so, a moment before
    kube-proxy on the node routes its Service to it (until then the connection is refused)."""

    def answers() -> bool:
        connection = http.client.HTTPConnection(*address, timeout=5)
        try:
            connection.sock = connect_in_box(address, 5)
            connection.request("GET", path)
            return connection.getresponse().status == 200
        except OSError:
            return False
        finally:
            connection.close()

    wait_for(f"kube-proxy routing {address[0]}:{address[1]}", answers, timeout=30)


def chat_lines_in_box(
    address: tuple[str, int],
    service: str,
    *,
    netns: Path | None = None,
    timeout: float = 180.0,
    tokens: int | None = None,
) -> Iterator[bytes]:
    """A streamed chat completion sent to `address` from inside the box's network namespace (or
    the pod's `netns`): its lines as they arrive; fails unless answered 200."""
    response, _ = _post_in_box(address, service, tokens=tokens, timeout=timeout, netns=netns)
    with contextlib.closing(response):
        assert response.status == 200, response.read()
        for line in response:
            yield line.rstrip(b"\n")


def _post_in_box(
    address: tuple[str, int],
    service: str,
    *,
    stream: bool = True,
    tokens: int | None = None,
    timeout: float,
    netns: Path | None = None,
) -> tuple[http.client.HTTPResponse, socket.socket]:
    """POSTs a chat completion to `address` on a connection of its own, made from inside the
    box's network namespace (or `netns`): the response, unread, and its socket."""
    target = f"/v1/chat/completions?tokens={tokens}" if tokens else "/v1/chat/completions"
    connection = http.client.HTTPConnection(*address, timeout=timeout)
    connection.sock = sock = connect_in_box(address, timeout, netns=netns)
    try:
        headers = {"Content-Type": "application/json"}
        connection.request("POST", target, body=chat_body(service, stream), headers=headers)
        response = connection.getresponse()
    except BaseException:
        connection.close()
        raise
    # Closed once the response is closed or read to its end, which holds it open until then
    # (closing the connection instead would close the response too).
    sock.close()
    return response, sock


def proxy_metric(api_client: k8s_client.ApiClient, path: str, name: str) -> float | None:
    """The value of the series `name` on the metrics page at `path` (a pod or service proxy path
    of the API server); None while the page cannot be read (a pod still starting). A labelled
    series is named as the page writes it, e.g. `noctaya_gateway_rejections_total{reason="x"}`."""
    config = api_client.configuration
    response = api_client.rest_client.pool_manager.request(
        "GET", f"{config.host}{path}", timeout=30
    )
    if response.status != 200:
        return None
    for line in response.data.decode().splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    raise AssertionError(f"{name} missing from {path}")


def gateway_metric(
    api_client: k8s_client.ApiClient, namespace: str, pod: str, name: str
) -> float | None:
    path = f"/api/v1/namespaces/{namespace}/pods/{pod}:{GATEWAY_PORT}/proxy/metrics"
    return proxy_metric(api_client, path, name)


def scaler_metric(
    api_client: k8s_client.ApiClient, namespace: str, service: str, name: str
) -> float | None:
    """A series of the service's demand aggregator (Service `<name>-scaler`, port `http`)."""
    path = f"/api/v1/namespaces/{namespace}/services/{service}-scaler:http/proxy/metrics"
    return proxy_metric(api_client, path, name)


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes


def forwarded(
    api_client: k8s_client.ApiClient,
    namespace: str,
    pod: str,
    *,
    key: str | None,
    body: bytes,
    head_only: bool = False,
    timeout: float = 180.0,
) -> Reply:
    """POST /v1/chat/completions to a gateway pod through a port-forward, carrying `key` as a
    bearer key: the API server's proxy would take the Authorization header for itself.
    `head_only` stops after the response head (the connection is closed, the body unread)."""
    forward_client = k8s_client.ApiClient(api_client.configuration)  # `portforward` patches it
    try:
        forward = portforward(
            k8s_client.CoreV1Api(forward_client).connect_get_namespaced_pod_portforward,
            pod,
            namespace,
            ports=str(GATEWAY_PORT),
        )
        connection = http.client.HTTPConnection("localhost", GATEWAY_PORT, timeout=timeout)
        connection.sock = sock = forward.socket(GATEWAY_PORT)
        sock.settimeout(timeout)
        headers = {"Content-Type": "application/json"}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        try:
            connection.request("POST", "/v1/chat/completions", body=body, headers=headers)
            response = connection.getresponse()
            data = b"" if head_only else response.read()
            return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, data)
        finally:
            # Our end first, then read until the forwarder closes its end: closing a socket
            # that still has unread data would reset the forwarder's thread.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)
                sock.settimeout(10)
                while sock.recv(65536):
                    pass
            connection.close()
            forward.close()
    finally:
        forward_client.close()  # type: ignore[no-untyped-call]


def leader(api_client: k8s_client.ApiClient) -> tuple[str, int]:
    """(holder identity, leaseDurationSeconds) of the operator's Lease; the identity is
    `<pod name>_<uuid>`, "" while released."""
    lease = k8s_client.CoordinationV1Api(api_client).read_namespaced_lease(LEASE, DEFAULT_NAMESPACE)
    return str(lease.spec.holder_identity or ""), int(lease.spec.lease_duration_seconds or 0)


def pod_of(identity: str) -> str:
    return identity.rpartition("_")[0]


def operator_pods(api_client: k8s_client.ApiClient) -> list[k8s_client.V1Pod]:
    """The operator's pods that are not being deleted."""
    pods = k8s_client.CoreV1Api(api_client).list_namespaced_pod(
        DEFAULT_NAMESPACE, label_selector="app.kubernetes.io/component=operator"
    )
    return [pod for pod in pods.items if not pod.metadata.deletion_timestamp]


def upgrade(cluster: Cluster, helm: Helm, *settings: str, values: list[str] | None = None) -> None:
    """`helm upgrade --reuse-values --set ...` the release (or, given `values`, with exactly
    those helm arguments), then waits until the rollout is over and the leader runs the new pod
    template (its arguments are what the operator acts on)."""
    sets = [word for setting in settings for word in ("--set", setting)]
    done = helm.run(
        "upgrade", RELEASE, str(REPO / "charts" / "noctaya"), "--namespace", DEFAULT_NAMESPACE,
        *(["--reuse-values"] if values is None else values), *sets,
        "--kubeconfig", str(cluster.kubeconfig),
    )  # fmt: skip
    assert done.returncode == 0, f"helm upgrade failed:\n{done.stderr}"
    wait_for(
        "the operator rolled out, its leader on the new pod template",
        lambda: operator_rolled_out(cluster.api_client),
        300,
    )


def operator_rolled_out(api_client: k8s_client.ApiClient) -> bool:
    """The operator's Deployment rolled out and its leader one of the new pods: a pod of the
    older template still leading acts on the older arguments."""
    pods = rolled_out(api_client, DEFAULT_NAMESPACE, OPERATOR)
    return pods is not None and pod_of(leader(api_client)[0]) in {p.metadata.name for p in pods}


def status(api_client: k8s_client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    found = CustomResources(api_client).get("LLMService", name, namespace)
    return dict(found.get("status") or {})


@contextlib.contextmanager
def phases_seen(api_client: k8s_client.ApiClient, namespace: str, name: str) -> Iterator[list[str]]:
    """The service's phases while the block runs, in order, each change once; the phase at
    the block's end is read once more after it, so a phase the block waited for is never missed
    between two polls."""
    seen: list[str] = []
    stop = threading.Event()

    def look() -> None:
        phase = status(api_client, namespace, name).get("phase", "")
        if not seen or seen[-1] != phase:
            seen.append(phase)

    def record() -> None:
        while not stop.is_set():
            look()
            stop.wait(_POLL_SECONDS)

    recorder = threading.Thread(target=record, daemon=True)
    recorder.start()
    try:
        yield seen
    finally:
        stop.set()
        recorder.join()
    look()


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
    lines += _autoscalers(api_client, namespace)
    # The serving path's logs first: a long report is cut from its end.
    for where, selector in (
        (namespace, "serving.noctaya.io/gateway"),
        (namespace, "serving.noctaya.io/scaler"),
        (DEFAULT_NAMESPACE, "app.kubernetes.io/component=operator"),
        ("keda", "app=keda-operator"),
    ):
        for pod in core.list_namespaced_pod(where, label_selector=selector).items:
            restarts = sum(c.restart_count for c in pod.status.container_statuses or [])
            lines.append(f"---- {where}/{pod.metadata.name} log ({restarts} restarts)")
            for previous in (True, False) if restarts else (False,):
                try:
                    log = core.read_namespaced_pod_log(
                        pod.metadata.name, where, tail_lines=_LOG_LINES, previous=previous
                    )
                except k8s_client.ApiException as error:
                    log = f"(no log: {error.reason})"
                lines.append(f"(the container before its restart)\n{log}" if previous else log)
    return "\n".join(lines)


def _autoscalers(api_client: k8s_client.ApiClient, namespace: str) -> list[str]:
    """What the HPA saw and decided, and what each gateway counts at this moment: the two ends
    of a scaling decision, which events alone do not show."""
    lines = ["---- autoscalers"]
    hpas = k8s_client.AutoscalingV2Api(api_client).list_namespaced_horizontal_pod_autoscaler(
        namespace
    )
    for hpa in hpas.items:
        found = hpa.status
        metrics = [m.external.current for m in found.current_metrics or [] if m.external]
        lines.append(
            f"{hpa.metadata.name}: current {found.current_replicas} desired "
            f"{found.desired_replicas} metrics {metrics}"
        )
        lines += [f"  {c.type}={c.status} {c.reason}: {c.message}" for c in found.conditions or []]
    core = k8s_client.CoreV1Api(api_client)
    for pod in core.list_namespaced_pod(
        namespace, label_selector="serving.noctaya.io/gateway"
    ).items:
        path = f"/api/v1/namespaces/{namespace}/pods/{pod.metadata.name}:{GATEWAY_PORT}/proxy"
        try:
            response = api_client.rest_client.pool_manager.request(
                "GET", f"{api_client.configuration.host}{path}/noctaya/queue", timeout=5.0
            )
            lines.append(f"{pod.metadata.name} queue: {response.data.decode(errors='replace')}")
        except HTTPError as error:
            lines.append(f"{pod.metadata.name} queue: ({error})")
    lines += _series(api_client, namespace, _SERIES)
    return lines


_SERIES = (
    "noctaya_gateway_endpoints_watch",
    "noctaya_gateway_kv_cache_discarded_total",
    "noctaya_gateway_pending",
    "noctaya_gateway_requests_total",
    "noctaya_gateway_rejections_total",
)
"""What the gateways and the aggregator say of the pods they follow and read, and what each
gateway holds and has answered: `pending` counts the admitted requests alone, where the queue's
demand also shows the activation lease's floor."""


def _series(
    api_client: k8s_client.ApiClient, namespace: str, prefixes: tuple[str, ...]
) -> list[str]:
    """The series of the gateway and aggregator pods' metrics pages that start with one of
    `prefixes`, each pod's under its name."""
    lines = []
    core = k8s_client.CoreV1Api(api_client)
    for selector, port in (
        ("serving.noctaya.io/gateway", GATEWAY_PORT),
        ("serving.noctaya.io/scaler", AGGREGATOR_PORT),
    ):
        for pod in core.list_namespaced_pod(namespace, label_selector=selector).items:
            path = f"/api/v1/namespaces/{namespace}/pods/{pod.metadata.name}:{port}/proxy/metrics"
            try:
                response = api_client.rest_client.pool_manager.request(
                    "GET", f"{api_client.configuration.host}{path}", timeout=5.0
                )
                found = [
                    line
                    for line in response.data.decode(errors="replace").splitlines()
                    if line.startswith(prefixes)
                ]
            except HTTPError as error:
                found = [f"({error})"]
            lines += [f"{pod.metadata.name} {line}" for line in found]
    return lines


def wait_idle(api_client: k8s_client.ApiClient, namespace: str) -> dict[str, Any]:
    """ScaledToZero with no backend pod left and the gateway available (Ready's reason is
    ScaledToZero, not GatewayUnavailable): the pod the Deployment starts with (the operator
    leaves its replicas to KEDA) has gone, so a request finds the backend cold. A prewarm Job's
    finished pod is no backend pod (it carries no runtime label)."""
    core = k8s_client.CoreV1Api(api_client)

    def idle() -> dict[str, Any] | None:
        pods = core.list_namespaced_pod(namespace, label_selector=BACKEND_PODS)
        found = status(api_client, namespace, SERVICE_NAME)
        settled = found.get("phase") == "ScaledToZero" and not pods.items
        return found if settled and condition(found, "Ready")[1] == "ScaledToZero" else None

    return wait_for("the service ScaledToZero with no backend pod", idle, timeout=300)
