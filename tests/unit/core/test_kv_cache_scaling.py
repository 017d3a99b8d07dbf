"""`spec.scaling.metric: kvCacheUtil`: the percent target is bounded, the plan says where the
gateway reads each pod's gauge, and a runtime that names no gauge is refused naming the field.
Also the paths the gateway requests itself (readiness, metrics) are refused unless printable."""

from __future__ import annotations

from typing import Any

import pytest
from noctaya.core.api import InvalidResource, parse_inferenceruntime, parse_llmservice
from noctaya.core.errors import NoctayaError
from noctaya.core.plan.autoscaling import plan_autoscaling
from noctaya.core.plan.gateway import KvCacheScaling
from noctaya.core.plan.serving import kv_cache_scaling
from support.manifests import inference_runtime, llmservice

GAUGE = "vllm:kv_cache_usage_perc"


def plan(scaling: dict[str, Any], runtime: dict[str, Any]) -> KvCacheScaling | None:
    service = parse_llmservice(llmservice("svc", {"scaling": scaling}))
    return kv_cache_scaling(service, parse_inferenceruntime(inference_runtime("rt", runtime)))


def test_a_kv_cache_service_plans_the_gauge_at_the_runtimes_named_port() -> None:
    planned = plan(
        {"metric": "kvCacheUtil"},
        {
            "container": {"image": "img", "port": {"name": "api", "containerPort": 8001}},
            "metrics": {"queueDepth": "q", "kvCacheUtil": GAUGE, "port": "api", "path": "/m"},
        },
    )
    assert planned == KvCacheScaling(metric=GAUGE, port=8001, path="/m")


def test_the_percent_target_is_the_triggers_target() -> None:
    service = parse_llmservice(
        llmservice("s", {"scaling": {"metric": "kvCacheUtil", "target": 70}})
    )
    assert plan_autoscaling(service.spec).target == 70


def test_a_numeric_metrics_port_is_taken_as_the_port() -> None:
    metrics = {"queueDepth": "q", "kvCacheUtil": GAUGE, "port": "9100"}
    planned = plan({"metric": "kvCacheUtil"}, {"metrics": metrics})
    assert planned == KvCacheScaling(metric=GAUGE, port=9100, path="/metrics")


def test_a_queue_depth_service_reads_no_gauge_even_where_the_runtime_names_one() -> None:
    assert plan({}, {"metrics": {"queueDepth": "q", "kvCacheUtil": GAUGE}}) is None


@pytest.mark.parametrize(
    "metrics",
    [None, {"queueDepth": "q"}, {"queueDepth": "q", "kvCacheUtil": ""}],
    ids=["no metrics", "no kvCacheUtil", "empty kvCacheUtil"],
)
def test_a_runtime_without_the_gauge_refuses_kv_cache_scaling_naming_the_field(
    metrics: dict[str, Any] | None,
) -> None:
    with pytest.raises(NoctayaError) as refused:
        plan({"metric": "kvCacheUtil"}, {"metrics": metrics})
    assert refused.value.reason == "ScaledObject"
    assert refused.value.message == (
        "scaling.metric kvCacheUtil needs the runtime's spec.metrics.kvCacheUtil; "
        'InferenceRuntime "rt" names no KV-cache gauge'
    )


def test_a_metrics_port_naming_no_container_port_is_refused_naming_both() -> None:
    metrics = {"queueDepth": "q", "kvCacheUtil": GAUGE, "port": "metrics"}
    with pytest.raises(NoctayaError) as refused:
        plan({"metric": "kvCacheUtil"}, {"metrics": metrics})
    assert 'spec.metrics.port "metrics"' in refused.value.message
    assert '("http")' in refused.value.message


@pytest.mark.parametrize(("target", "valid"), [(1, True), (100, True), (101, False)])
def test_a_kv_cache_target_is_a_percent(target: int, valid: bool) -> None:
    manifest = llmservice("svc", {"scaling": {"metric": "kvCacheUtil", "target": target}})
    if valid:
        assert parse_llmservice(manifest).spec.scaling.target == target
        return
    with pytest.raises(InvalidResource) as refused:
        parse_llmservice(manifest)
    assert refused.value.problems == [
        "spec.scaling.target: target is a percent of KV cache from 1 to 100 "
        "when metric is kvCacheUtil"
    ]


def test_a_queue_depth_target_may_exceed_100() -> None:
    manifest = llmservice("svc", {"scaling": {"target": 500}})
    assert parse_llmservice(manifest).spec.scaling.target == 500


@pytest.mark.parametrize("path", ["/he alth", "/santé", "/tab\there"])
@pytest.mark.parametrize(
    ("changes", "field"),
    [
        (
            lambda p: {"health": {"readiness": {"httpGet": {"path": p, "port": "http"}}}},
            "health.readiness.httpGet.path",
        ),
        (lambda p: {"metrics": {"queueDepth": "q", "path": p}}, "metrics.path"),
    ],
    ids=["readiness", "metrics"],
)
def test_a_path_the_gateway_requests_must_be_printable_ascii(
    path: str, changes: Any, field: str
) -> None:
    with pytest.raises(InvalidResource) as refused:
        parse_inferenceruntime(inference_runtime("rt", changes(path)))
    assert refused.value.problems == [f"spec.{field}: path must be printable ASCII without spaces"]


def test_a_liveness_path_keeps_kubernetes_own_rules() -> None:
    """Only the paths the gateway itself sends are narrowed; the kubelet escapes the others."""
    probe = {"httpGet": {"path": "/he alth", "port": "http"}}
    runtime = parse_inferenceruntime(inference_runtime("rt", {"health": {"liveness": probe}}))
    assert runtime.spec.health.liveness is not None
