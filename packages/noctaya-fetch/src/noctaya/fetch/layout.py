"""Where each source's model lives inside a cache directory, mirroring the serving pods' `/cache`,
and what its readiness marker must say for a fetcher to trust it.

OCI artifacts go where the backend's `.Model.Path` points (`oci/sha256-<digest>`). Hub models go
where the hub library the engine runs would look, under the cache env the pods get (`HF_HOME`,
`MODELSCOPE_CACHE`), so a prefilled cache is found without the engine downloading again.

Nothing here imports a hub or registry client: a fetcher that finds the model complete, or
waits for another to finish it, never pays for those imports.

Whoever can write the cache can plant anything under it, so nothing read from it decides a
path that leaves it: the directories down to a destination are made without following a link,
and a Hugging Face ref is a commit of the repo folder or nothing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from noctaya.core.cache_planning import CACHE_ENV, CACHE_MOUNT_PATH
from noctaya.core.errors import NoctayaError
from noctaya.core.files import read_regular
from noctaya.core.model_source import ResolvedModel, SourceKind, resolve_model
from noctaya.fetch.errors import PermanentFetchError

HF_REVISION = "main"
MODELSCOPE_REVISION = "master"
_CACHE_HOMES = {
    env.name: PurePosixPath(env.value).relative_to(CACHE_MOUNT_PATH) for env in CACHE_ENV
}
_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+")
_COMMIT = re.compile(r"[0-9a-f]{40}")
"""What the hub client writes into `refs/<revision>` and names a snapshot by."""
_REF_MAX = 64
"""A ref is a commit and a line break; more is not read."""


@dataclass(frozen=True, slots=True)
class Target:
    """One model URI's place in one cache."""

    uri: str
    """As given: every message names it."""
    model: ResolvedModel
    cache: Path
    destination: Path
    identity: dict[str, str] = field(hash=False)
    """What a marker must record to stand for this request: the source kind with the OCI
    manifest digest, or the hub repository and revision."""

    def result(self) -> Path | None:
        """The directory an engine loads: a Hugging Face repo's snapshot, else the destination.

        None when `refs/main` names no snapshot directory of the repo folder: the model is then
        fetched again, since a ref holding a path (`../../../../etc`) would send the engine out
        of the cache.
        """
        if self.model.kind is not SourceKind.HF:
            return self.destination
        commit = read_commit(self.destination)
        if commit is None:
            return None
        snapshots = self.destination / "snapshots"
        snapshot = snapshots / commit
        return snapshot if is_directory(snapshots) and is_directory(snapshot) else None

    def make_parent(self) -> None:
        """Create the directories from the cache down to the destination's parent.

        They hold every other model too (`hf/hub`, `oci`), so one that is a link or no
        directory is refused, not replaced: it is not this fetcher's to remove, a link would
        take every write below it out of the cache, and no retry helps until someone replaces
        it. Each is opened relative to the one above it, never following a link; the cache
        directory itself is the Job's mount, taken as given.
        """
        self.cache.mkdir(parents=True, exist_ok=True)
        flags = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
        descriptor = os.open(self.cache, flags)
        current = self.cache
        try:
            for part in self.destination.parent.relative_to(self.cache).parts:
                current = current / part
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=descriptor)
                try:
                    child = os.open(part, flags | os.O_NOFOLLOW, dir_fd=descriptor)
                except OSError as error:
                    if error.errno not in (errno.ENOTDIR, errno.ELOOP):
                        raise
                    raise PermanentFetchError(self.uri, _not_a_directory(current)) from None
                os.close(descriptor)
                descriptor = child
        finally:
            os.close(descriptor)


def read_commit(repo_folder: Path) -> str | None:
    """The commit the repo folder's `refs/main` names; None unless it holds one (read with a
    bound, and only if it is a regular file, never through a link)."""
    try:
        content = read_regular(repo_folder / "refs" / HF_REVISION, _REF_MAX, follow_symlinks=False)
    except OSError:
        return None
    commit = content.decode("ascii", "replace").strip()
    return commit if _COMMIT.fullmatch(commit) else None


def is_directory(path: Path) -> bool:
    """Whether `path` is a directory itself, not a link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _not_a_directory(path: Path) -> str:
    what = "a symbolic link" if os.path.islink(path) else "not a directory"
    return (
        f"{path} is {what}; the fetcher neither writes through a link in the cache nor removes "
        "what may hold other models: replace it with a directory"
    )


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
        return Target(uri, model, cache, destination, identity)
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
    return Target(uri, model, cache, destination, identity)


def _huggingface_destination(model: ResolvedModel, cache: Path) -> Path:
    """The hub cache's repo folder, `<HF_HOME>/hub/models--<owner>--<name>`."""
    return cache / _CACHE_HOMES["HF_HOME"] / "hub" / ("models--" + model.path.replace("/", "--"))


def _modelscope_destination(model: ResolvedModel, cache: Path) -> Path:
    """`<MODELSCOPE_CACHE>/models/<owner>/<name>`, a layout the ModelScope client reuses
    (dots in the name spelled `___`, as it does)."""
    owner, _, name = model.path.partition("/")
    home = cache / _CACHE_HOMES["MODELSCOPE_CACHE"] / "models"
    return home / owner / name.replace(".", "___")
