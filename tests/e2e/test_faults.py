"""Faults the box's real kubelet, containerd and runc produce, and what the operator reports.

Every faulty service of this module is created at once in one namespace, and every test's body
runs at once in a thread of its own, started with the module: the faults develop side by side
(the slowest, a crash loop's back-off, sets the pace), and each is repaired as soon as it is
reported, before a kubelet back-off can grow. Each body checks its own fault: the phase, the
condition and reason, the operator's Event, and the seconds from the moment the fault showed in
the pod's status (a watch saw it) to the status that reports it; then it repairs the runtime or
the service as a user would, and the service settles again with `Degraded=False`. The test
itself waits for its body and reports its outcome, with the namespace's timeline, events and
logs when it failed.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client as k8s_client
from support.custom_resources import CustomResources
from support.manifests import merged

from .faults import Watched, condition, restarted, terminated_by, unschedulable, waiting
from .serving import chat, diagnostics, example
from .timeline import Entry, Timeline
from .workloads import advertise, advertise_gpus, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

GPUS = "8"  # four faulty backends, each with room for one more pod while it rolls out a fix
ACCELERATOR = "nvidia.com/mig-1g.10gb"  # advertised only when the test says so
MISSING_IMAGE = "noctaya.local/no-such-engine:0"
API_KEY = "faults-api-key"
NEVER = "1h"
PROGRESS_DEADLINE_SECONDS = 20


def env(**values: str) -> list[dict[str, str]]:
    """The example runtime's env with `values` set (an empty value removes the variable)."""
    runtime, _ = example()
    entries = {e["name"]: e["value"] for e in runtime["spec"]["container"]["env"]}
    entries.update(values)
    return [{"name": name, "value": value} for name, value in entries.items() if value]


@dataclass(frozen=True)
class Fault:
    """One faulty service: its own runtime (the example's with `runtime` merged in) and the
    example's service with `spec` merged in, pinned to that runtime."""

    runtime: dict[str, Any]
    spec: dict[str, Any]


RUNNING = {"scaling": {"min": 1}}  # a backend that must run: its faults show at once
FAULTS = {
    "pull": Fault({"container": {"image": MISSING_IMAGE}}, RUNNING),
    "oom": Fault(
        {"container": {"env": env(STUB_MEMORY="256Mi")}},
        {**RUNNING, "resources": {"memory": "96Mi"}},
    ),
    # A start-up that fails after 5 s: long enough to be seen running between two back-offs.
    "crash": Fault(
        {"container": {"env": env(STUB_EXIT_AFTER="5s", STUB_STARTUP_DELAY=NEVER)}}, RUNNING
    ),
    "stuck": Fault({"container": {"env": env(STUB_STARTUP_DELAY=NEVER)}}, RUNNING),
    "unplaced": Fault({"accelerator": {"resourceName": ACCELERATOR}}, RUNNING),
    "keyless": Fault(
        {}, {"endpoint": {"authentication": {"secretRef": {"name": API_KEY, "key": "token"}}}}
    ),
    "starved": Fault({}, {"endpoint": {"resources": {"limits": {"memory": "16Mi"}}}}),
}


Body = Callable[["Box"], None]
_BODIES: dict[str, Body] = {}
BODY_SECONDS = 600.0


def concurrently(body: Body) -> Callable[[Box], None]:
    """Registers a test's body to run in its own thread from the module's start; the test then
    waits for it and re-raises what it raised."""
    _BODIES[body.__name__] = body

    def test(box: Box) -> None:
        box.outcome(body.__name__)

    test.__name__, test.__doc__ = body.__name__, body.__doc__
    return test


@dataclass
class Box:
    """The module's faulty services, their namespace, runtimes and timeline."""

    api_client: k8s_client.ApiClient
    namespace: str
    suffix: str
    timeline: Timeline
    config: pytest.Config
    _threads: dict[str, threading.Thread] = field(default_factory=dict)
    _failures: dict[str, BaseException] = field(default_factory=dict)

    def runtime(self, service: str) -> str:
        return f"fault-{service}-{self.suffix}"

    def watched(self, service: str) -> Watched:
        return Watched(self.timeline, service, self.config)

    def start(self, bodies: dict[str, Body]) -> None:
        for name, body in bodies.items():

            def run(body: Body = body, name: str = name) -> None:
                try:
                    body(self)
                except BaseException as error:
                    self._failures[name] = error

            self._threads[name] = threading.Thread(target=run, name=name, daemon=True)
            self._threads[name].start()

    def outcome(self, name: str) -> None:
        """Waits for a body; what it raised is raised again with the namespace's timeline,
        events and components' logs."""
        thread = self._threads[name]
        thread.join(BODY_SECONDS)
        failure = self._failures.get(name)
        if thread.is_alive():
            failure = AssertionError(f"{name} still running after {BODY_SECONDS:.0f}s")
        if failure is not None:
            failure.add_note(self.timeline.render())
            failure.add_note(diagnostics(self.api_client, self.namespace))
            raise failure

    def fix_runtime(self, service: str, changes: dict[str, Any]) -> float:
        """Patches the service's runtime; returns when, to look for what follows."""
        now = time.monotonic()
        k8s_client.CustomObjectsApi(self.api_client).patch_cluster_custom_object(
            "serving.noctaya.io", "v1alpha1", "inferenceruntimes", self.runtime(service),
            {"spec": changes},
        )  # fmt: skip
        return now

    def fix_service(self, service: str, changes: dict[str, Any]) -> float:
        now = time.monotonic()
        k8s_client.CustomObjectsApi(self.api_client).patch_namespaced_custom_object(
            "serving.noctaya.io", "v1alpha1", self.namespace, "llmservices", service,
            {"spec": changes},
        )  # fmt: skip
        return now


@pytest.fixture(scope="module")
def box(
    request: pytest.FixtureRequest, api_client: k8s_client.ApiClient, installed: None
) -> Iterator[Box]:
    core = k8s_client.CoreV1Api(api_client)
    resources = CustomResources(api_client)
    suffix = secrets.token_hex(3)
    namespace = f"faults-{suffix}"
    core.create_namespace({"metadata": {"name": namespace}})
    advertise_gpus(core, GPUS)
    runtime_template, service_template = example()
    created: list[str] = []
    with Timeline(api_client, namespace) as timeline:
        faults = Box(api_client, namespace, suffix, timeline, request.config)
        try:
            for name, fault in FAULTS.items():
                runtime = merged(runtime_template, {"metadata": {"name": faults.runtime(name)}})
                runtime["spec"] = merged(runtime["spec"], fault.runtime)
                resources.create(runtime)
                created.append(runtime["metadata"]["name"])
                service = merged(service_template, {"metadata": {"name": name}})
                pinned = {"runtime": {"name": faults.runtime(name)}, **fault.spec}
                service["spec"] = merged(service["spec"], pinned)
                resources.create(service, namespace)
            faults.start(_BODIES)
            yield faults
        finally:
            try:
                for runtime_name in created:
                    resources.delete("InferenceRuntime", runtime_name)
                core.delete_namespace(namespace)
            finally:  # the node's status is the cluster's, seen by every later test
                advertise_gpus(core, None)
                advertise(core, ACCELERATOR, None)


@concurrently
def test_a_backend_image_that_does_not_exist_is_image_pull_failed(box: Box) -> None:
    pull = box.watched("pull")
    fault = pull.fault("the image pull to fail", waiting("serving", "ErrImagePull"))
    status = pull.reported(
        fault, "backend image missing", kind="Degraded", reason="ImagePullFailed",
        status="True", phase="Degraded",
    )  # fmt: skip
    assert "cannot pull its serving image" in condition(status, "Degraded")[2]
    pull.event("ImagePullFailed")

    image = example()[0]["spec"]["container"]["image"]
    fixed = box.fix_runtime("pull", {"container": {"image": image}})
    pull.settles("Ready", ("True", "Available"), after=fixed)
    pull.event("BackendRecovered", "Normal", after=fixed)


@concurrently
def test_a_backend_over_its_memory_limit_is_oom_killed(box: Box) -> None:
    oom = box.watched("oom")
    fault = oom.fault("the kernel to kill it", terminated_by("serving", "OOMKilled"))
    oom.reported(
        fault, "backend over its memory limit", kind="Degraded", reason="OOMKilled",
        status="True", phase="Degraded",
    )  # fmt: skip
    oom.event("OOMKilled")

    fixed = box.fix_service("oom", {"resources": {"memory": "512Mi"}})
    oom.settles("Ready", ("True", "Available"), after=fixed)
    oom.event("BackendRecovered", "Normal", after=fixed)


@concurrently
def test_a_backend_that_exits_at_start_restarts_then_backs_off(box: Box) -> None:
    """The kubelet restarts the first exit at once and holds the second 10 s: the second
    restart runs 5 s as `ContainerRestarting`, and its exit backs off again."""
    crash = box.watched("crash")
    second = crash.fault(
        "a second restart, running",
        lambda pod: (
            restarted("serving", 2)(pod) and not waiting("serving", "CrashLoopBackOff")(pod)
        ),
    )
    crash.reported(
        second, "backend exits at start (restarting)", kind="Degraded",
        reason="ContainerRestarting", status="True", phase="Degraded",
    )  # fmt: skip
    crash.event("ContainerRestarting")
    again = crash.fault(
        "its exit to back off",
        lambda pod: restarted("serving", 2)(pod) and waiting("serving", "CrashLoopBackOff")(pod),
    )
    crash.reported(
        again, "backend exits at start (back-off)", kind="Degraded",
        reason="CrashLoopBackOff", status="True", phase="Degraded", after=second,
    )  # fmt: skip
    crash.event("CrashLoopBackOff", after=second.at)

    fixed = box.fix_runtime("crash", {"container": {"env": env()}})
    crash.settles("Ready", ("True", "Available"), after=fixed)
    crash.event("BackendRecovered", "Normal", after=fixed)


@concurrently
def test_a_backend_that_never_becomes_ready_exceeds_its_progress_deadline(box: Box) -> None:
    """The engine never passes its readiness probe. The Deployment's progress deadline, which
    Noctaya leaves to the cluster (600 s by default), is set short here as an operator may."""
    apps = k8s_client.AppsV1Api(box.api_client)
    stuck = box.watched("stuck")
    wait_for("the backend Deployment", lambda: _exists(apps, box.namespace, "stuck"))
    deadline = {"spec": {"progressDeadlineSeconds": PROGRESS_DEADLINE_SECONDS}}
    apps.patch_namespaced_deployment("stuck", box.namespace, deadline)
    fault = box.timeline.wait(
        "the Deployment's progress deadline",
        lambda e: e.kind == "Deployment" and e.name == "stuck" and _deadline_exceeded(e),
    )
    stuck.reported(
        fault, "backend never ready (progress deadline)", kind="Degraded",
        reason="ProgressDeadlineExceeded", status="True", phase="Degraded",
    )  # fmt: skip
    stuck.event("ProgressDeadlineExceeded")

    fixed = box.fix_runtime("stuck", {"container": {"env": env()}})
    stuck.settles("Ready", ("True", "Available"), after=fixed)
    stuck.event("BackendRecovered", "Normal", after=fixed)


@concurrently
def test_a_backend_asking_for_an_accelerator_the_node_lacks_waits_then_serves(
    box: Box,
) -> None:
    core = k8s_client.CoreV1Api(box.api_client)
    unplaced = box.watched("unplaced")
    unplaced_pod = unplaced.fault("the scheduler to find no node", unschedulable)
    # Ready has one reason: GatewayUnavailable until the gateway serves, then the backend's.
    gateway = box.timeline.wait(
        "the gateway available",
        lambda e: e.kind == "Deployment" and e.name == "unplaced-gateway" and _available(e),
    )
    status = unplaced.reported(
        max(unplaced_pod, gateway, key=lambda entry: entry.at),
        "accelerator not advertised (once the gateway serves)", kind="Ready",
        reason="SchedulingDelayed", status="False", phase="Loading",
    )  # fmt: skip
    assert condition(status, "Degraded")[:2] == ("False", "Progressing"), "not a failure"

    advertised = time.monotonic()
    advertise(core, ACCELERATOR, "1")
    unplaced.settles("Ready", ("True", "Available"), after=advertised)
    answer = chat(box.api_client, box.namespace, "unplaced", stream=False)
    body = answer.read()
    assert answer.status == 200, body
    assert b'"choices"' in body, body
    assert unplaced.operator_warnings() == [], "waiting for capacity is no failure"


@concurrently
def test_a_missing_api_key_secret_is_a_gateway_fault_its_creation_repairs(box: Box) -> None:
    """Pod status never says why a volume cannot be mounted: the kubelet's FailedMount event
    does, and that is the fault's first sign here."""
    core = k8s_client.CoreV1Api(box.api_client)
    keyless = box.watched("keyless")
    fault = box.timeline.wait(
        "the kubelet's FailedMount event",
        lambda e: (
            e.kind == "Event"
            and e.obj.get("reason") == "FailedMount"
            and (e.obj.get("involvedObject") or {}).get("name", "").startswith("keyless-gateway-")
        ),
    )
    status = keyless.reported(
        fault, "API-key Secret missing (gateway)", kind="Degraded",
        reason="ContainerConfigError", status="True", phase="Degraded",
    )  # fmt: skip
    _, _, message = condition(status, "Degraded")
    assert message.startswith('Gateway Pod "keyless-gateway-'), message
    assert f'secret "{API_KEY}" not found' in message, message
    assert condition(status, "Ready")[1] == "GatewayUnavailable"
    assert keyless.event("ContainerConfigError")["action"] == "ObserveGatewayFailure"

    created = time.monotonic()
    secret = {"metadata": {"name": API_KEY}, "stringData": {"token": secrets.token_hex(16)}}
    core.create_namespaced_secret(box.namespace, secret)
    keyless.serves_again(after=created)
    keyless.event("BackendRecovered", "Normal", after=created)


@concurrently
def test_a_gateway_over_its_memory_limit_is_oom_killed(box: Box) -> None:
    """A gateway that never runs also leaves KEDA without the external scaler it serves: KEDA
    reports the ScaledObject not ready, and so does AutoscalingReady, in KEDA's words."""
    starved = box.watched("starved")
    fault = starved.fault(
        "the kernel to kill the gateway", terminated_by("gateway", "OOMKilled"), gateway=True
    )
    status = starved.reported(
        fault, "gateway over its memory limit", kind="Degraded", reason="OOMKilled",
        status="True", phase="Degraded",
    )  # fmt: skip
    assert condition(status, "Degraded")[2].startswith('Gateway Pod "starved-gateway-')
    assert starved.event("OOMKilled")["action"] == "ObserveGatewayFailure"
    keda = box.timeline.wait(
        "KEDA to find no scaler",
        lambda e: (
            e.kind == "ScaledObject"
            and e.name == "starved"
            and condition(e.obj, "Ready")[:2] == ("False", "ScaledObjectCheckFailed")
        ),
    )
    unready = starved.reported(
        keda, "scaler unreachable (KEDA)", kind="AutoscalingReady",
        reason="ScaledObjectNotReady", status="False", phase=None,
    )  # fmt: skip
    assert condition(unready, "AutoscalingReady")[2].startswith(
        'KEDA reports ScaledObject "starved" not ready (ScaledObjectCheckFailed): '
    )

    limit = {"endpoint": {"resources": {"limits": {"memory": "256Mi"}}}}
    fixed = box.fix_service("starved", limit)
    starved.serves_again(after=fixed)


def _exists(apps: k8s_client.AppsV1Api, namespace: str, name: str) -> bool:
    try:
        apps.read_namespaced_deployment(name, namespace)
    except k8s_client.ApiException:
        return False
    return True


def _available(entry: Entry) -> bool:
    return int((entry.obj.get("status") or {}).get("availableReplicas") or 0) > 0


def _deadline_exceeded(entry: Entry) -> bool:
    conditions = (entry.obj.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") == "Progressing" and c.get("reason") == "ProgressDeadlineExceeded"
        for c in conditions
    )
