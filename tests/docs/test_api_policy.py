"""API policy: each reserved field fails with the reason the page gives, the no-op field is
warned about, and the phases are the API's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from noctaya.core.api import Phase
from noctaya.k8s import cli
from support.manifests import inference_runtime, llmservice

from . import markdown_tables

PAGE = Path(__file__).resolve().parents[2] / "docs" / "api-policy.md"
RESERVED: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {  # field -> (service, runtime)
    "spec.model.catalogRef": ({"model": {"source": None, "catalogRef": "qwen3"}}, {}),
    "spec.resources.fraction": ({"resources": {"fraction": {"memory": "10Gi"}}}, {}),
    "spec.cache.strategy: BakedImage": ({"cache": {"strategy": "BakedImage"}}, {}),
    "spec.accelerator.sharing.supported: true": (
        {},
        {"accelerator": {"sharing": {"supported": True}}},
    ),
}


def rows(heading: str) -> list[list[str]]:
    """The cells of the first table after `heading`, backticks removed."""
    return [
        [cell.replace("`", "") for cell in row]
        for row in markdown_tables.table_after(PAGE, heading)
    ]


def reserved_rows() -> dict[str, str]:
    """Field (its kind dropped) -> outcome."""
    return {cells[0].split(" ", 1)[1]: cells[1] for cells in rows("## Reserved fields")}


def validate(tmp_path: Path, capsys: pytest.CaptureFixture[str], service: Any, runtime: Any) -> str:
    path = tmp_path / "m.yaml"
    documents = [inference_runtime("vllm-nvidia", runtime), llmservice("svc", service)]
    path.write_text(yaml.safe_dump_all(documents))
    cli.main(["validate", "-f", str(path)])
    return capsys.readouterr().err


def test_the_reserved_table_lists_exactly_the_checked_fields() -> None:
    assert set(reserved_rows()) == set(RESERVED)


@pytest.mark.parametrize("field", sorted(RESERVED))
def test_a_reserved_field_fails_with_the_documented_reason(
    field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reason = re.match(r"(\w+):", reserved_rows()[field])
    assert reason, reserved_rows()[field]
    service, runtime = RESERVED[field]
    assert f": {reason[1]}: " in validate(tmp_path, capsys, service, runtime)


def test_the_open_ai_compatible_field_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    problems = validate(tmp_path, capsys, {"endpoint": {"openAICompatible": False}}, {})
    assert "warning: spec.endpoint.openAICompatible: has no effect" in problems


@pytest.mark.parametrize(
    ("field", "runtime_part"),
    [
        ("spec.metrics", {"spec": {"metrics": {"queueDepth": "vllm:num_requests_waiting"}}}),
        ("status", {"status": {}}),
    ],
)
def test_a_runtime_field_without_effect_is_warned_about_as_the_page_says(
    field: str, runtime_part: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime = inference_runtime("vllm-nvidia", {})
    runtime["spec"] |= runtime_part.get("spec", {})
    runtime |= {key: value for key, value in runtime_part.items() if key != "spec"}
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all([runtime, llmservice("svc", {})]))
    assert cli.main(["validate", "-f", str(path)]) == 0
    warned = capsys.readouterr().err
    assert f"InferenceRuntime vllm-nvidia: warning: {field}: has no effect" in warned
    documented = {cells[0] for cells in rows("accepted and have no effect")}
    row = f"InferenceRuntime {'.status' if field == 'status' else field}"
    assert any(cell == row or cell.startswith(f"{row} ") for cell in documented), documented


def test_kv_cache_util_is_refused_naming_the_runtime_field_only_without_a_gauge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service = {"scaling": {"metric": "kvCacheUtil", "target": 80}}
    page = PAGE.read_text(encoding="utf-8")
    assert "refused with `ScaledObject`, naming that field" in page
    problems = validate(tmp_path, capsys, service, {})
    assert ": ScaledObject: " in problems
    assert "spec.metrics.kvCacheUtil" in problems
    gauge = {"metrics": {"queueDepth": "q", "kvCacheUtil": "vllm:kv_cache_usage_perc"}}
    assert validate(tmp_path, capsys, service, gauge) == ""


def test_the_phases_table_is_the_apis_phases() -> None:
    assert [cells[0] for cells in rows("## Phases")] == [phase.value for phase in Phase]
