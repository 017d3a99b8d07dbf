"""Manifest → model with errors a user can act on: `spec.scaling.max: min must not exceed max`.

pydantic's own report is precise but speaks Python; this module turns each of its errors into one
line that names the wire path (camelCase, `[i]` for list items) and the rule, and raises them
together as one `InvalidResource`: whatever the document holds, the caller never sees a traceback.

Two entry points per kind: `parse_*` for what users write (unknown fields are errors) and
`read_*` for objects read back from the API server (unknown fields, from a newer CRD, ignored).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from noctaya.core.api.base import GROUP_VERSION, READ_BACK
from noctaya.core.api.inferenceruntime import InferenceRuntime
from noctaya.core.api.json_shape import field_path, quote, shape_problems
from noctaya.core.api.llmservice import LLMService, LLMServiceStatus
from noctaya.core.api.rules import RULE_ERROR_TYPE
from noctaya.core.errors import NoctayaError
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

_Resource = TypeVar("_Resource", bound=BaseModel)
_PROBLEMS_SHOWN = 20
_OBJECT_FIELDS = frozenset({"apiVersion", "kind", "metadata", "spec", "status"})
"""A mapping with any of these is a whole object (its spec may be missing), never a bare spec."""


class InvalidResource(NoctayaError):
    """A manifest that breaks the API contract; `problems` holds one `path: rule` line each."""

    def __init__(self, kind: str, problems: list[str]) -> None:
        shown = "; ".join(problems[:_PROBLEMS_SHOWN])
        if len(problems) > _PROBLEMS_SHOWN:
            shown += f"; and {len(problems) - _PROBLEMS_SHOWN} more"
        super().__init__("InvalidSpec", f"invalid {kind}: {shown}")
        self.kind = kind
        self.problems = problems


def parse_llmservice(manifest: Mapping[str, Any]) -> LLMService:
    """Validate a whole LLMService manifest, or just its spec (a mapping with no object field)."""
    return _parse(LLMService, "LLMService", manifest, context=None)


def parse_inferenceruntime(manifest: Mapping[str, Any]) -> InferenceRuntime:
    """Validate a whole InferenceRuntime manifest, or just its spec (no object field)."""
    return _parse(InferenceRuntime, "InferenceRuntime", manifest, context=None)


def read_llmservice(obj: Mapping[str, Any]) -> LLMService:
    """Decode an LLMService the API server returned, ignoring fields this version does not know."""
    return _parse(LLMService, "LLMService", obj, context=READ_BACK)


def read_inferenceruntime(obj: Mapping[str, Any]) -> InferenceRuntime:
    """Decode an InferenceRuntime the API server returned, ignoring fields unknown here."""
    return _parse(InferenceRuntime, "InferenceRuntime", obj, context=READ_BACK)


def read_llmservice_status(status: Mapping[str, Any]) -> LLMServiceStatus:
    """Decode a live LLMService `.status` (unknown fields ignored); errors name `status.<field>`."""
    if not isinstance(status, Mapping):
        raise InvalidResource("LLMService", [f"status: must be an object, got {quote(status)}"])
    document = {"status": dict(status)}
    problems = shape_problems(document)
    if problems:
        raise InvalidResource("LLMService", problems)
    try:
        return LLMServiceStatus.model_validate(document["status"], context=READ_BACK)
    except ValidationError as error:
        raise InvalidResource(
            "LLMService", [describe(detail, ("status",)) for detail in error.errors()]
        ) from None


def _parse(
    model: type[_Resource], kind: str, manifest: Mapping[str, Any], *, context: str | None
) -> _Resource:
    if not isinstance(manifest, Mapping):
        raise InvalidResource(kind, [f"expected a mapping, got {type(manifest).__name__}"])
    document = dict(manifest) if _OBJECT_FIELDS & manifest.keys() else {"spec": dict(manifest)}
    problems = _header_problems(kind, document) + shape_problems(document)
    if problems:
        raise InvalidResource(kind, problems)
    try:
        return model.model_validate(document, context=context)
    except ValidationError as error:
        raise InvalidResource(kind, [describe(detail) for detail in error.errors()]) from None


def _header_problems(kind: str, document: Mapping[str, Any]) -> list[str]:
    problems = []
    for field, expected in (("apiVersion", GROUP_VERSION), ("kind", kind)):
        value = document.get(field, expected)
        if not (isinstance(value, str) and value == expected):
            problems.append(f'{field}: must be "{expected}", got {quote(value)}')
    return problems


def describe(detail: ErrorDetails, prefix: tuple[str, ...] = ()) -> str:
    """One error as `path: rule`, in Kubernetes-like words where pydantic's are Python-flavoured."""
    path = field_path((*prefix, *detail["loc"])) or "(root)"
    return f"{path}: {_rule_text(detail)}"


_TEMPLATES = {
    "missing": "Required value",
    "extra_forbidden": "unknown field",
    "greater_than_equal": "must be greater than or equal to {ge}",
    "less_than_equal": "must be less than or equal to {le}",
    "string_too_long": "must have at most {max_length} characters",
    "string_too_short": "must have at least {min_length} characters",
    "too_short": "must have at least {min_length} items",
    "string_pattern_mismatch": "must match the pattern {pattern}",
    "enum": "supported values: {expected}",
    "literal_error": "supported values: {expected}",
    "int_type": "must be an integer",
    "bool_type": "must be a boolean",
    "string_type": "must be a string",
    "list_type": "must be a list",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
}
# Errors about a value the user wrote (not a missing or misplaced one) quote that value.
_QUOTES_INPUT = {
    "greater_than_equal",
    "less_than_equal",
    "string_too_long",
    "string_too_short",
    "string_pattern_mismatch",
    "enum",
    "literal_error",
    "value_error",
}


def _rule_text(detail: ErrorDetails) -> str:
    kind = detail["type"]
    ctx = detail.get("ctx", {})
    if kind == RULE_ERROR_TYPE:
        return detail["msg"]
    if kind == "value_error":
        text = str(ctx.get("error", detail["msg"]))
    elif kind in ("string_too_short", "too_short") and ctx.get("min_length") == 1:
        text = "must not be empty"
    elif kind in _TEMPLATES:
        text = _TEMPLATES[kind].format(**ctx).replace("'", '"')
    else:
        text = detail["msg"]
    if kind in _QUOTES_INPUT:
        return f"Invalid value {quote(detail['input'])}: {text}"
    return text
