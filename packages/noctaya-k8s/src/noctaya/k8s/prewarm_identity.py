"""What a prewarm Job fills, read back from its spec, whoever rendered it.

A prewarm Job's contract terms are the model source it fetches and the cache it writes (the
`model-cache` volume and whether it writes the shared ready marker). Its image, env and
scheduling are not: an implementation a cluster switches from (or an older Noctaya) runs a
different program to the same end. Two forms are read: `noctaya-fetch <uri> ...`, and the
`python3 -c` hub download (`snapshot_download("<path>")`) or the `pull-oci-model` init
container of the reference implementation.

A Job also filled one claim, not just one claim name: a claim deleted and created again under
the same name is empty, and the Job that filled the old one is stale. The claim's UID is
recorded on the Job when it is created (`FILLED_CLAIM_ANNOTATION`); a Job created before that
record existed, or by another implementation, carries none and is kept as it is.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from noctaya.core.cache_planning import CACHE_VOLUME_NAME, FETCH_COMMAND, SHARED_READY_MARKER
from noctaya.core.model_source import SourceKind
from noctaya.core.values.go_text import go_quote

FILLED_CLAIM_ANNOTATION = "serving.noctaya.io/cache-claim-uid"
OCI_PULL_CONTAINER = "pull-oci-model"
_READY_MARKER_FLAG = "--ready-marker"
_SNAPSHOT_DOWNLOAD = re.compile(r'snapshot_download\(("(?:[^"\\]|\\.)*")\)')
_HUB_IMPORTS = {
    "from huggingface_hub import": SourceKind.HF,
    "from modelscope import": SourceKind.MODELSCOPE,
}


@dataclass(frozen=True)
class PrewarmIdentity:
    source: str
    """The model URI, canonical: `hf://org/name`, `modelscope://org/name`, `oci://repo@sha256:…`."""
    cache: tuple[str, str]
    """The `model-cache` volume: (`persistentVolumeClaim`, claim) or (`hostPath`, path)."""
    ready_marker: str | None
    """The cache-wide marker written after the fetch, if any."""


def prewarm_identity(job_spec: Mapping[str, Any]) -> PrewarmIdentity | None:
    """The Job's contract terms, or None when its source or cache cannot be told."""
    pod = ((job_spec.get("template") or {}).get("spec")) or {}
    cache = _cache_volume(pod.get("volumes") or [])
    found = _fetch_terms(pod.get("containers") or [])
    if found is None:
        found = _reference_terms(pod.get("containers") or [], pod.get("initContainers") or [])
    if cache is None or found is None:
        return None
    source, marker = found
    return PrewarmIdentity(source=source, cache=cache, ready_marker=marker)


def same_prewarm(live_spec: Mapping[str, Any], requested_spec: Mapping[str, Any]) -> bool:
    """Whether a live Job fills the same cache with the same model as the request asks.

    A Job whose terms cannot be read is never the same: a wrong guess would serve one model
    from a cache filled with another.
    """
    live = prewarm_identity(live_spec)
    return live is not None and live == prewarm_identity(requested_spec)


def filling(job: Mapping[str, Any], claim: Mapping[str, Any] | None) -> dict[str, Any]:
    """The rendered Job, recording the UID of the cache claim it is created to fill."""
    if claim is None:
        return dict(job)
    metadata = dict(job["metadata"])
    annotations = {**(metadata.get("annotations") or {}), FILLED_CLAIM_ANNOTATION: _uid(claim)}
    return {**job, "metadata": {**metadata, "annotations": annotations}}


def filled_another_claim(job: Mapping[str, Any], claim: Mapping[str, Any] | None) -> bool:
    """Whether a live Job records a claim other than `claim`, the one its cache now is."""
    recorded = ((job.get("metadata") or {}).get("annotations") or {}).get(FILLED_CLAIM_ANNOTATION)
    return claim is not None and recorded is not None and recorded != _uid(claim)


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _cache_volume(volumes: Iterable[Any]) -> tuple[str, str] | None:
    for volume in volumes:
        if not isinstance(volume, Mapping) or volume.get("name") != CACHE_VOLUME_NAME:
            continue
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if isinstance(claim, str) and claim:
            return ("persistentVolumeClaim", claim)
        path = (volume.get("hostPath") or {}).get("path")
        if isinstance(path, str) and path:
            return ("hostPath", path.rstrip("/") or "/")
    return None


def _argv(container: Any) -> list[str]:
    if not isinstance(container, Mapping):
        return []
    words = [*(container.get("command") or []), *(container.get("args") or [])]
    return [word for word in words if isinstance(word, str)]


def _after(argv: list[str], word: str) -> str | None:
    """The argument following `word`, if both are there."""
    if word in argv[:-1]:
        return argv[argv.index(word) + 1]
    return None


def _fetch_terms(containers: Iterable[Any]) -> tuple[str, str | None] | None:
    """`noctaya-fetch <uri> --cache /cache [--ready-marker M]`."""
    for container in containers:
        argv = _argv(container)
        uri = _after(argv, FETCH_COMMAND)
        if uri is not None:
            return uri, _after(argv, _READY_MARKER_FLAG)
    return None


def _reference_terms(
    containers: Iterable[Any], init_containers: Iterable[Any]
) -> tuple[str, str | None] | None:
    """The reference's OCI pull init container, or its `python3 -c` hub download program."""
    for init in init_containers:
        if isinstance(init, Mapping) and init.get("name") == OCI_PULL_CONTAINER:
            reference = _after(_argv(init), "pull")
            return None if reference is None else (f"oci://{reference}", None)
    for container in containers:
        for word in _argv(container):
            source = _hub_source(word)
            if source is not None:
                marker = SHARED_READY_MARKER if go_quote(SHARED_READY_MARKER) in word else None
                return source, marker
    return None


def _hub_source(program: str) -> str | None:
    """`hf://<path>` or `modelscope://<path>` from `from <hub> import snapshot_download;
    snapshot_download("<path>")`."""
    call = _SNAPSHOT_DOWNLOAD.search(program)
    kinds = [kind for line, kind in _HUB_IMPORTS.items() if line in program]
    if call is None or len(kinds) != 1:
        return None
    try:
        path = ast.literal_eval(call.group(1))
    except (SyntaxError, ValueError):
        return None
    return f"{kinds[0].value}://{path}" if isinstance(path, str) and path else None
