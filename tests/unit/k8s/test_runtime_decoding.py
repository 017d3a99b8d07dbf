"""The planner decodes an InferenceRuntime once per resourceVersion: at 1,000 services each
reconcile would otherwise validate the same unchanged runtime again."""

from __future__ import annotations

from typing import Any

from noctaya.core.api import read_llmservice
from noctaya.core.plan.planner import PlanSettings
from noctaya.core.plugins import VendorRegistry
from noctaya.k8s import kinds
from noctaya.k8s.planning import ServicePlanner
from noctaya.k8s.reader import CachedReader
from noctaya.k8s.runtime.store import Store
from support.manifests import inference_runtime, llmservice


def stored_runtime(store: Store, version: str, priority: int) -> None:
    runtime: dict[str, Any] = inference_runtime("vllm-nvidia", {"priority": priority})
    runtime["metadata"]["resourceVersion"] = version
    store.put(runtime)


def planner_over(store: Store) -> ServicePlanner:
    reader = CachedReader({kinds.INFERENCE_RUNTIME: store})
    return ServicePlanner(reader, VendorRegistry([]), PlanSettings("gw"))


def test_an_unchanged_runtime_is_decoded_once_for_every_service_using_it() -> None:
    store = Store()
    stored_runtime(store, "1", priority=1)
    planner = planner_over(store)
    pinned = read_llmservice(llmservice("pinned"))
    selecting = read_llmservice(
        llmservice("selecting", {"runtime": {"name": None, "selector": {"vendor": ["nvidia"]}}})
    )

    first = planner.resolve_runtime(pinned)

    assert planner.resolve_runtime(pinned) is first
    assert planner.resolve_runtime(selecting) is first


def test_a_changed_runtime_is_decoded_again() -> None:
    store = Store()
    stored_runtime(store, "1", priority=1)
    planner = planner_over(store)
    service = read_llmservice(llmservice("pinned"))
    before = planner.resolve_runtime(service)

    stored_runtime(store, "2", priority=7)
    after = planner.resolve_runtime(service)

    assert (before.spec.priority, after.spec.priority) == (1, 7)
