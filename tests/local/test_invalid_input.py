"""Files local mode cannot serve: exit code 2 and one line naming the field, never a traceback."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from noctaya.core.api import LLMService
from noctaya.core.plugins import VendorRegistry
from noctaya.local.cli import main
from noctaya.local.errors import LocalConfigError
from noctaya.local.manifest import validate_document
from support.hostile_yaml import COMMAND_DEADLINE, laughs, run_capped

from .support import runtime_doc, service_doc, write_manifest

PORT = 18999
"""Never bound: every case here is rejected before anything starts."""
OCI_URI = "oci://registry.example.com/models/tiny@sha256:" + "0" * 64


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
            "LLMService spec.scaling.metric kvCacheUtil needs the runtime's "
            'spec.metrics.kvCacheUtil; InferenceRuntime "stub" names no KV-cache gauge',
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


@pytest.mark.parametrize(
    ("source", "cache", "expected"),
    [
        (
            {"uri": OCI_URI, "secretRef": {"name": "registry-creds"}},
            {},
            'LLMService spec.model.source.secretRef: local mode cannot read Secret "registry-creds"'
            "; pass --registry-config with its dockerconfigjson file",
        ),
        (
            {"uri": OCI_URI},
            {"strategy": "None"},
            "LLMService spec.cache: oci:// model sources require a persistent cache strategy",
        ),
    ],
    ids=["credentials", "no-cache"],
)
def test_an_oci_model_local_mode_cannot_stage_is_refused_before_any_fetch(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    source: dict[str, Any],
    cache: dict[str, str],
    expected: str,
) -> None:
    """The same rules as the operator's staging Job, checked before anything is downloaded."""
    service = service_doc(model={"source": source}, cache=cache)
    assert expected in run(tmp_path, capsys, runtime_doc(PORT), service)


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
    error = run(tmp_path, capsys, runtime_doc(PORT), service_doc(), service_doc())
    assert (
        f'{tmp_path / "svc.yaml"}: LLMService "svc": metadata.name is also the name of one in '
        f"{tmp_path / 'svc.yaml'}; local mode serves every service under its name"
    ) in error
    error = run(tmp_path, capsys, runtime_doc(PORT), runtime_doc(PORT), service_doc())
    assert 'InferenceRuntime "stub": metadata.name is also the name of one in' in error
    error = run(tmp_path, capsys, runtime_doc(PORT, name="elsewhere"), service_doc())
    assert (
        'LLMService spec.runtime.name "stub": no InferenceRuntime of that name in the files '
        "served (found [elsewhere])"
    ) in error


def test_vendor_selection_follows_the_operator_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service = service_doc()
    service["spec"]["runtime"] = {"selector": {"vendor": ["ascend"]}}
    error = run(tmp_path, capsys, runtime_doc(PORT), service)
    assert "spec.runtime.selector: no InferenceRuntime matches vendors [ascend]" in error


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0,0", '"0,0" names a device twice'),
        ("nvidia=", '"" is not a device id'),
        ("Nvidia=0", '"Nvidia" is not a vendor name'),
    ],
)
def test_a_devices_value_that_names_no_devices_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, message: str
) -> None:
    manifest = write_manifest(tmp_path / "svc.yaml", runtime_doc(PORT), service_doc())
    with pytest.raises(SystemExit) as exited:
        main([str(manifest), "--devices", value])
    assert exited.value.code == 2
    assert f"noctaya-local: error: --devices: {message}" in capsys.readouterr().err


def test_devices_for_a_vendor_no_plugin_provides_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A misspelt vendor, taken as given, would leave the real vendor's engines unbudgeted."""
    manifest = write_manifest(tmp_path / "svc.yaml", runtime_doc(PORT), service_doc())
    assert main([str(manifest), "--devices", "nvdia=0"]) == 2
    installed = " ".join(VendorRegistry.discover().vendors)
    assert capsys.readouterr().err == (
        'noctaya-local: --devices nvdia=0: no vendor plugin "nvdia" is installed; '
        f"installed vendors: [{installed}]\n"
    )


def run_command(manifest: Path) -> tuple[str, float]:
    """`noctaya-local manifest` as a process in capped memory: its one line and its run time;
    it must exit 2 without a traceback."""
    result = run_capped([sys.executable, "-m", "noctaya.local", str(manifest)])
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.count("\n") == 1, result.stderr[-2000:]
    assert result.stdout == ""
    return result.stderr, result.elapsed


def test_the_command_line_exits_2_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path / "svc.yaml", runtime_doc(PORT, command=None), service_doc())
    error, _ = run_command(manifest)
    assert "serving.noctaya.io/local-command" in error


def test_an_alias_bomb_is_refused_at_once_in_bounded_memory(tmp_path: Path) -> None:
    manifest = tmp_path / "bomb.yaml"
    service = yaml.safe_dump(service_doc(), sort_keys=False)
    manifest.write_text(f"{service}bomb:\n{laughs()}", encoding="utf-8")
    assert manifest.stat().st_size < 1024
    error, elapsed = run_command(manifest)
    assert "invalid YAML: &l0 (line 20, column 7): anchors and aliases are not supported" in error
    assert elapsed < COMMAND_DEADLINE / 2


def test_a_file_over_one_mib_is_refused_with_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = write_manifest(tmp_path / "svc.yaml", runtime_doc(PORT), service_doc())
    with manifest.open("a", encoding="utf-8") as file:
        file.write("# padding\n" * (1 << 17))
    assert main([str(manifest)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert "larger than 1048576 bytes (1 MiB), the most a manifest file may hold" in error


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[" * 100 + "]" * 100, "nested deeper than 64 levels (line 1, column 65)"),
        ("[" * 20_000 + "]" * 20_000, "nest"),
        ("a:\n" + "".join(" " * n + "- \n" for n in range(1, 100)), "nested deeper than 64"),
        ("target: " + "1" * 5000, "Exceeds the limit (4300 digits) for integer string conversion"),
        ("created: 2001-13-45", "month must be in 1..12 (line 1, column 10)"),
        ('name: "\\ud800"', "found invalid Unicode character escape code"),
    ],
    ids=[
        "deep-flow",
        "deeper-flow",
        "deep-block",
        "huge-integer",
        "impossible-date",
        "lone-surrogate",
    ],
)
def test_yaml_python_cannot_build_is_an_error_with_its_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    manifest = tmp_path / "svc.yaml"
    manifest.write_text(text, encoding="utf-8")
    assert main([str(manifest)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert f"{manifest}: invalid YAML: " in error
    assert expected in error


def test_a_megabyte_service_name_is_refused_naming_the_field(tmp_path: Path) -> None:
    service = service_doc()
    service["metadata"]["name"] = "a" * 1_000_000
    error, _ = run_command(write_manifest(tmp_path / "svc.yaml", runtime_doc(PORT), service))
    assert (
        "document 2: invalid LLMService: metadata.name: Invalid value: "
        f'"{"a" * 64}"... (1000000 characters): must be no more than 55 characters'
    ) in error
    assert len(error) < 500


@pytest.mark.parametrize(
    ("kind", "name", "expected"),
    [
        ("LLMService", "a" * 56, "must be no more than 55 characters"),
        ("LLMService", "my.svc", "a DNS-1035 label must consist of"),
        ("LLMService", "Svc", "a DNS-1035 label must consist of"),
        ("LLMService", "1svc", "a DNS-1035 label must consist of"),
        ("InferenceRuntime", "r" * 254, "must be no more than 253 characters"),
        ("InferenceRuntime", "vllm_0.8", "a lowercase RFC 1123 subdomain must consist of"),
        ("InferenceRuntime", "-vllm", "a lowercase RFC 1123 subdomain must consist of"),
    ],
)
def test_names_follow_the_cluster_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, name: str, expected: str
) -> None:
    runtime, service = runtime_doc(PORT), service_doc()
    document = service if kind == "LLMService" else runtime
    document["metadata"]["name"] = name
    error = run(tmp_path, capsys, runtime, service)
    assert f"invalid {kind}: metadata.name: Invalid value: " in error
    assert expected in error


def test_names_the_cluster_accepts_are_served(tmp_path: Path) -> None:
    service = validate_document(service_doc(runtime="vllm-0.8.nvidia"), "svc.yaml: document 1")
    assert isinstance(service, LLMService)
    longest = {**service_doc(), "metadata": {"name": "s" * 55, "namespace": "team-a"}}
    assert validate_document(longest, "svc.yaml: document 1").metadata.name == "s" * 55
    runtime = {**runtime_doc(PORT), "metadata": {"name": "vllm-0.8.nvidia"}}
    assert validate_document(runtime, "svc.yaml: document 2").metadata.name == "vllm-0.8.nvidia"


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ({"apiVersion": ["serving.noctaya.io/v1alpha1"]}, "apiVersion: must be"),
        ({"apiVersion": {"group": 1}}, "apiVersion: must be"),
        ({"kind": ["LLMService"]}, "kind: Unsupported value \"['LLMService']\""),
        ({"kind": 7}, 'kind: Unsupported value "7"'),
        ({"kind": "x" * 100_000}, 'kind: Unsupported value "xxxx'),
        ({"metadata": {"name": 5}}, "metadata.name"),
        ({"metadata": ["svc"]}, "metadata"),
    ],
)
def test_header_fields_of_the_wrong_type_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], header: dict[str, Any], expected: str
) -> None:
    error = run(tmp_path, capsys, runtime_doc(PORT), {**service_doc(), **header})
    assert "document 2: " in error
    assert expected in error
    assert len(error) < 1000


def test_whatever_the_core_raises_for_a_document_becomes_a_config_error() -> None:
    service = service_doc()
    service["spec"]["scaling"]["target"] = 10**5000  # no YAML file can hold it; a dict can
    with pytest.raises(LocalConfigError) as raised:
        validate_document(service, "svc.yaml: document 1")
    assert str(raised.value).startswith("svc.yaml: document 1: invalid LLMService: ")


def test_a_message_echoing_a_huge_key_is_cut_to_one_readable_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    error = run(tmp_path, capsys, runtime_doc(PORT), with_spec(service_doc(), "k" * 900_000, 1))
    assert error.startswith("noctaya-local: ")
    assert "document 2: invalid LLMService: spec.kkkk" in error
    assert error.endswith(" characters)")
    assert len(error) < 2100
