"""The one planner: runtime resolution through the `RuntimeCatalog` port, then the plan, with its
env, checks and volumes as typed values (an in-memory catalog stands in for an adapter here)."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from noctaya.core.api import InferenceRuntime, parse_inferenceruntime, parse_llmservice
from noctaya.core.api.kubernetes import EnvVarSource, KeySelector
from noctaya.core.cache_planning import CACHE_MOUNT_PATH
from noctaya.core.errors import NoctayaError
from noctaya.core.plan.container import (
    ClaimVolume,
    Env,
    HealthCheck,
    HttpGet,
    MemoryVolume,
    Mount,
    TcpSocket,
    Toleration,
)
from noctaya.core.plan.planner import PlanSettings, ServicePlanner
from noctaya.core.plugins import VendorRegistry
from noctaya.core.runtime_selection import RuntimeCandidate, may_choose, resolve_runtime
from noctaya.core.vendors import AcceleratorPlan, AcceleratorRequest
from support.manifests import inference_runtime, llmservice


class Catalog:
    """A `RuntimeCatalog` over runtimes in memory, counting what resolution asks of it."""

    def __init__(self, runtimes: Iterable[InferenceRuntime]) -> None:
        self.by_name = {runtime.metadata.name or "": runtime for runtime in runtimes}
        self.asked: list[str] = []

    def candidates(self) -> list[RuntimeCandidate]:
        self.asked.append("candidates")
        return [
            RuntimeCandidate(name, runtime.spec.vendor, runtime.spec.priority)
            for name, runtime in self.by_name.items()
        ]

    def runtime(self, name: str) -> InferenceRuntime:
        self.asked.append(name)
        if name not in self.by_name:
            raise NoctayaError("RuntimeResolution", f"{name} is not in this catalog")
        return self.by_name[name]


class Gpus:
    vendor = "nvidia"

    def accelerator_plan(self, request: AcceleratorRequest) -> AcceleratorPlan:
        return AcceleratorPlan(self.vendor, request.whole_device_limits())


def runtime(
    name: str, vendor: str = "nvidia", priority: int = 0, **changes: object
) -> InferenceRuntime:
    return parse_inferenceruntime(
        inference_runtime(name, {"vendor": vendor, "priority": priority, **changes})
    )


def planner(*runtimes: InferenceRuntime) -> ServicePlanner:
    return ServicePlanner(Catalog(runtimes), VendorRegistry([Gpus()]), PlanSettings("gw:1"))


def test_a_pinned_runtime_is_asked_for_by_name_without_listing() -> None:
    catalog = Catalog([runtime("a", priority=1), runtime("b", priority=9)])
    service = parse_llmservice(llmservice("svc", {"runtime": {"name": "a"}}))
    assert resolve_runtime(service.spec.runtime, catalog).metadata.name == "a"
    assert catalog.asked == ["a"]


def test_a_vendor_selection_lists_the_candidates_then_takes_the_chosen_one() -> None:
    catalog = Catalog([runtime("low", priority=1), runtime("high", priority=9)])
    selection = {"runtime": {"name": None, "selector": {"vendor": ["ascend", "nvidia"]}}}
    service = parse_llmservice(llmservice("svc", selection))
    assert resolve_runtime(service.spec.runtime, catalog).metadata.name == "high"
    assert catalog.asked == ["candidates", "high"]


def test_the_catalog_says_in_its_own_words_that_a_runtime_is_missing() -> None:
    service = parse_llmservice(llmservice("svc", {"runtime": {"name": "gone"}}))
    with pytest.raises(NoctayaError) as caught:
        planner(runtime("a")).plan(service)
    assert (caught.value.reason, caught.value.message) == (
        "RuntimeResolution",
        "gone is not in this catalog",
    )


@pytest.mark.parametrize(
    ("name", "vendors", "runtime_name", "vendor", "chooses"),
    [
        ("a", [], "a", "nvidia", True),
        ("a", [], "b", "nvidia", False),
        (None, ["ascend", "nvidia"], "b", "nvidia", True),
        (None, ["ascend"], "b", "nvidia", False),
        (None, ["nvidia"], "b", None, False),
    ],
)
def test_which_runtimes_a_selection_may_choose(
    name: str | None, vendors: list[str], runtime_name: str, vendor: str | None, chooses: bool
) -> None:
    assert may_choose(name, vendors, runtime_name, vendor) is chooses


def test_the_plan_carries_env_checks_and_volumes_as_typed_values() -> None:
    secret = {"secretKeyRef": {"name": "s", "key": "token"}}
    rt = runtime(
        "rt",
        container={
            "image": "img",
            "port": {"name": "api", "containerPort": 8001},
            "env": [
                {"name": "M", "value": "{{ .Model.Path }}"},
                {"name": "T", "valueFrom": secret},
            ],
        },
        health={"liveness": {"tcpSocket": {"port": "api"}, "periodSeconds": 0}},
        accelerator={
            "resourceName": "nvidia.com/gpu",
            "tolerations": [{"key": "gpu", "operator": "Exists"}],
        },
    )
    service = parse_llmservice(
        llmservice("svc", {"runtime": {"name": "rt"}, "model": {"source": {"uri": "hf://o/m"}}})
    )
    backend = planner(rt).plan(service).backend

    assert backend.env == (
        Env("M", "o/m"),
        Env("T", source=EnvVarSource(secret_key_ref=KeySelector(name="s", key="token"))),
    )
    health = HttpGet(port="api", path="/health")
    assert backend.readiness == HealthCheck(http_get=health)
    assert backend.startup == HealthCheck(http_get=health, period_seconds=10, failure_threshold=60)
    assert backend.liveness == HealthCheck(tcp_socket=TcpSocket("api"), period_seconds=0)
    assert backend.volumes == (MemoryVolume("dshm"),)
    assert backend.mounts == (Mount("dshm", "/dev/shm"),)
    assert backend.scheduling.tolerations == (Toleration(key="gpu", operator="Exists"),)
    assert backend.cache is not None  # the default cache: a claim at /cache, with its hub env
    assert backend.cache.volume == ClaimVolume("model-cache", "svc-cache")
    assert (backend.cache.read_only, backend.cache.ready_marker) == (False, None)
    assert [env.name for env in backend.cache.env] == ["HF_HOME", "MODELSCOPE_CACHE"]
    assert all(env.value and env.value.startswith(CACHE_MOUNT_PATH) for env in backend.cache.env)


def test_a_model_the_platform_delivered_itself_is_templated_from_where_it_lies() -> None:
    rt = runtime("rt", container={"image": "i", "port": {}, "args": ["--model={{ .Model.Path }}"]})
    service = parse_llmservice(llmservice("svc", {"runtime": {"name": "rt"}}))

    plan = planner(rt).plan(service, model_path="/home/me/models/qwen")

    assert plan.backend.args == ("--model=/home/me/models/qwen",)
    assert plan.model.path == "/home/me/models/qwen"


def test_the_platforms_plain_http_registries_reach_only_their_staging_jobs() -> None:
    digest = "sha256:" + "ab" * 32
    settings = PlanSettings("gw:1", plain_http_registries=frozenset({"registry.ai.svc:5000"}))
    plans = ServicePlanner(Catalog([runtime("a")]), VendorRegistry([Gpus()]), settings)
    for registry, plain in (("registry.ai.svc:5000", True), ("registry.ai.svc", False)):
        changes = {
            "runtime": {"name": "a"},
            "model": {"source": {"uri": f"oci://{registry}/models/tiny@{digest}"}},
            "cache": {"strategy": "HostPath"},
        }
        prewarm = plans.plan(parse_llmservice(llmservice("svc", changes))).prewarm
        assert prewarm is not None
        assert ("--plain-http" in prewarm.command) is plain, registry
