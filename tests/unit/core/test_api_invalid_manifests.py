"""Every invalid manifest under tests/data/invalid is rejected with the message its header names.

Each file starts with `# expect: <path>: <rule>`; the message must name the field path and the
rule, come as one NoctayaError, and never leak pydantic's Python-flavoured report.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from noctaya.core.api import InvalidResource, parse_inferenceruntime, parse_llmservice
from noctaya.core.errors import NoctayaError

INVALID = Path(__file__).resolve().parents[2] / "data" / "invalid"
PARSERS = {"LLMService": parse_llmservice, "InferenceRuntime": parse_inferenceruntime}


def _cases() -> list[Path]:
    return sorted(INVALID.glob("*.yaml"))


def _expected(path: Path) -> str:
    header = path.read_text(encoding="utf-8").splitlines()[0]
    assert header.startswith("# expect: "), f"{path.name} lacks its '# expect:' header"
    return header.removeprefix("# expect: ")


def test_invalid_manifest_set_covers_both_kinds_and_every_rule_file_has_a_header() -> None:
    kinds = {yaml.safe_load(path.read_text())["kind"] for path in _cases()}
    assert kinds == set(PARSERS)
    assert len(_cases()) >= 30
    for path in _cases():
        assert _expected(path)


@pytest.mark.parametrize("path", _cases(), ids=lambda path: path.stem)
def test_invalid_manifest_is_rejected_with_path_and_rule(path: Path) -> None:
    manifest = yaml.safe_load(path.read_text(encoding="utf-8"))
    with pytest.raises(InvalidResource) as caught:
        PARSERS[manifest["kind"]](manifest)
    error = caught.value
    assert isinstance(error, NoctayaError)
    assert error.reason == "InvalidSpec"
    expected = _expected(path)
    assert any(problem.startswith(expected) for problem in error.problems), error.problems
    assert "pydantic" not in error.message
    assert "Input should" not in error.message
