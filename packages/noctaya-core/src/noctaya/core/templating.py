"""The template language of runtime args and env values: field lookups, nothing else.

Only `{{ .Model.Path }}`, `{{ .Service.Name }}` and `{{ .Service.Namespace }}` are understood,
with optional `{{-`/`-}}` markers that trim the whitespace beside them. Anything else
(pipelines, functions, `if`, comments) is rejected rather than guessed at, and an unknown key
is an error: a typo must never render as an empty string.

Runtimes are written for the reference's Go `text/template` with `missingkey=error` (the
reference behaviour), so this is a subset of it on purpose: what renders here renders the same
there, and errors read the same (`template: <field path>:<line>: ...`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from noctaya.core.errors import NoctayaError
from noctaya.core.values.go_text import go_quote

REASON = "Render"
_SPACE = " \t\r\n"
_SPACE_CHARS = frozenset(_SPACE)
_FIELD_CHAIN = re.compile(r"(?:\.[A-Za-z_][A-Za-z0-9_]*)+")

TemplateData = Mapping[str, "str | TemplateData"]


@dataclass(frozen=True, slots=True)
class TemplateContext:
    """The values a template can name."""

    model_path: str
    service_name: str
    service_namespace: str

    def data(self) -> TemplateData:
        return {
            "Model": {"Path": self.model_path},
            "Service": {"Name": self.service_name, "Namespace": self.service_namespace},
        }


def render_args(
    runtime_args: Sequence[str], overrides: Sequence[str], context: TemplateContext
) -> tuple[str, ...]:
    """Runtime args, then the service's `argsOverride` appended; every entry is templated."""
    rendered = [
        render_template(arg, context, name=f"InferenceRuntime spec.container.args[{index}]")
        for index, arg in enumerate(runtime_args)
    ]
    rendered += [
        render_template(arg, context, name=f"LLMService spec.runtime.argsOverride[{index}]")
        for index, arg in enumerate(overrides)
    ]
    return tuple(rendered)


def render_env_values(
    values: Sequence[str | None], context: TemplateContext
) -> tuple[str | None, ...]:
    """Runtime env literal values, position for position; empty/absent values pass unchanged.

    The caller keeps each entry's name and `valueFrom`, and swaps in the rendered value.
    """
    return tuple(
        render_template(value, context, name=f"InferenceRuntime spec.container.env[{index}].value")
        if value
        else value
        for index, value in enumerate(values)
    )


def render_template(text: str, context: TemplateContext, *, name: str) -> str:
    """Render `text`; `name` says where it came from in errors (`NoctayaError("Render", …)`)."""
    data = context.data()
    out: list[str] = []
    for literal, action in _split(text, name):
        out.append(literal)
        if action is not None:
            out.append(_evaluate(text, action, data, name))
    return "".join(out)


@dataclass(frozen=True, slots=True)
class _Action:
    body: str
    """The action's content with surrounding whitespace and trim markers removed."""
    offset: int
    """Where `body` starts in the template text, for the `line:column` of error messages."""


def _split(text: str, name: str) -> Iterator[tuple[str, _Action | None]]:
    """(literal text, following action) pairs, trim markers applied to the literal text."""
    pos = 0
    while (start := text.find("{{", pos)) >= 0:
        literal = text[pos:start]
        inner = start + 2
        if text[inner : inner + 1] == "-" and text[inner + 1 : inner + 2] in _SPACE_CHARS:
            literal = literal.rstrip(_SPACE)
            inner += 2
        end = text.find("}}", inner)
        if end < 0:
            raise _parse_error(text, start, name, "unclosed action")
        right_trim = end - 2 >= inner and text[end - 1] == "-" and text[end - 2] in _SPACE
        raw = text[inner : end - 1 if right_trim else end]
        body = raw.strip(_SPACE)
        offset = inner + (len(raw) - len(raw.lstrip(_SPACE)))
        yield literal, _Action(body, offset)
        pos = end + 2
        if right_trim:
            while pos < len(text) and text[pos] in _SPACE:
                pos += 1
    yield text[pos:], None


def _evaluate(text: str, action: _Action, data: TemplateData, name: str) -> str:
    if not action.body:
        raise _parse_error(text, action.offset, name, "missing value for command")
    if not _FIELD_CHAIN.fullmatch(action.body):
        raise _parse_error(
            text,
            action.offset,
            name,
            f"unsupported action {go_quote('{{ ' + action.body + ' }}')}: only "
            ".Model.Path, .Service.Name and .Service.Namespace can be used",
        )
    value: str | TemplateData = data
    for key in action.body[1:].split("."):
        if isinstance(value, str):
            raise _exec_error(text, action, name, f"can't evaluate field {key} in type string")
        if key not in value:
            raise _exec_error(text, action, name, f"map has no entry for key {go_quote(key)}")
        value = value[key]
    if not isinstance(value, str):
        fields = " or ".join(f"{action.body}.{key}" for key in sorted(value))
        raise _exec_error(text, action, name, f"{action.body} is not a value; use {fields}")
    return value


def _position(text: str, offset: int) -> tuple[int, int]:
    """The position an error message gives: 1-based line, 0-based column within that line."""
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start


def _parse_error(text: str, offset: int, name: str, message: str) -> NoctayaError:
    line, _ = _position(text, offset)
    return NoctayaError(REASON, f"template: {name}:{line}: {message}")


def _exec_error(text: str, action: _Action, name: str, message: str) -> NoctayaError:
    line, column = _position(text, action.offset)
    return NoctayaError(
        REASON,
        f"template: {name}:{line}:{column}: executing {go_quote(name)} "
        f"at <{action.body}>: {message}",
    )
