"""Local mode's driver of its WorkloadOrchestrator (`ServiceSet`), with an in-memory one: what
the files hold becomes apply and remove calls through the core's port, as the operator's
reconciler makes them of a cluster's LLMServices."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from noctaya.core.observation import ServiceObservation
from noctaya.core.plan.identity import ServiceIdentity
from noctaya.core.plan.serving import ServingPlan
from noctaya.local.admission import Admitted
from noctaya.local.plan import LocalPlan
from noctaya.local.services import GATEWAY_LISTEN, Placement, ServiceSet
from support.ports import free_port

from .support import plan_file, runtime_doc, service_doc, write_manifest


class InMemoryWorkloads:
    """Records what it is asked; runs nothing."""

    def __init__(self, placement: Placement) -> None:
        self.placement = placement
        self.calls: list[tuple[str, Any]] = []
        self.running: dict[ServiceIdentity, ServingPlan] = {}

    def apply(self, plan: ServingPlan) -> None:
        self.placement.translate(plan)  # what LocalWorkloads asks for each plan it is given
        self.calls.append(("apply", plan.service))
        self.running[plan.service] = plan

    def observe(self, plan: ServingPlan) -> ServiceObservation:
        raise AssertionError("ServiceSet never observes")

    def remove(self, service: ServiceIdentity) -> None:
        self.calls.append(("remove", service))
        self.running.pop(service, None)


def planned(tmp_path: Path, name: str, namespace: str = "default", **spec: Any) -> LocalPlan:
    service = service_doc(**spec)
    service["metadata"] = {"name": name, "namespace": namespace}
    return plan_file(
        write_manifest(tmp_path / f"{name}-{namespace}.yaml", runtime_doc(free_port()), service)
    )


def admitted(*plans: LocalPlan) -> Admitted:
    return Admitted(
        {plan.service_name: plan for plan in plans},
        {plan.service_name: f"{plan.service_name}.yaml" for plan in plans},
    )


def driven() -> tuple[ServiceSet, InMemoryWorkloads, list[str]]:
    placement = Placement(lambda name: f"http://127.0.0.1:8080/v1 ({name})")
    workloads = InMemoryWorkloads(placement)
    vendors: list[str] = []
    return ServiceSet(workloads, placement, vendors.append), workloads, vendors


def test_services_added_changed_and_removed_become_apply_and_remove_calls(
    tmp_path: Path,
) -> None:
    services, workloads, vendors = driven()
    a, b = planned(tmp_path, "a"), planned(tmp_path, "b")

    assert services.apply(admitted(a, b), announce=True) == []
    assert workloads.calls == [("apply", a.serving.service), ("apply", b.serving.service)]
    assert vendors == [a.devices.vendor, b.devices.vendor]

    workloads.calls.clear()
    scaling = {"target": 3, "activationTimeout": "30s", "scaleDownStabilization": "1s"}
    changed = planned(tmp_path, "b", scaling=scaling)
    assert changed != b
    assert services.apply(admitted(changed), announce=True) == ["a"]
    assert workloads.calls == [("remove", a.serving.service), ("apply", b.serving.service)]
    assert set(workloads.running) == {b.serving.service}


def test_a_service_moved_to_another_namespace_is_removed_there_first(tmp_path: Path) -> None:
    services, workloads, _ = driven()
    first = planned(tmp_path, "a", "team-1")
    moved = planned(tmp_path, "a", "team-2")
    services.apply(admitted(first), announce=False)
    workloads.calls.clear()

    services.apply(admitted(moved), announce=False)

    assert workloads.calls == [("remove", first.serving.service), ("apply", moved.serving.service)]
    assert services.identity("a") == moved.serving.service


def test_the_orchestrator_places_each_plan_by_what_is_admitted_when_it_is_applied(
    tmp_path: Path,
) -> None:
    services, workloads, _ = driven()
    a = planned(tmp_path, "a")
    services.apply(admitted(a), announce=False)

    placed = workloads.placement.translate(a.serving)

    assert (placed.plan, placed.listen_addr, placed.source) == (a, GATEWAY_LISTEN, "a.yaml")
    assert placed.endpoint == "http://127.0.0.1:8080/v1 (a)"


def test_removing_a_service_nobody_applied_asks_nothing(tmp_path: Path) -> None:
    services, workloads, _ = driven()

    services.remove("never")

    assert workloads.calls == []
