"""Which LLMServices and InferenceRuntimes a local-mode file declares, validated by the core.

A local file is what `kubectl apply -f` would take: a multi-document YAML with services and
runtimes in any mix. Local mode serves the files it is given together
(`noctaya.local.sources`), so a runtime may sit in one file and its services in others.

Whatever a document holds, the outcome is a manifest or a LocalConfigError naming the document
and field: the core's validation error is expected, and anything else it raises on hostile
input is reported the same way instead of ending local mode in a traceback.

A served path is one others can write, so a file is read once, bounded, and only if it is a
regular file (`noctaya.core.files`): a FIFO would block the read, `/dev/zero` or a huge sparse
file would never end, and both are refused as files local mode cannot serve. The bytes read are
the ones parsed, so what is judged is what was read.
"""

from __future__ import annotations

import errno
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
from noctaya.core.api.yaml_documents import MAX_BYTES, ManifestYAMLError, parse_documents
from noctaya.core.files import read_regular
from noctaya.local.errors import LocalConfigError

LLMSERVICE, INFERENCERUNTIME = "LLMService", "InferenceRuntime"
DEFAULT_NAMESPACE = "default"
_Resource = TypeVar("_Resource", LLMService, InferenceRuntime)


@dataclass(frozen=True, slots=True)
class ManifestFile:
    source: str
    """The file, named in messages."""
    services: tuple[LLMService, ...]
    runtimes: tuple[InferenceRuntime, ...]


def read_manifest(path: Path) -> ManifestFile:
    """Read `path` and validate every document through the API models (blocks on the
    filesystem: not on an event loop)."""
    return parse_manifest(read_manifest_bytes(path), str(path))


def read_manifest_bytes(path: Path) -> bytes:
    """The content of `path`, if it is a regular file (through symlinks) of at most MAX_BYTES;
    else a LocalConfigError naming it. Blocks on the filesystem: not on an event loop."""
    try:
        return read_regular(path, MAX_BYTES)
    except OSError as error:
        if error.errno == errno.EFBIG:
            raise LocalConfigError(
                f"{path}: {error.strerror} ({MAX_BYTES >> 20} MiB), the most a manifest file "
                "may hold"
            ) from None
        raise LocalConfigError(f"read {path}: {error.strerror or error}") from None


def parse_manifest(data: bytes, source: str) -> ManifestFile:
    """What `data`, the content of the file `source`, declares, every document validated."""
    try:
        documents = parse_documents(data, source=source)
    except ManifestYAMLError as error:
        raise LocalConfigError(str(error)) from None
    return _manifest(documents, source)


def _manifest(documents: Sequence[Mapping[str, Any]], source: str) -> ManifestFile:
    services: list[LLMService] = []
    runtimes: list[InferenceRuntime] = []
    for index, document in enumerate(documents, start=1):
        item = validate_document(document, f"{source}: document {index}")
        if isinstance(item, LLMService):
            item.metadata.namespace = item.metadata.namespace or DEFAULT_NAMESPACE  # as kubectl
            services.append(item)
        else:
            runtimes.append(item)
    return ManifestFile(source, tuple(services), tuple(runtimes))


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
