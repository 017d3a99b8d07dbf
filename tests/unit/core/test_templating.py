"""Templating: the three template fields, Go's trim markers, and errors instead of empty strings."""

import pytest
from noctaya.core.errors import NoctayaError
from noctaya.core.templating import (
    TemplateContext,
    render_args,
    render_env_values,
    render_template,
)

CONTEXT = TemplateContext(
    model_path="Qwen/Qwen3-8B-Instruct", service_name="qwen3-8b", service_namespace="team-a"
)


def render(text: str) -> str:
    return render_template(text, CONTEXT, name="arg")


def render_error(text: str) -> str:
    with pytest.raises(NoctayaError) as caught:
        render(text)
    assert caught.value.reason == "Render"
    return caught.value.message


def test_qwen_example_renders_runtime_args_then_overrides() -> None:
    args = ["--model={{ .Model.Path }}", "--served-model-name={{ .Service.Name }}", "--port=8000"]
    assert render_args(args, ["--max-model-len=8192"], CONTEXT) == (
        "--model=Qwen/Qwen3-8B-Instruct",
        "--served-model-name=qwen3-8b",
        "--port=8000",
        "--max-model-len=8192",
    )


def test_overrides_are_templated_too() -> None:
    assert render_args([], ["--namespace={{ .Service.Namespace }}"], CONTEXT) == (
        "--namespace=team-a",
    )


def test_no_args_render_to_nothing() -> None:
    assert render_args([], [], CONTEXT) == ()


@pytest.mark.parametrize(
    ("text", "rendered"),
    [
        ("{{ .Model.Path }}", "Qwen/Qwen3-8B-Instruct"),
        ("{{.Model.Path}}", "Qwen/Qwen3-8B-Instruct"),
        ("{{   .Service.Name\t}}", "qwen3-8b"),
        ("{{ .Service.Namespace }}", "team-a"),
        ("{{.Service.Name}}.{{.Service.Namespace}}.svc", "qwen3-8b.team-a.svc"),
        ("plain --flag", "plain --flag"),
        ("", ""),
        ("a }} b", "a }} b"),
        ("{ .Model.Path }", "{ .Model.Path }"),
    ],
)
def test_field_lookups_render_and_plain_text_is_kept(text: str, rendered: str) -> None:
    assert render(text) == rendered


@pytest.mark.parametrize(
    ("text", "rendered"),
    [
        ("a  {{- .Service.Name }}  b", "aqwen3-8b  b"),
        ("a  {{ .Service.Name -}}  b", "a  qwen3-8bb"),
        ("a \n\t{{- .Service.Name -}}\n b", "aqwen3-8bb"),
        ("{{-\t.Service.Name\t-}}", "qwen3-8b"),
    ],
)
def test_trim_markers_remove_adjacent_whitespace_like_go(text: str, rendered: str) -> None:
    assert render(text) == rendered


def test_missing_key_is_an_error_naming_the_field_and_position() -> None:
    assert render_error("{{ .Nope }}") == (
        'template: arg:1:3: executing "arg" at <.Nope>: map has no entry for key "Nope"'
    )


def test_missing_nested_key_is_an_error() -> None:
    assert render_error("--model={{.Model.Name}}") == (
        'template: arg:1:10: executing "arg" at <.Model.Name>: map has no entry for key "Name"'
    )


def test_error_position_counts_lines() -> None:
    assert render_error("a\nbc {{ .Nope }}").startswith("template: arg:2:6: executing")


def test_field_of_a_string_is_an_error() -> None:
    assert render_error("{{ .Model.Path.Size }}") == (
        'template: arg:1:3: executing "arg" at <.Model.Path.Size>: '
        "can't evaluate field Size in type string"
    )


def test_a_group_of_fields_is_not_a_value() -> None:
    assert render_error("{{ .Service }}") == (
        'template: arg:1:3: executing "arg" at <.Service>: '
        ".Service is not a value; use .Service.Name or .Service.Namespace"
    )


@pytest.mark.parametrize("text", ["{{ .Model.Path", "ok {{ .Model.Path }} {{", "{{ .Model.Path }"])
def test_unclosed_action_is_an_error(text: str) -> None:
    assert render_error(text) == "template: arg:1: unclosed action"


@pytest.mark.parametrize("text", ["{{}}", "{{   }}", "{{-  -}}"])
def test_empty_action_is_an_error(text: str) -> None:
    assert render_error(text) == "template: arg:1: missing value for command"


@pytest.mark.parametrize(
    "body",
    [
        'printf "%s" .Model.Path',
        ".Model.Path | printf",
        "if .Model.Path",
        "/* comment */",
        ".",
        "Model.Path",
        ".Model..Path",
        ".Model.",
        ".Model.Path .Service.Name",
        "-.Model.Path",
        "$x := .Model.Path",
    ],
)
def test_anything_but_a_field_lookup_is_rejected(body: str) -> None:
    escaped = body.replace('"', '\\"')
    assert render_error("x\n{{ " + body + " }}") == (
        f'template: arg:2: unsupported action "{{{{ {escaped} }}}}": '
        "only .Model.Path, .Service.Name and .Service.Namespace can be used"
    )


def test_runtime_arg_errors_name_the_runtime_field_and_index() -> None:
    with pytest.raises(NoctayaError) as caught:
        render_args(["--port=8000", "--x={{ .Nope }}"], [], CONTEXT)
    assert caught.value.message == (
        "template: InferenceRuntime spec.container.args[1]:1:7: executing "
        '"InferenceRuntime spec.container.args[1]" at <.Nope>: map has no entry for key "Nope"'
    )


def test_override_errors_name_the_service_field_and_index() -> None:
    with pytest.raises(NoctayaError) as caught:
        render_args(["{{ .Model.Path }}"], ["ok", "{{ .Model.Path"], CONTEXT)
    assert caught.value.message == (
        "template: LLMService spec.runtime.argsOverride[1]:1: unclosed action"
    )


def test_env_literal_values_are_templated_and_absent_values_pass_through() -> None:
    values = ["{{ .Service.Name }}-cache", None, "", "plain"]
    assert render_env_values(values, CONTEXT) == ("qwen3-8b-cache", None, "", "plain")


def test_env_errors_name_the_env_index() -> None:
    with pytest.raises(NoctayaError) as caught:
        render_env_values(["ok", None, "{{ .Nope }}"], CONTEXT)
    assert caught.value.reason == "Render"
    assert caught.value.message.startswith(
        "template: InferenceRuntime spec.container.env[2].value:1:3: executing"
    )


def test_rendered_values_are_not_rendered_again() -> None:
    tricky = TemplateContext(model_path="{{ .Nope }}", service_name="s", service_namespace="n")
    assert render_template("{{ .Model.Path }}", tricky, name="arg") == "{{ .Nope }}"
