"""Which LLMService and InferenceRuntime a local-mode file declares, validated by the core.

A local file is what `kubectl apply -f` would take: a multi-document YAML with one LLMService and
the InferenceRuntime(s) it may run on (`noctaya.gateway.local.runtimes`).

Whatever a document holds, the outcome is a manifest or a LocalConfigError naming the document
and field: the core's validation error is expected, and anything else it raises on hostile
input is reported the same way instead of ending local mode in a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from noctaya.core.api import (
    InferenceRuntime,
    InvalidResource,
    LLMService,
    parse_inferenceruntime,
    parse_llmservice,
)
from noctaya.core.api.names import shown
from noctaya.core.api.yaml_documents import ManifestYAMLError, read_documents
from noctaya.core.values.go_text import go_list
from noctaya.gateway.local.errors import LocalConfigError
from noctaya.gateway.local.runtimes import FileRuntimes

LLMSERVICE, INFERENCERUNTIME = "LLMService", "InferenceRuntime"
DEFAULT_NAMESPACE = "default"
_Resource = TypeVar("_Resource", LLMService, InferenceRuntime)


@dataclass(frozen=True, slots=True)
class LocalManifest:
    service: LLMService
    runtimes: FileRuntimes
    source: str
    """The file, named in messages."""


def load_manifest(path: Path) -> LocalManifest:
    """Read `path` and validate every document through the API models."""
    try:
        with path.open("rb") as file:
            documents = read_documents(file, source=str(path))
    except OSError as error:
        raise LocalConfigError(f"read {path}: {error}") from None
    except ManifestYAMLError as error:
        raise LocalConfigError(str(error)) from None
    return _manifest(documents, str(path))


def _manifest(documents: Sequence[Mapping[str, Any]], source: str) -> LocalManifest:
    services: list[LLMService] = []
    runtimes: list[InferenceRuntime] = []
    for index, document in enumerate(documents, start=1):
        item = validate_document(document, f"{source}: document {index}")
        if isinstance(item, LLMService):
            services.append(item)
        else:
            runtimes.append(item)
    service = _single_service(services, source)
    service.metadata.namespace = service.metadata.namespace or DEFAULT_NAMESPACE  # as kubectl does
    return LocalManifest(service, FileRuntimes(runtimes, source), source)


def validate_document(document: Mapping[str, Any], where: str) -> LLMService | InferenceRuntime:
    """One document as the API model its `kind` names (which checks names as the cluster does);
    `where` (file and document) starts every error message."""
    kind = document.get("kind")
    if kind == LLMSERVICE:
        service = _parse(parse_llmservice, LLMSERVICE, document, where)
        _require_name(service, LLMSERVICE, where)
        return service
    if kind == INFERENCERUNTIME:
        runtime = _parse(parse_inferenceruntime, INFERENCERUNTIME, document, where)
        _require_name(runtime, INFERENCERUNTIME, where)
        return runtime
    if kind is None:
        raise LocalConfigError(
            f"{where}: kind: Required value ({LLMSERVICE} or {INFERENCERUNTIME})"
        )
    raise LocalConfigError(
        f"{where}: kind: Unsupported value {shown(str(kind))}: "
        f"local mode reads only {LLMSERVICE} and {INFERENCERUNTIME}"
    )


def _parse(
    parse: Callable[[Mapping[str, Any]], _Resource],
    kind: str,
    document: Mapping[str, Any],
    where: str,
) -> _Resource:
    try:
        return parse(document)
    except InvalidResource as error:
        raise LocalConfigError(f"{where}: {error.message}") from None
    except Exception as error:  # hostile input must never end in a traceback
        raise LocalConfigError(
            f"{where}: invalid {kind}: {error or type(error).__name__}"
        ) from None


def _require_name(item: LLMService | InferenceRuntime, kind: str, where: str) -> None:
    if not item.metadata.name:
        raise LocalConfigError(f"{where}: {kind} metadata.name: Required value")


def _single_service(services: Sequence[LLMService], source: str) -> LLMService:
    if len(services) == 1:
        return services[0]
    if not services:
        raise LocalConfigError(f"{source}: no {LLMSERVICE} found; local mode serves exactly one")
    names = go_list([service.metadata.name or "" for service in services])
    raise LocalConfigError(
        f"{source}: {len(services)} {LLMSERVICE}s {names}; local mode serves exactly one per file"
    )
