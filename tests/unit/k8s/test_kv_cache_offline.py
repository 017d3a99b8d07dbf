"""`spec.scaling.metric: kvCacheUtil` offline: `noctaya render` gives KEDA the percent target,
`noctaya validate` refuses a runtime that names no gauge as the operator would, and warns when
the target is left at queueDepth's default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from noctaya.k8s.cli import main
from support.manifests import inference_runtime, llmservice

GAUGE = "vllm:kv_cache_usage_perc"
METRICS = {"queueDepth": "vllm:num_requests_waiting", "kvCacheUtil": GAUGE}


def run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str, *documents: Any
) -> tuple[int, str, str]:
    path = tmp_path / "all.yaml"
    path.write_text(yaml.safe_dump_all(documents), encoding="utf-8")
    code = main([command, "-f", str(path)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.replace(f"{path} ", "")


def metrics_noise(err: str) -> list[str]:
    """What `validate` says beyond the reminder that a runtime's metrics are scrape metadata."""
    return [line for line in err.splitlines() if ": warning: spec.metrics: " not in line]


def test_the_scaled_object_targets_the_percent_of_kv_cache(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(
        capsys,
        tmp_path,
        "render",
        inference_runtime("vllm-nvidia", {"metrics": METRICS}),
        llmservice("svc", {"scaling": {"metric": "kvCacheUtil", "target": 70, "max": 4}}),
    )
    assert code == 0, err
    (scaled,) = [o for o in yaml.safe_load_all(out) if o["kind"] == "ScaledObject"]
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "external-push"
    assert trigger["metadata"]["targetValue"] == "70"
    assert trigger.get("metricType", "AverageValue") == "AverageValue"
    assert scaled["spec"]["maxReplicaCount"] == 4


def test_a_runtime_without_the_gauge_is_refused_with_the_operators_reason(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(
        capsys,
        tmp_path,
        "validate",
        inference_runtime("vllm-nvidia"),
        llmservice("svc", {"scaling": {"metric": "kvCacheUtil", "target": 70}}),
    )
    assert code == 1
    assert metrics_noise(err) == [
        "(document 2): LLMService default/svc: ScaledObject: scaling.metric kvCacheUtil needs "
        'the runtime\'s spec.metrics.kvCacheUtil; InferenceRuntime "vllm-nvidia" names no '
        "KV-cache gauge"
    ]


def test_a_target_left_at_the_queue_depth_default_is_a_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(
        capsys,
        tmp_path,
        "validate",
        inference_runtime("vllm-nvidia", {"metrics": METRICS}),
        llmservice("svc", {"scaling": {"metric": "kvCacheUtil"}}),
    )
    assert code == 0, err
    assert out == "2 documents valid, 1 warning\n"  # its gauge is used: no metrics reminder
    assert metrics_noise(err) == [
        "(document 2): LLMService default/svc: warning: spec.scaling.target: left at "
        "queueDepth's default 10, which for kvCacheUtil asks for a backend replica per 10 % of "
        "one replica's KV cache in use; set the percent each replica should run at, such as 70"
    ]


@pytest.mark.parametrize(
    "scaling",
    [{"metric": "kvCacheUtil", "target": 10}, {"metric": "kvCacheUtil", "target": 70}, {}],
    ids=["10 written out", "70", "queueDepth default"],
)
def test_a_target_the_user_chose_warns_of_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, scaling: dict[str, Any]
) -> None:
    code, _, err = run(
        capsys,
        tmp_path,
        "validate",
        inference_runtime("vllm-nvidia", {"metrics": METRICS}),
        llmservice("svc", {"scaling": scaling}),
    )
    assert code == 0, err
    assert metrics_noise(err) == []


def test_a_percent_above_100_is_refused_naming_the_target(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(
        capsys,
        tmp_path,
        "validate",
        inference_runtime("vllm-nvidia", {"metrics": METRICS}),
        llmservice("svc", {"scaling": {"metric": "kvCacheUtil", "target": 150}}),
    )
    assert code == 1
    assert metrics_noise(err) == [
        "(document 2): LLMService default/svc: spec.scaling.target: target is a percent of KV "
        "cache from 1 to 100 when metric is kvCacheUtil"
    ]
