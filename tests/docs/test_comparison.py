"""The comparison page: it covers the topics a platform engineer compares, and what it says of
Noctaya is what the code does (the other two columns are the projects' own documentation)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from noctaya.core.api.llmservice import CacheStrategy, ColdStartMode
from noctaya.core.errors import NoctayaError
from noctaya.core.model_source import resolve_model
from noctaya.core.plugins import VendorRegistry
from noctaya.k8s.offline import render_files

from . import markdown_tables

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "comparison.md"
EXAMPLE = REPO / "examples" / "nvidia" / "a10"
TOPICS = {
    "Scale to zero",
    "Requests while at zero",
    "OpenAI API",
    "Engine",
    "Model delivery and caches",
    "Accelerators",
    "On one machine",
    "Needs installed",
}


def rows() -> dict[str, dict[str, str]]:
    """Topic → {project: cell}."""
    table = markdown_tables.table_after(PAGE, "| | Noctaya | KServe | KEDA HTTP add-on |")
    projects = ("Noctaya", "KServe", "KEDA HTTP add-on")
    return {topic: dict(zip(projects, cells, strict=True)) for topic, *cells in table}


def noctaya(topic: str) -> str:
    return rows()[topic]["Noctaya"]


def render(service_spec: dict[str, Any], tmp_path: Path) -> Any:
    documents = [yaml.safe_load(p.read_text()) for p in sorted(EXAMPLE.glob("*.yaml"))]
    for document in documents:
        if document["kind"] == "LLMService":
            document["spec"].update(service_spec)
    source = tmp_path / "service.yaml"
    source.write_text(yaml.safe_dump_all(documents))
    return render_files(
        [source], VendorRegistry.discover(), gateway_image="gateway:test", gateway_replicas=1
    )


def test_the_table_covers_each_topic_for_all_three() -> None:
    assert set(rows()) >= TOPICS
    for topic, cells in rows().items():
        assert all(cell.strip() for cell in cells.values()), topic


def test_each_of_the_others_has_a_section_on_where_it_is_stronger() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert "## Where KServe is stronger" in text
    assert "## Where the KEDA HTTP add-on is stronger" in text
    assert "its limits" in text


def test_every_service_scales_to_zero_through_the_external_push_trigger_alone(
    tmp_path: Path,
) -> None:
    assert "KEDA's External Push scaler" in noctaya("Scale to zero")
    outcome = render({}, tmp_path)
    assert outcome.problems == []
    (scaled,) = [o for o in outcome.objects if o["kind"] == "ScaledObject"]
    assert scaled["spec"]["minReplicaCount"] == 0
    assert [trigger["type"] for trigger in scaled["spec"]["triggers"]] == ["external-push"]


def test_the_cold_start_modes_are_the_apis() -> None:
    said = set(re.findall(r"\(`(\w+)`\)", noctaya("Requests while at zero")))
    assert said == {mode.value for mode in ColdStartMode}


def test_the_model_sources_are_the_schemes_the_core_resolves() -> None:
    said = set(re.findall(r"`(\w+)://`", noctaya("Model delivery and caches")))
    assert said == {"hf", "modelscope", "oci", "pvc"}
    resolve_model("hf://org/model")
    resolve_model("modelscope://org/model")
    resolve_model("pvc://models/qwen")
    resolve_model(f"oci://registry.example.com/models/m@sha256:{'0' * 64}")
    with pytest.raises(NoctayaError):
        resolve_model("s3://bucket/model")
    implemented = {s.value for s in CacheStrategy} - {CacheStrategy.BAKED_IMAGE.value}
    assert implemented == {"NodeLocalPVC", "SharedPVC", "HostPath", "None"}


def test_the_vendor_plugins_named_are_the_installed_ones() -> None:
    said = noctaya("Accelerators")
    assert "NVIDIA, Ascend and CPU-only nodes" in said
    assert set(VendorRegistry.discover().vendors) == {"nvidia", "ascend", "cpu"}


def test_the_engines_the_examples_run_are_the_ones_named() -> None:
    images = {
        document["spec"]["container"]["image"]
        for path in REPO.glob("examples/*/**/*.yaml")
        if "local" not in path.parts
        for document in yaml.safe_load_all(path.read_text())
        if document and document["kind"] == "InferenceRuntime"
    }
    assert any(image.startswith("vllm/vllm-openai:") for image in images)
    assert any(image.startswith("quay.io/ascend/vllm-ascend:") for image in images)
    assert any("noctaya-llamacpp" in image for image in images)
    assert "the examples run vLLM, vLLM Ascend and llama.cpp" in noctaya("Engine")


def test_the_limits_hold_alpha_api_whole_devices_and_demand_scaling(tmp_path: Path) -> None:
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    for path in (REPO / "charts/noctaya/crds").glob("*.yaml"):
        crd = yaml.safe_load(path.read_text())
        assert crd["spec"]["group"] == "serving.noctaya.io"
        assert [version["name"] for version in crd["spec"]["versions"]] == ["v1alpha1"]
    assert "The API is alpha (`serving.noctaya.io/v1alpha1`)" in text

    refused = render({"resources": {"accelerators": 1, "fraction": {"memory": "12Gi"}}}, tmp_path)
    assert any("resources.fraction is not supported" in str(p) for p in refused.problems)
    assert "`resources.fraction` is refused" in text
