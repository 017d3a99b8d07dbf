"""Local mode's WorkloadOrchestrator with real processes: a plan applied starts the service's
gateway and engine, `observe` reports them in the core's terms (the engine's readiness checked
as the kubelet checks it), re-applying is idempotent, a changed plan replaces the processes, and
`remove` leaves nothing behind. Local mode plans with the operator's planner: both get one
backend plan from one manifest."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from noctaya.core.observation import (
    ACTIVATING,
    CRASH_LOOP_BACK_OFF,
    MODEL_LOADING,
    ServiceObservation,
)
from noctaya.core.plan.planner import PlanSettings
from noctaya.core.plan.serving import ServingPlan
from noctaya.core.plugins import VendorRegistry
from noctaya.core.ports import WorkloadOrchestrator
from noctaya.k8s import kinds
from noctaya.k8s.planning import ServicePlanner
from noctaya.k8s.reader import CachedReader
from noctaya.k8s.runtime.store import Store
from noctaya.local.errors import LocalRunError
from noctaya.local.manifest import read_manifest
from noctaya.local.plan import LocalPlan
from noctaya.local.workloads import LocalService, LocalWorkloads
from support.ports import free_port

from .support import (
    DEADLINE,
    pid_exists,
    plan_file,
    port_is_free,
    runtime_doc,
    service_doc,
    write_manifest,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "local" / "engine-stub.yaml"
HEALTH = {"readiness": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 1}}


async def eventually(condition: Callable[[], bool], within: float = DEADLINE) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def manifest(tmp_path: Path, *, runtime: dict[str, Any] | None = None, **spec: Any) -> Path:
    service = service_doc(**spec)
    service["spec"]["scaling"]["min"] = 1  # the engine starts with the service
    return write_manifest(
        tmp_path / "svc.yaml",
        runtime or runtime_doc(free_port(), env={"STUB_STARTUP_DELAY": "2s"}, health=HEALTH),
        service,
    )


class Local:
    """LocalWorkloads over one manifest, and everything it started stopped at the end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.local_plan: LocalPlan = plan_file(path)
        self.workloads = LocalWorkloads(self.translate, os.environ)

    def translate(self, serving: ServingPlan) -> LocalService:
        assert serving == self.local_plan.serving
        return LocalService(self.local_plan, "127.0.0.1:0", source=str(self.path))

    def plan(self) -> ServingPlan:
        return self.local_plan.serving


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[Callable[[Path], Local]]:
    started: list[Local] = []

    def start(path: Path) -> Local:
        started.append(Local(path))
        return started[-1]

    yield start
    for each in started:
        await each.workloads.close()


def observe(orchestrator: WorkloadOrchestrator, plan: ServingPlan) -> ServiceObservation:
    """Through the core's port, as any caller of an orchestrator would."""
    return orchestrator.observe(plan)


async def test_a_plan_applied_runs_its_processes_and_observe_follows_the_engine_readiness(
    tmp_path: Path, local: Callable[[Path], Local]
) -> None:
    service = local(manifest(tmp_path))
    plan = service.plan()
    orchestrator: WorkloadOrchestrator = service.workloads
    before = observe(orchestrator, plan)
    assert (before.backend.reason, before.gateway.reason) == (ACTIVATING, ACTIVATING)
    assert (before.backend.replicas, before.gateway.replicas) == (0, 0)

    orchestrator.apply(plan)
    processes = service.workloads.processes(plan.service)
    url = await asyncio.wait_for(asyncio.shield(processes.serving), DEADLINE)
    assert url.startswith("http://127.0.0.1:")
    assert url.endswith("/v1")
    assert observe(orchestrator, plan).gateway.serving
    await eventually(lambda: processes.engine.process is not None)
    loading = observe(orchestrator, plan).backend
    assert (loading.reason, loading.replicas, loading.ready_replicas) == (MODEL_LOADING, 1, 0)
    assert 'Backend Pod "svc-engine" is running while the model loads' in loading.message

    await eventually(lambda: observe(orchestrator, plan).backend.serving)
    assert not observe(orchestrator, plan).backend.degraded


async def test_applying_the_same_plan_again_changes_nothing_and_a_new_plan_replaces_it(
    tmp_path: Path, local: Callable[[Path], Local]
) -> None:
    service = local(manifest(tmp_path))
    plan = service.plan()
    service.workloads.apply(plan)
    first = service.workloads.processes(plan.service)
    await asyncio.wait_for(asyncio.shield(first.serving), DEADLINE)
    assert first.gateway is not None
    gateway = first.gateway.pid

    service.workloads.apply(service.plan())
    assert service.workloads.processes(plan.service) is first

    changed = service_doc(endpoint={"maxQueue": 3})
    changed["spec"]["scaling"]["min"] = 1
    service.local_plan = plan_file(
        write_manifest(tmp_path / "svc.yaml", runtime_doc(free_port()), changed)
    )
    service.workloads.apply(service.plan())
    second = service.workloads.processes(plan.service)
    assert second is not first
    await asyncio.wait_for(asyncio.shield(second.serving), DEADLINE)
    assert first.ended.done(), "the old processes stopped first"
    assert not pid_exists(gateway)
    assert second.gateway is not None
    assert second.gateway.pid != gateway


async def test_processes_that_ended_are_started_again_by_the_same_plan(
    tmp_path: Path, local: Callable[[Path], Local]
) -> None:
    service = local(manifest(tmp_path))
    plan = service.plan()
    service.workloads.apply(plan)
    first = service.workloads.processes(plan.service)
    await asyncio.wait_for(asyncio.shield(first.serving), DEADLINE)
    assert first.gateway is not None
    os.kill(first.gateway.pid, signal.SIGKILL)
    with pytest.raises(LocalRunError, match="the gateway exited unexpectedly"):
        await asyncio.wait_for(asyncio.shield(first.ended), DEADLINE)
    assert not observe(service.workloads, plan).gateway.serving

    service.workloads.apply(plan)

    second = service.workloads.processes(plan.service)
    assert second is not first
    await asyncio.wait_for(asyncio.shield(second.serving), DEADLINE)
    assert observe(service.workloads, plan).gateway.serving


async def test_remove_stops_the_gateway_and_the_engine_and_frees_their_ports(
    tmp_path: Path, local: Callable[[Path], Local]
) -> None:
    port = free_port()
    service = local(manifest(tmp_path, runtime=runtime_doc(port)))
    plan = service.plan()
    service.workloads.apply(plan)
    processes = service.workloads.processes(plan.service)
    await asyncio.wait_for(asyncio.shield(processes.serving), DEADLINE)
    await eventually(lambda: processes.engine.process is not None)
    assert processes.gateway is not None
    assert processes.engine.process is not None
    pids = [processes.gateway.pid, processes.engine.process.pid]

    service.workloads.remove(plan.service)  # returns at once, as deleting a Deployment does
    await asyncio.wait_for(processes.stop(), DEADLINE)

    assert not any(pid_exists(pid) for pid in pids)
    assert port_is_free(port)
    gone = observe(service.workloads, plan)
    assert (gone.backend.replicas, gone.gateway.replicas) == (0, 0)


async def test_an_engine_that_keeps_exiting_is_observed_in_crash_loop_back_off(
    tmp_path: Path, local: Callable[[Path], Local]
) -> None:
    crashing = runtime_doc(free_port(), command="sh -c 'exit 3'")
    service = local(manifest(tmp_path, runtime=crashing))
    plan = service.plan()
    service.workloads.apply(plan)

    await eventually(lambda: observe(service.workloads, plan).backend.reason == CRASH_LOOP_BACK_OFF)
    observation = observe(service.workloads, plan).backend
    assert observation.degraded
    assert observation.ready_replicas == 0
    assert service.workloads.processes(plan.service).engine.restarts >= 1


def test_local_mode_and_the_operator_plan_the_example_alike() -> None:
    """One planner: the runtimes of the file as a cluster would list them give the same plan."""
    local = plan_file(EXAMPLE).serving
    runtimes = Store()
    for document in yaml.safe_load_all(EXAMPLE.read_text(encoding="utf-8")):
        if document["kind"] == "InferenceRuntime":
            runtimes.put(document)
    operator = ServicePlanner(
        CachedReader({kinds.INFERENCE_RUNTIME: runtimes}),
        VendorRegistry.discover(),
        PlanSettings("ghcr.io/noctaya/noctaya:test", gateway_replicas=1),
    )
    (service,) = read_manifest(EXAMPLE).services
    cluster = operator.plan(service)

    assert (local.service, local.runtime, local.model) == (
        cluster.service,
        cluster.runtime,
        cluster.model,
    )
    assert (local.backend, local.autoscaling, local.cache) == (
        cluster.backend,
        cluster.autoscaling,
        cluster.cache,
    )
    assert local.gateway.image != cluster.gateway.image  # what the platform supplies differs
