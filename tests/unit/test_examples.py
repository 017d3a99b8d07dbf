"""The shipped examples load through the API models and carry the documented vendor profiles."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from noctaya.core.api import (
    CacheStrategy,
    InferenceRuntime,
    LLMService,
    parse_inferenceruntime,
    parse_llmservice,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PROFILES = {
    "nvidia/a10": {
        "vendor": "nvidia",
        "image": "vllm/vllm-openai:v0.25.1",
        "resource": "nvidia.com/gpu",
        "labels": {"nvidia.com/gpu.product": "NVIDIA-A10G"},
    },
    "nvidia/a100": {
        "vendor": "nvidia",
        "image": "vllm/vllm-openai:v0.25.1",
        "resource": "nvidia.com/gpu",
        "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
    },
    "ascend/910b3": {
        "vendor": "ascend",
        "image": "quay.io/ascend/vllm-ascend:v0.21.0rc1",
        "resource": "huawei.com/Ascend910",
        "labels": {
            "accelerator": "huawei-Ascend910",
            "serving.noctaya.io/ascend-product": "ascend-910b3",
        },
    },
    "ascend/310p-duo": {
        "vendor": "ascend",
        "image": "quay.io/ascend/vllm-ascend:v0.22.1rc1-310p",
        "resource": "huawei.com/Ascend310P",
        "labels": {
            "accelerator": "huawei-Ascend310P",
            "serving.noctaya.io/ascend-product": "atlas-300i-duo",
        },
    },
    "ascend/310p-pro": {
        "vendor": "ascend",
        "image": "quay.io/ascend/vllm-ascend:v0.22.1rc1-310p",
        "resource": "huawei.com/Ascend310P",
        "labels": {
            "accelerator": "huawei-Ascend310P",
            "serving.noctaya.io/ascend-product": "atlas-300i-pro",
        },
    },
}
METRIC_NAMES = {
    "queue_depth": "vllm:num_requests_waiting",
    "kv_cache_util": "vllm:kv_cache_usage_perc",
    "running": "vllm:num_requests_running",
    "ttft": "vllm:time_to_first_token_seconds",
}
SHORT_CONTEXT_310P = ["--dtype=float16", "--max-model-len=2048", "--enforce-eager"]


def _load(profile: str) -> tuple[InferenceRuntime, LLMService]:
    documents = [
        document
        for path in sorted((EXAMPLES / profile).glob("*.yaml"))
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8"))
        if document
    ]
    runtimes = [parse_inferenceruntime(d) for d in documents if d["kind"] == "InferenceRuntime"]
    services = [parse_llmservice(d) for d in documents if d["kind"] == "LLMService"]
    assert (len(runtimes), len(services), len(documents)) == (1, 1, 2), profile
    return runtimes[0], services[0]


def test_every_example_file_belongs_to_a_known_profile_and_validates() -> None:
    files = sorted(EXAMPLES.rglob("*.yaml"))
    folders = {str(path.parent.relative_to(EXAMPLES)) for path in files}
    assert folders == {*PROFILES, "cpu", "local", "local/multi-model", "box"}
    for path in files:
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            parse = parse_llmservice if document["kind"] == "LLMService" else parse_inferenceruntime
            assert parse(document).metadata.name


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_runtime_profile_matches_the_reference(profile: str) -> None:
    runtime, _ = _load(profile)
    expected = PROFILES[profile]
    spec = runtime.spec
    assert spec.vendor == expected["vendor"]
    assert spec.priority == 100
    assert spec.container.image == expected["image"]
    assert spec.accelerator.resource_name == expected["resource"]
    assert spec.accelerator.node_selector == expected["labels"]
    assert spec.container.port.name == "http"
    for probe in (spec.health.readiness, spec.health.liveness, spec.health.startup):
        assert probe is not None
        assert probe.http_get is not None
        assert probe.http_get.path == "/health"
        assert probe.http_get.port == "http"
    assert spec.metrics is not None
    assert {field: getattr(spec.metrics, field) for field in METRIC_NAMES} == METRIC_NAMES


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_service_pins_its_runtime_and_prewarms_a_node_local_cache(profile: str) -> None:
    runtime, service = _load(profile)
    assert service.spec.runtime.name == runtime.metadata.name
    assert service.spec.cache.strategy is CacheStrategy.NODE_LOCAL_PVC
    assert service.spec.cache.prewarm is True
    assert service.spec.scaling.min == 0


def _every_document() -> list[dict[str, object]]:
    return [
        document
        for path in sorted(EXAMPLES.rglob("*.yaml"))
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8"))
        if document
    ]


def test_a_node_local_cache_serves_one_replica_unless_the_runtime_pins_one_node() -> None:
    """docs/caches.md: a `NodeLocalPVC` claim is `ReadWriteOnce`, attached to one node at a time;
    several replicas need a node selector narrowed to one node with room for all of them, or
    `SharedPVC`. No example runtime names a node, so every example on such a cache runs one."""
    documents = _every_document()
    runtimes = {
        runtime.metadata.name: runtime
        for runtime in (
            parse_inferenceruntime(d) for d in documents if d["kind"] == "InferenceRuntime"
        )
    }
    services = [parse_llmservice(d) for d in documents if d["kind"] == "LLMService"]
    node_local = [s for s in services if s.spec.cache.strategy is CacheStrategy.NODE_LOCAL_PVC]
    assert {s.metadata.name for s in node_local} >= {"qwen3-8b-a10", "qwen3-32b-a100"}
    for service in node_local:
        runtime = runtimes[service.spec.runtime.name or ""]
        if "kubernetes.io/hostname" in runtime.spec.accelerator.node_selector:
            continue
        assert service.spec.scaling.max == 1, service.metadata.name
    page = " ".join((EXAMPLES.parent / "docs" / "caches.md").read_text(encoding="utf-8").split())
    assert "narrow the runtime's `accelerator.nodeSelector` to a node" in page
    assert "otherwise use `SharedPVC`" in page


@pytest.mark.parametrize("profile", ["ascend/910b3", "ascend/310p-duo", "ascend/310p-pro"])
def test_ascend_runtimes_start_vllm_serve_explicitly(profile: str) -> None:
    runtime, _ = _load(profile)
    assert runtime.spec.container.args[:3] == ["vllm", "serve", "{{ .Model.Path }}"]


@pytest.mark.parametrize("profile", ["nvidia/a10", "nvidia/a100"])
def test_nvidia_runtimes_pass_the_model_as_the_positional_argument(profile: str) -> None:
    runtime, _ = _load(profile)
    assert runtime.spec.container.args[0] == "{{ .Model.Path }}"


def test_a10_allows_a_long_startup_and_drains_before_stopping() -> None:
    runtime, _ = _load("nvidia/a10")
    assert runtime.spec.health.startup is not None
    assert runtime.spec.health.startup.failure_threshold == 120
    assert runtime.spec.lifecycle.termination_grace_period_seconds == 120
    assert runtime.spec.lifecycle.pre_stop_drain is True


@pytest.mark.parametrize("profile", ["ascend/310p-duo", "ascend/310p-pro"])
def test_310p_services_override_dtype_context_and_eager_mode(profile: str) -> None:
    _, service = _load(profile)
    assert service.spec.runtime.args_override == SHORT_CONTEXT_310P
