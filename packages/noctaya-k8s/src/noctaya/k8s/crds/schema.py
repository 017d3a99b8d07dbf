"""pydantic JSON Schema → Kubernetes structural OpenAPI v3 schema.

The API server accepts only structural schemas: every node typed, no `$ref`, `anyOf` only in the
int-or-string shape, and no `additionalProperties` beside `properties`. pydantic's output is
close; this module closes the gap (inlines `$defs`, drops titles and `null` branches, lets
`properties` stand alone) without adding anything the models do not say.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

Schema = dict[str, Any]

_DROPPED_KEYS = {"title", "$defs"}
# The OpenAPI v3 keywords a CRD schema may use (besides the x-kubernetes-* extensions); anything
# else pydantic emits would be silently ignored or rejected by the API server.
_OPENAPI_KEYWORDS = {
    "type",
    "format",
    "description",
    "properties",
    "required",
    "items",
    "additionalProperties",
    "enum",
    "default",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "anyOf",
    "nullable",
    "example",
}


def openapi_schema(model: type[BaseModel]) -> Schema:
    """The structural schema of one model, as the API server expects it."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    definitions = raw.get("$defs", {})
    return _convert(raw, definitions)


def _convert(node: Schema, definitions: dict[str, Schema]) -> Schema:
    node = _inline(node, definitions)
    node = _drop_null_branch(node, definitions)
    result: Schema = {}
    for key, value in node.items():
        if key in _DROPPED_KEYS or (key == "default" and value is None):
            continue
        if key == "description":
            result[key] = " ".join(value.split())
        elif key == "properties":
            result[key] = {name: _convert(child, definitions) for name, child in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            result[key] = _convert(value, definitions)
        elif key == "anyOf":
            result[key] = [_convert(branch, definitions) for branch in value]
        else:
            result[key] = value
    if "properties" in result:
        # `extra="forbid"`/`"allow"` become additionalProperties false/true: the API server prunes
        # unknown fields instead, or keeps them where x-kubernetes-preserve-unknown-fields says so.
        result.pop("additionalProperties", None)
    return result


def _inline(node: Schema, definitions: dict[str, Schema]) -> Schema:
    """Replace a `$ref` by its definition; the referring node's keys (default, description) win."""
    while "$ref" in node:
        target = definitions[node["$ref"].rsplit("/", 1)[-1]]
        siblings = {key: value for key, value in node.items() if key != "$ref"}
        node = {**target, **siblings}
    return node


def _drop_null_branch(node: Schema, definitions: dict[str, Schema]) -> Schema:
    """`X | None` is how pydantic spells an optional field; on the wire that is just an absent X."""
    branches = node.get("anyOf")
    if branches is None:
        return node
    kept = [branch for branch in branches if branch.get("type") != "null"]
    if len(kept) == len(branches):
        return node
    siblings = {key: value for key, value in node.items() if key != "anyOf"}
    if len(kept) == 1:
        return {**_inline(kept[0], definitions), **siblings}
    return {**siblings, "anyOf": kept}


def structural_problems(schema: Schema, path: str = "") -> list[str]:
    """Why a schema is not structural (empty when it is); the generator refuses such output."""
    problems: list[str] = []
    where = path or "<root>"
    unknown = sorted(
        key
        for key in schema
        if key not in _OPENAPI_KEYWORDS and not key.startswith("x-kubernetes-")
    )
    if unknown:
        problems.append(f"{where}: not OpenAPI v3 schema keywords: {', '.join(unknown)}")
    int_or_string = schema.get("x-kubernetes-int-or-string") is True
    preserved = schema.get("x-kubernetes-preserve-unknown-fields") is True
    if "type" not in schema and not (int_or_string or preserved):
        problems.append(f"{where}: every node needs a type")
    if "anyOf" in schema and not int_or_string:
        problems.append(f"{where}: anyOf is only allowed for int-or-string")
    if "properties" in schema and "additionalProperties" in schema:
        problems.append(f"{where}: properties and additionalProperties are exclusive")
    if schema.get("type") == "array" and "items" not in schema:
        problems.append(f"{where}: arrays need items")
    for name, child in schema.get("properties", {}).items():
        problems += structural_problems(child, f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            problems += structural_problems(schema[key], f"{path}.{key}")
    return problems
