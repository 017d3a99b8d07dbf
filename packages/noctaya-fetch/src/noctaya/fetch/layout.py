"""Where each source's model lives inside a cache directory, mirroring the serving pods' `/cache`,
and what its readiness marker must say for a fetcher to trust it.

OCI artifacts go where the backend's `.Model.Path` points (`oci/sha256-<digest>`). Hub models go
where the hub library the engine runs would look, under the cache env the pods get (`HF_HOME`,
`MODELSCOPE_CACHE`), so a prefilled cache is found without the engine downloading again.

Nothing here imports a hub or registry client: a fetcher that finds the model complete, or
waits for another to finish it, never pays for those imports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from noctaya.core.cache_planning import CACHE_ENV, CACHE_MOUNT_PATH
from noctaya.core.errors import NoctayaError
from noctaya.core.model_source import ResolvedModel, SourceKind, resolve_model
from noctaya.fetch.errors import PermanentFetchError

HF_REVISION = "main"
MODELSCOPE_REVISION = "master"
_CACHE_HOMES = {
    env.name: PurePosixPath(env.value).relative_to(CACHE_MOUNT_PATH) for env in CACHE_ENV
}
_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+")


@dataclass(frozen=True, slots=True)
class Target:
    """One model URI's place in one cache."""

    uri: str
    """As given: every message names it."""
    model: ResolvedModel
    destination: Path
    identity: dict[str, str] = field(hash=False)
    """What a marker must record to stand for this request: the source kind with the OCI
    manifest digest, or the hub repository and revision."""

    def result(self) -> Path:
        """The directory an engine loads: a Hugging Face repo's snapshot, else the destination."""
        if self.model.kind is SourceKind.HF:
            commit = (self.destination / "refs" / HF_REVISION).read_text(encoding="utf-8")
            return self.destination / "snapshots" / commit.strip()
        return self.destination


def locate(uri: str, cache: Path) -> Target:
    """The target of `uri` in `cache`; a URI no fetcher serves is a permanent error."""
    try:
        model = resolve_model(uri)
    except NoctayaError as error:
        raise PermanentFetchError(uri, error.message) from None
    if model.kind is SourceKind.PVC:
        raise PermanentFetchError(
            uri, "pvc:// sources are mounted read-only; there is nothing to fetch"
        )
    if model.kind is SourceKind.OCI:
        digest = str(model.oci_reference).rpartition("@")[2]
        identity = {"kind": model.kind.value, "manifest": digest}
        destination = cache / PurePosixPath(model.path).relative_to(CACHE_MOUNT_PATH)
        return Target(uri, model, destination, identity)
    if not _REPO_ID.fullmatch(model.path) or ".." in model.path:
        raise PermanentFetchError(
            uri, f"invalid repository id {model.path!r}: expected <owner>/<name>"
        )
    if model.kind is SourceKind.HF:
        destination = _huggingface_destination(model, cache)
        revision = HF_REVISION
    else:
        destination = _modelscope_destination(model, cache)
        revision = MODELSCOPE_REVISION
    identity = {"kind": model.kind.value, "repository": model.path, "revision": revision}
    return Target(uri, model, destination, identity)


def _huggingface_destination(model: ResolvedModel, cache: Path) -> Path:
    """The hub cache's repo folder, `<HF_HOME>/hub/models--<owner>--<name>`."""
    return cache / _CACHE_HOMES["HF_HOME"] / "hub" / ("models--" + model.path.replace("/", "--"))


def _modelscope_destination(model: ResolvedModel, cache: Path) -> Path:
    """`<MODELSCOPE_CACHE>/models/<owner>/<name>`, a layout the ModelScope client reuses
    (dots in the name spelled `___`, as it does)."""
    owner, _, name = model.path.partition("/")
    home = cache / _CACHE_HOMES["MODELSCOPE_CACHE"] / "models"
    return home / owner / name.replace(".", "___")
