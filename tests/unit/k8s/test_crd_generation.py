"""The committed CRDs are exactly what the generator writes, and what it writes is structural."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from noctaya.k8s.cli import main
from noctaya.k8s.crds import DEFINITIONS, rendered_crds
from noctaya.k8s.crds.definitions import ResourceDefinition
from noctaya.k8s.crds.schema import structural_problems

REPO = Path(__file__).resolve().parents[3]
BASES = REPO / "config" / "crd" / "bases"
EXPECTED_FILES = {
    "serving.noctaya.io_llmservices.yaml",
    "serving.noctaya.io_inferenceruntimes.yaml",
}


def test_generator_writes_one_file_per_resource_named_group_underscore_plural() -> None:
    assert set(rendered_crds()) == EXPECTED_FILES


@pytest.mark.parametrize("name", sorted(EXPECTED_FILES))
def test_committed_crd_matches_the_generated_one(name: str) -> None:
    committed = BASES / name
    assert committed.exists(), f"{committed} is missing: run `make crds`"
    assert committed.read_text(encoding="utf-8") == rendered_crds()[name], (
        f"{committed.relative_to(REPO)} differs from the models: run `make crds` and commit"
    )


def test_generation_is_deterministic() -> None:
    assert rendered_crds() == rendered_crds()


def test_crds_command_writes_the_files_into_the_output_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["crds", "--output", str(tmp_path / "out")]) == 0
    written = {path.name: path.read_text(encoding="utf-8") for path in (tmp_path / "out").iterdir()}
    assert written == rendered_crds()
    assert capsys.readouterr().out.count(".yaml") == 2


def test_crds_command_requires_an_output_directory(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["crds"])
    assert exited.value.code == 2
    assert "--output" in capsys.readouterr().err


@pytest.mark.parametrize("definition", DEFINITIONS, ids=lambda d: d.kind)
def test_schema_is_structural_and_uses_only_openapi_keywords(
    definition: ResourceDefinition,
) -> None:
    schema = definition.to_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert structural_problems(schema) == []
    assert "$ref" not in yaml.safe_dump(schema)
    assert "title" not in _all_keys(schema)
    assert "additionalProperties" not in {
        key for _, node in _nodes(schema) if "properties" in node for key in node
    }


def test_structural_check_reports_untyped_nodes_and_properties_beside_additional_properties() -> (
    None
):
    bad = {
        "type": "object",
        "properties": {
            "loose": {"description": "no type"},
            "both": {"type": "object", "properties": {}, "additionalProperties": False},
            "ge": {"type": "integer", "ge": 1},
        },
    }
    problems = structural_problems(bad)
    assert ".loose: every node needs a type" in problems
    assert ".both: properties and additionalProperties are exclusive" in problems
    assert ".ge: not OpenAPI v3 schema keywords: ge" in problems


def test_preserve_unknown_fields_appears_only_on_env_var_sources() -> None:
    preserved = [
        path
        for definition in DEFINITIONS
        for path, node in _nodes(definition.schema())
        if node.get("x-kubernetes-preserve-unknown-fields")
    ]
    assert preserved == [".spec.container.env.items.valueFrom"]


def _nodes(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from _nodes(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _nodes(node["items"], f"{path}.items")


def _all_keys(node: dict[str, Any]) -> set[str]:
    return {key for _, child in _nodes(node) for key in child}
