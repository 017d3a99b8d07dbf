"""Files local mode cannot serve: exit code 2 and one line naming the field, never a traceback."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from noctaya.gateway.local.cli import main

from .support import runtime_doc, service_doc, write_manifest

PORT = 18999
"""Never bound: every case here is rejected before anything starts."""


def run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *docs: dict[str, Any]) -> str:
    manifest = write_manifest(tmp_path / "svc.yaml", *docs)
    assert main([str(manifest)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("noctaya-local: ")
    return lines[0]


def with_spec(document: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of `document` with `spec.<path>` (dotted) set to `value`."""
    result = copy.deepcopy(document)
    node = result["spec"]
    *parents, leaf = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value
    return result


def test_yaml_syntax_errors_name_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "broken.yaml"
    manifest.write_text("kind: LLMService\nspec: [unclosed\n", encoding="utf-8")
    assert main([str(manifest)]) == 2
    error = capsys.readouterr().err
    assert f"{manifest}: invalid YAML:" in error
    assert "(line 3, column 1)" in error


def test_a_missing_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "absent.yaml")]) == 2
    assert f"read {tmp_path / 'absent.yaml'}:" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("scaling.target", 0, "document 2: invalid LLMService: spec.scaling.target: Invalid"),
        ("scaling.min", 3, "spec.scaling.max: min must not exceed max"),
        ("endpoint.coldStart.mode", "later", 'spec.endpoint.coldStart.mode: Invalid value "later"'),
        (
            "scaling.metric",
            "kvCacheUtil",
            'LLMService spec.scaling.metric "kvCacheUtil" is not supported in v0; '
            "only queueDepth is wired to the autoscaler",
        ),
        (
            "scaling.scaleDownStabilization",
            "1500ms",
            "spec.scaling.scaleDownStabilization: scaleDownStabilization must be a whole number "
            "of seconds from 0s to 1h",
        ),
        (
            "model.source.uri",
            "pvc://models/qwen",
            "LLMService spec.model.source.uri: pvc:// models need a cluster",
        ),
        (
            "model.source.uri",
            "s3://bucket/model",
            'LLMService spec.model: model uri scheme "s3" is not supported yet',
        ),
        (
            "endpoint.authentication",
            {"secretRef": {"name": "client-key", "key": "api-key"}},
            "LLMService spec.endpoint.authentication.secretRef: local mode cannot read Secret "
            '"client-key"; pass --api-key-file with the client API key',
        ),
    ],
)
def test_service_errors_name_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str, value: Any, expected: str
) -> None:
    error = run(tmp_path, capsys, runtime_doc(PORT), with_spec(service_doc(), path, value))
    assert expected in error


def test_a_runtime_without_a_local_command_is_rejected_with_the_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    error = run(tmp_path, capsys, runtime_doc(PORT, command=None), service_doc())
    assert (
        'InferenceRuntime "stub" metadata.annotations["serving.noctaya.io/local-command"]: '
        'Required value: local mode cannot run the container image "example.invalid/vllm-stub:test"'
    ) in error
    assert '"vllm serve"' in error


def test_a_local_command_that_is_not_installed_is_rejected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    error = run(tmp_path, capsys, runtime_doc(PORT, command="no-such-engine --flag"), service_doc())
    assert 'command "no-such-engine" not found' in error


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (
            "container.env",
            [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
            'InferenceRuntime "stub" spec.container.env[0].valueFrom (TOKEN): not supported in '
            "local mode",
        ),
        (
            "container.args",
            ["--model={{ .Nope }}"],
            'template: InferenceRuntime spec.container.args[0]:1:11: executing "InferenceRuntime '
            'spec.container.args[0]" at <.Nope>: map has no entry for key "Nope"',
        ),
        ("container.port", {"containerPort": 0}, "spec.container.port.containerPort"),
    ],
)
def test_runtime_errors_name_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str, value: Any, expected: str
) -> None:
    error = run(tmp_path, capsys, with_spec(runtime_doc(PORT), path, value), service_doc())
    assert expected in error


def test_document_level_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}}
    error = run(tmp_path, capsys, runtime_doc(PORT), service_doc(), deployment)
    assert 'document 3: kind: Unsupported value "Deployment"' in error
    assert "no LLMService found" in run(tmp_path, capsys, runtime_doc(PORT))
    second = copy.deepcopy(service_doc())
    second["metadata"]["name"] = "other"
    error = run(tmp_path, capsys, runtime_doc(PORT), service_doc(), second)
    assert "2 LLMServices [svc other]; local mode serves exactly one per file" in error
    error = run(tmp_path, capsys, runtime_doc(PORT, name="elsewhere"), service_doc())
    assert (
        'LLMService spec.runtime.name "stub": no InferenceRuntime of that name in the file '
        "(found [elsewhere])"
    ) in error


def test_vendor_selection_follows_the_operator_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service = service_doc()
    service["spec"]["runtime"] = {"selector": {"vendor": ["ascend"]}}
    error = run(tmp_path, capsys, runtime_doc(PORT), service)
    assert "spec.runtime.selector: no InferenceRuntime matches vendors [ascend]" in error


def test_the_command_line_exits_2_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "svc.yaml", runtime_doc(PORT, command=None), service_doc())
    result = subprocess.run(
        [sys.executable, "-m", "noctaya.gateway.local", str(manifest)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "serving.noctaya.io/local-command" in result.stderr
    assert "Traceback" not in result.stderr
