"""Manifest files' YAML documents, read with bounds a hostile file cannot get past.

The one reader of manifest YAML (local mode, `noctaya validate` and `noctaya render`): a manifest
is a page of settings, so what a page never needs is refused before it can cost anything: files
over 1 MiB, anchors and aliases (an alias "billion laughs" expands a kilobyte into gigabytes
downstream), and nesting deeper than 64 levels (recursive consumers would run out of stack).
Scalars YAML accepts but Python cannot build (a 5,000-digit integer, the 13th month) become
errors with their line and column like any other YAML error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, BinaryIO

import yaml

MAX_BYTES = 1 << 20
MAX_DEPTH = 64
_Base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ManifestYAMLError(ValueError):
    """A manifest file that cannot be read as manifests: `where` (the file, or one of its
    documents) and the problem, with its line and column when YAML knows them."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem


class _Loader(_Base):  # type: ignore[misc,valid-type]
    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as error:
            raise yaml.constructor.ConstructorError(
                None, None, str(error), node.start_mark
            ) from None


def read_documents(file: BinaryIO, *, source: str) -> list[Mapping[str, Any]]:
    """The documents of an open file, read no further than one byte past the limit."""
    return parse_documents(file.read(MAX_BYTES + 1), source=source)


def parse_documents(data: bytes | str, *, source: str) -> list[Mapping[str, Any]]:
    """The non-empty documents of `data` (UTF-8), each a mapping; `source` names it in errors."""
    if len(data) > MAX_BYTES:
        raise ManifestYAMLError(
            source, f"larger than {MAX_BYTES} bytes (1 MiB), the most a manifest file may hold"
        )
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as error:
        raise ManifestYAMLError(source, f"not UTF-8: {error}") from None
    try:
        _check_structure(text, source)
        loaded = [doc for doc in yaml.load_all(text, Loader=_Loader) if doc is not None]
    except yaml.YAMLError as error:
        raise ManifestYAMLError(source, f"invalid YAML: {_yaml_problem(error)}") from None
    for index, document in enumerate(loaded, start=1):
        if not isinstance(document, Mapping):
            raise ManifestYAMLError(
                f"{source} (document {index})",
                f"expected a mapping, got {type(document).__name__}",
            )
    return loaded


def _check_structure(text: str, source: str) -> None:
    """Refuse anchors, aliases and deep nesting from the event stream, before anything is built."""
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            sign = "*" if isinstance(event, yaml.AliasEvent) else "&"
            raise ManifestYAMLError(
                source,
                f"invalid YAML: {sign}{anchor} {_at(event.start_mark)}: "
                "anchors and aliases are not supported in manifests",
            )
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise ManifestYAMLError(
                    source,
                    f"invalid YAML: nested deeper than {MAX_DEPTH} levels {_at(event.start_mark)}",
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _yaml_problem(error: yaml.YAMLError) -> str:
    problem = getattr(error, "problem", None) or str(error)
    return f"{problem} {_at(getattr(error, 'problem_mark', None))}".rstrip()


def _at(mark: Any) -> str:
    """`(line 3, column 1)` from a pure-Python or libyaml mark (or none)."""
    if mark is None:
        return ""
    return f"(line {mark.line + 1}, column {mark.column + 1})"
