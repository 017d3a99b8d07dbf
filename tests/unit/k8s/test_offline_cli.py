"""`noctaya validate` and `noctaya render`: the operator's verdict on manifests, offline.

Every shipped example must validate; bad manifests list every problem (field path and rule, or
the operator's `Reason: message`) and exit 1, never a traceback.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml
from noctaya.k8s.cli import main
from support.hostile_yaml import COMMAND_DEADLINE, laughs, run_capped
from support.manifests import inference_runtime, llmservice

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"
EXAMPLE_SETS = sorted(
    {path.parent for path in EXAMPLES.rglob("*.yaml")}, key=lambda path: str(path)
)


def write(path: Path, *documents: object) -> Path:
    path.write_text(yaml.safe_dump_all(documents), encoding="utf-8")
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    "directory", EXAMPLE_SETS, ids=[str(p.relative_to(EXAMPLES)) for p in EXAMPLE_SETS]
)
def test_every_example_validates_clean(directory: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Clean but for the engine's scrape metadata the runtime profiles carry for your own
    monitoring, which `validate` reminds drives no autoscaling."""
    code, out, err = run(capsys, "validate", "-f", str(directory))
    assert code == 0, err
    assert [line for line in err.splitlines() if ": warning: spec.metrics: " not in line] == []
    assert re.search(r"documents valid(, \d+ warnings?)?\n$", out), out


def test_examples_cover_every_example_file() -> None:
    assert {p for d in EXAMPLE_SETS for p in d.glob("*.yaml")} == set(EXAMPLES.rglob("*.yaml"))


def test_validate_lists_every_problem_with_its_field_path_and_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(
        tmp_path / "bad.yaml",
        llmservice("bad", {"scaling": {"min": 3, "max": 1, "maxx": 2}, "cache": {"size": "-1"}}),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},
    )
    code, out, err = run(capsys, "validate", "-f", str(bad))
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        f"{bad} (document 1): LLMService default/bad: spec.scaling.max: min must not exceed max",
        f"{bad} (document 1): LLMService default/bad: spec.scaling.maxx: unknown field",
        f"{bad} (document 1): LLMService default/bad: spec.cache.size: "
        "must be greater than or equal to 0",
        f'{bad} (document 2): kind: supported values: "LLMService", "InferenceRuntime", '
        'got "ConfigMap"',
    ]


def test_validate_reports_planning_failures_with_the_operators_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime = write(tmp_path / "runtime.yaml", inference_runtime("rt"))
    service = write(
        tmp_path / "svc.yaml",
        llmservice(
            "tagged",
            {
                "model": {"source": {"uri": "oci://r.io/m@sha256:" + "a" * 64}},
                "runtime": {"name": "rt"},
                "cache": {"strategy": "None"},
            },
        ),
        llmservice("orphan", {"runtime": {"name": "missing"}}),
    )
    code, _, err = run(capsys, "validate", "-n", "ai", "-f", str(runtime), str(service))
    assert code == 1
    assert err.splitlines() == [
        f"{service} (document 1): LLMService ai/tagged: Prewarm: "
        "oci:// model sources require a persistent cache strategy",
        f"{service} (document 2): LLMService ai/orphan: RuntimeResolution: "
        'get InferenceRuntime "missing": inferenceruntimes.serving.noctaya.io "missing" not found',
    ]


def test_an_uninstalled_vendor_is_unsupported_listing_the_installed_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write(
        tmp_path / "all.yaml",
        inference_runtime("rt", {"vendor": "acme"}),
        llmservice("svc", {"runtime": {"name": "rt"}}),
    )
    code, _, err = run(capsys, "validate", "-f", str(files))
    assert code == 1
    assert 'UnsupportedVendor: no backend adapter registered for vendor "acme"' in err


def test_render_prints_the_operators_objects_in_apply_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, "render", "-f", str(EXAMPLES / "nvidia" / "a10"), "--gateway-replicas", "2"
    )
    assert code == 0, err
    assert "warning" not in err  # the runtime's metrics name the KV-cache gauge: used
    objects = list(yaml.safe_load_all(out))
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("ScaledObject", "qwen3-8b-a10"),
        ("Secret", "qwen3-8b-a10-demand-auth"),
        ("PersistentVolumeClaim", "qwen3-8b-a10-cache"),
        ("Job", "qwen3-8b-a10-prewarm"),
        ("Deployment", "qwen3-8b-a10"),
        ("Service", "qwen3-8b-a10-backend"),
        ("ServiceAccount", "qwen3-8b-a10-endpoint-reader"),
        ("Role", "qwen3-8b-a10-endpoint-reader"),
        ("RoleBinding", "qwen3-8b-a10-endpoint-reader"),
        ("Deployment", "qwen3-8b-a10-gateway"),
        ("Service", "qwen3-8b-a10"),
        ("PodDisruptionBudget", "qwen3-8b-a10-gateway"),
        ("Deployment", "qwen3-8b-a10-scaler"),
        ("Service", "qwen3-8b-a10-scaler"),
    ]
    assert {o["metadata"]["namespace"] for o in objects} == {"default"}


def test_render_shows_a_hub_token_as_a_secret_reference_in_the_job_and_the_backend(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mirror = {"name": "HF_ENDPOINT", "value": "https://hf-mirror.example"}
    files = write(
        tmp_path / "gated.yaml",
        inference_runtime("rt", {"container": {"env": [mirror]}}),
        llmservice(
            "gated",
            {
                "model": {"source": {"uri": "hf://acme/gated", "secretRef": {"name": "hf"}}},
                "runtime": {"name": "rt"},
                "cache": {"prewarm": True},
            },
        ),
    )
    code, out, err = run(capsys, "render", "-f", str(files))
    assert (code, err) == (0, "")
    objects = {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(out)}
    token = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}
    [prewarm] = objects["Job", "gated-prewarm"]["spec"]["template"]["spec"]["containers"]
    [serving] = objects["Deployment", "gated"]["spec"]["template"]["spec"]["containers"]
    assert prewarm["env"][-2:] == [mirror, token]
    assert mirror in serving["env"]
    assert token in serving["env"]


@pytest.mark.parametrize("command", ["validate", "render"])
def test_a_model_uri_with_a_token_is_refused_naming_the_field_not_the_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """`render` put the part before the @ into the backend's arguments and the served-model
    list that /v1/models shows to every client."""
    token = "hf_do_not_render_me"
    files = write(
        tmp_path / "token.yaml",
        inference_runtime("rt"),
        llmservice(
            "leaky",
            {"model": {"source": {"uri": f"hf://{token}@acme/tiny"}}, "runtime": {"name": "rt"}},
        ),
    )
    code, out, err = run(capsys, command, "-f", str(files))
    assert (code, out) == (1, "")
    assert err == (
        f"{files} (document 2): LLMService default/leaky: spec.model.source.uri: uri must not "
        "contain credentials (user:password@ or token@, or any @ in an hf:// or modelscope:// "
        "URI); the Secret that secretRef names holds them\n"
    )
    assert token not in err


def test_render_writes_nothing_when_any_service_is_invalid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write(
        tmp_path / "all.yaml",
        inference_runtime("rt"),
        llmservice("good", {"runtime": {"name": "rt"}}),
        llmservice("bad", {"runtime": {"name": "rt"}, "cache": {"strategy": "BakedImage"}}),
    )
    code, out, err = run(capsys, "render", "-f", str(files))
    assert (code, out) == (1, "")
    assert err == (
        f"{files} (document 3): LLMService default/bad: Render: "
        'cache strategy "BakedImage" is not supported yet\n'
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("kind: [unclosed\n", "invalid YAML: did not find expected ',' or ']' (line 2, column 1)"),
        ("- just\n- a list\n", "expected a mapping, got list"),
        ("kind: LLMService\nspec: {}\n", "metadata.name: Required value"),
        ("kind: LLMService\nmetadata: {name: x}\n", "LLMService default/x: spec: Required value"),
    ],
)
def test_malformed_files_are_one_line_errors_not_tracebacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, problem: str
) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(text, encoding="utf-8")
    code, _, err = run(capsys, "validate", "-f", str(path))
    assert code == 1
    assert problem in err
    assert "Traceback" not in err


def test_missing_files_and_empty_directories_are_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "validate", "-f", str(tmp_path / "nope.yaml"), str(tmp_path))
    assert code == 1
    assert err.splitlines() == [
        f"{tmp_path}: directory holds no .yaml or .yml files",
        f"{tmp_path / 'nope.yaml'}: cannot read: [Errno 2] No such file or directory: "
        f"'{tmp_path / 'nope.yaml'}'",
    ]


def test_a_second_object_of_the_same_kind_and_name_is_a_duplicate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write(
        tmp_path / "all.yaml",
        inference_runtime("rt"),
        inference_runtime("rt", {"priority": 5}),
        llmservice("svc", {"runtime": {"name": "rt"}}),
        llmservice("svc", {"runtime": {"name": "rt"}}),
        {
            **llmservice("svc", {"runtime": {"name": "rt"}}),
            "metadata": {"name": "svc", "namespace": "b"},
        },
    )
    code, _, err = run(capsys, "validate", "-f", str(files))
    assert code == 1
    assert err.splitlines() == [
        f'{files} (document 2): InferenceRuntime rt: metadata.name: Duplicate value "rt"',
        f'{files} (document 4): LLMService default/svc: metadata.name: Duplicate value "svc"',
    ]


@pytest.mark.parametrize("command", ["validate", "render"])
def test_an_alias_bomb_is_one_problem_in_bounded_time_and_memory(
    tmp_path: Path, command: str
) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(f"kind: LLMService\nbomb:\n{laughs()}", encoding="utf-8")
    assert bomb.stat().st_size < 1024
    bad = write(tmp_path / "bad.yaml", llmservice("bad", {"scaling": {"maxx": 2}}))

    result = run_capped(
        [sys.executable, "-m", "noctaya.k8s.cli", command, "-f", str(bomb), str(bad)]
    )

    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.splitlines() == [
        f"{bomb}: invalid YAML: &l0 (line 3, column 7): "
        "anchors and aliases are not supported in manifests",
        f"{bad}: LLMService default/bad: spec.scaling.maxx: unknown field",
    ]
    assert result.elapsed < COMMAND_DEADLINE / 2


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("spec:\n  target: " + "1" * 6000, "Exceeds the limit (4300 digits) for integer string"),
        ("created: 2020-02-30\n", "day is out of range for month (line 1, column 10)"),
        ("[" * 100 + "]" * 100, "nested deeper than 64 levels (line 1, column 65)"),
        ("[" * 200_000 + "]" * 200_000, "invalid YAML: exceeded maximum nesting depth"),
        ("# padding\n" * (1 << 17), "larger than 1048576 bytes (1 MiB)"),
        (b"kind: \xff\n", "not UTF-8"),
    ],
    ids=["huge-integer", "impossible-date", "deep", "deeper", "over-one-mib", "not-utf-8"],
)
def test_yaml_python_cannot_build_is_one_problem_with_its_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | bytes, problem: str
) -> None:
    path = tmp_path / "hostile.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")

    code, out, err = run(capsys, "validate", "-f", str(path))

    assert (code, out) == (1, "")
    [line] = err.splitlines()
    assert line.startswith(f"{path}: ")
    assert problem in line


def test_a_pinned_runtime_given_but_invalid_is_the_cause_not_a_missing_runtime(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = inference_runtime("vllm-nvidia", {"container": {"port": {"containerPort": 0}}})
    manifest = write(tmp_path / "both.yaml", broken, llmservice("svc"))
    code, _, err = run(capsys, "validate", "-f", str(manifest))
    assert code == 1
    lines = err.splitlines()
    assert lines[0].startswith(f"{manifest} (document 1): InferenceRuntime vllm-nvidia: ")
    assert lines[1] == (
        f"{manifest} (document 2): LLMService default/svc: RuntimeResolution: "
        f'InferenceRuntime "vllm-nvidia" in {manifest} (document 1) is invalid (its problems '
        "are listed with it), so no service can use it"
    )
    assert "not found" not in err


@pytest.mark.parametrize(
    ("spec", "warning"),
    [
        (
            {"cache": {"strategy": "None", "prewarm": True}},
            "spec.cache.prewarm: has no effect with cache.strategy None: there is no cache",
        ),
        (
            {"model": {"source": {"uri": "pvc://weights/qwen"}}, "cache": {"prewarm": True}},
            "spec.cache.prewarm: has no effect: a pvc:// model is mounted, never downloaded",
        ),
        (
            {"cache": {"strategy": "HostPath", "size": "10Gi"}},
            "spec.cache.size: has no effect with cache.strategy HostPath: no cache claim",
        ),
        (
            {"cache": {"strategy": "None", "storageClassName": "fast"}},
            "spec.cache.storageClassName: has no effect with cache.strategy None",
        ),
        (
            {"endpoint": {"openAICompatible": False}},
            "spec.endpoint.openAICompatible: has no effect: the gateway always serves",
        ),
        (
            {"endpoint": {"coldStart": {"mode": "reject", "heartbeatInterval": "2s"}}},
            "spec.endpoint.coldStart.heartbeatInterval: has no effect with coldStart.mode reject",
        ),
        (
            {"scaling": {"drainTimeout": "30s"}},
            'spec.scaling.drainTimeout: has no effect: InferenceRuntime "vllm-nvidia" does not '
            "set lifecycle.preStopDrain",
        ),
    ],
)
def test_settings_that_do_nothing_are_warnings_that_fail_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: dict[str, object], warning: str
) -> None:
    manifest = write(
        tmp_path / "svc.yaml", inference_runtime("vllm-nvidia"), llmservice("svc", spec)
    )
    code, out, err = run(capsys, "validate", "-f", str(manifest))
    assert code == 0
    assert out == "2 documents valid, 1 warning\n"
    assert err.startswith(f"{manifest} (document 2): LLMService default/svc: warning: {warning}")


def test_defaults_and_effective_settings_warn_of_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime = inference_runtime("vllm-nvidia", {"lifecycle": {"preStopDrain": True}})
    service = llmservice(
        "svc",
        {
            "cache": {"strategy": "SharedPVC", "size": "10Gi", "prewarm": True},
            "scaling": {"drainTimeout": "30s"},
            "endpoint": {"coldStart": {"mode": "keepalive", "heartbeatInterval": "2s"}},
        },
    )
    code, out, err = run(
        capsys, "validate", "-f", str(write(tmp_path / "s.yaml", runtime, service))
    )
    assert (code, out, err) == (0, "2 documents valid\n", "")
