"""Which LLMService and InferenceRuntime a local-mode file declares, validated by the core.

A local file is what `kubectl apply -f` would take: a multi-document YAML with one LLMService and
the InferenceRuntime(s) it may run on. Runtime choice is the operator's (pinned name, or vendor
order then priority), so a file that works locally selects the same runtime on a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from noctaya.core.api import (
    InferenceRuntime,
    InvalidResource,
    LLMService,
    parse_inferenceruntime,
    parse_llmservice,
)
from noctaya.core.errors import NoctayaError
from noctaya.core.runtime_selection import RuntimeCandidate, select_runtime
from noctaya.core.values.go_text import go_list, go_quote

LLMSERVICE, INFERENCERUNTIME = "LLMService", "InferenceRuntime"


class LocalConfigError(ValueError):
    """Input local mode cannot serve; the message names the file, document or field at fault."""


@dataclass(frozen=True, slots=True)
class LocalManifest:
    service: LLMService
    runtime: InferenceRuntime


def load_manifest(path: Path) -> LocalManifest:
    """Read `path`, validate every document through the API models and select the runtime."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise LocalConfigError(f"read {path}: {error}") from None
    return parse_manifest(text, source=str(path))


def parse_manifest(text: str, *, source: str) -> LocalManifest:
    services: list[LLMService] = []
    runtimes: list[InferenceRuntime] = []
    for index, document in enumerate(_documents(text, source), start=1):
        where = f"{source}: document {index}"
        kind = document.get("kind")
        try:
            if kind == LLMSERVICE:
                services.append(parse_llmservice(document))
            elif kind == INFERENCERUNTIME:
                runtimes.append(parse_inferenceruntime(document))
            elif kind is None:
                raise LocalConfigError(
                    f"{where}: kind: Required value ({LLMSERVICE} or {INFERENCERUNTIME})"
                )
            else:
                raise LocalConfigError(
                    f"{where}: kind: Unsupported value {go_quote(str(kind))}: "
                    f"local mode reads only {LLMSERVICE} and {INFERENCERUNTIME}"
                )
        except InvalidResource as error:
            raise LocalConfigError(f"{where}: {error.message}") from None
    service = _single_service(services, source)
    for kind, named in ((LLMSERVICE, services), (INFERENCERUNTIME, runtimes)):
        for item in named:
            if not item.metadata.name:
                raise LocalConfigError(f"{source}: {kind} metadata.name: Required value")
    return LocalManifest(service, _select(service, runtimes, source))


def _documents(text: str, source: str) -> list[Mapping[str, Any]]:
    try:
        loaded = [document for document in yaml.safe_load_all(text) if document is not None]
    except yaml.YAMLError as error:
        raise LocalConfigError(f"{source}: invalid YAML: {_yaml_problem(error)}") from None
    for index, document in enumerate(loaded, start=1):
        if not isinstance(document, Mapping):
            raise LocalConfigError(
                f"{source}: document {index}: expected a mapping, got {type(document).__name__}"
            )
    return loaded


def _yaml_problem(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    if mark is None:
        return str(problem)
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"


def _single_service(services: Sequence[LLMService], source: str) -> LLMService:
    if len(services) == 1:
        return services[0]
    if not services:
        raise LocalConfigError(f"{source}: no {LLMSERVICE} found; local mode serves exactly one")
    names = go_list([service.metadata.name or "" for service in services])
    raise LocalConfigError(
        f"{source}: {len(services)} {LLMSERVICE}s {names}; local mode serves exactly one per file"
    )


def _select(
    service: LLMService, runtimes: Sequence[InferenceRuntime], source: str
) -> InferenceRuntime:
    by_name = {runtime.metadata.name or "": runtime for runtime in runtimes}
    if len(by_name) != len(runtimes):
        raise LocalConfigError(f"{source}: two {INFERENCERUNTIME}s share a metadata.name")
    selection = service.spec.runtime
    if selection.name:
        runtime = by_name.get(selection.name)
        if runtime is None:
            raise LocalConfigError(
                f"{source}: {LLMSERVICE} spec.runtime.name {go_quote(selection.name)}: no "
                f"{INFERENCERUNTIME} of that name in the file (found {go_list(sorted(by_name))})"
            )
        return runtime
    selector = selection.selector
    vendors = [vendor.value for vendor in (selector.vendor or [])] if selector else []
    candidates = [
        RuntimeCandidate(name, runtime.spec.vendor.value, runtime.spec.priority)
        for name, runtime in by_name.items()
    ]
    try:
        return by_name[select_runtime(candidates, vendors).name]
    except NoctayaError as error:
        raise LocalConfigError(f"{source}: {LLMSERVICE} spec.runtime.selector: {error}") from None
