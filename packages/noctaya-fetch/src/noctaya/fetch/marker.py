"""The readiness marker: written last, by the process that verified the tree it marks, recording
what that process verified.

The marker holds one JSON object: the source, the request identity it answers (the OCI manifest
digest, or the hub repository and revision), the digests that were checked, and every regular
file of the tree with its size. A fetcher trusts a marked tree only when the identity matches
its request and every recorded file is still there with its size; a marker without a record
(an earlier version's, or the reference implementation's empty file) is not trusted, and the
model is fetched again. A backend's wait needs only the file to exist.

Anyone who can write the cache can plant a marker, so one is read only if it is a regular file
(not a link, a FIFO or a device) of a bounded size, and written only under a fresh name created
in the directory it marks, then renamed over whatever the marker's name held.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from noctaya.core.files import read_regular
from noctaya.core.model_source import READY_MARKER
from noctaya.fetch.layout import is_directory

_SCHEMA = 1
_RECORD_MAX = 16 << 20
"""A record names each file of the tree in about 100 bytes: room for 150,000 files."""


def marker_of(destination: Path) -> Path:
    return destination / READY_MARKER


def read_record(marker: Path) -> dict[str, Any] | None:
    """The marker's record; None when there is no marker or it records nothing readable."""
    try:
        record = json.loads(read_regular(marker, _RECORD_MAX, follow_symlinks=False))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("schema") != _SCHEMA:
        return None
    return record


def trusted(destination: Path, identity: Mapping[str, str]) -> bool:
    """Whether `destination` is a marked tree that answers `identity` and is still whole.

    The destination must be a directory, not a link to one (a marked copy elsewhere is not the
    cache's model), and every recorded file a regular file at its recorded path, reached
    through directories only.
    """
    if not is_directory(destination):
        return False
    record = read_record(marker_of(destination))
    if record is None or record.get("identity") != dict(identity):
        return False
    files = record.get("files")
    if not isinstance(files, dict):
        return False
    present = listing(destination)
    return all(present.get(name) == size for name, size in files.items())


def new_record(
    source: str, identity: Mapping[str, str], verified: Mapping[str, Any], files: Mapping[str, int]
) -> dict[str, Any]:
    return {
        "schema": _SCHEMA,
        "source": source,
        "identity": dict(identity),
        "verified": dict(verified),
        "files": dict(files),
    }


def listing(tree: Path | int) -> dict[str, int]:
    """Every regular file under `tree`, a path or a directory's descriptor, by its path
    relative to `tree`, with its size; the marker is left out, and a link is neither listed
    nor entered (nor is `tree` itself when it is one)."""
    top, directory = (".", tree) if isinstance(tree, int) else (os.fspath(tree), None)
    files: dict[str, int] = {}
    for root, _, names, root_descriptor in os.fwalk(top, dir_fd=directory):
        for name in names:
            status = os.stat(name, dir_fd=root_descriptor, follow_symlinks=False)
            relative = os.path.relpath(os.path.join(root, name), top)
            if stat.S_ISREG(status.st_mode) and relative != READY_MARKER:
                files[relative] = status.st_size
    return dict(sorted(files.items()))


def write_marker(marker: Path, record: Mapping[str, Any]) -> None:
    """Write `record` as the file `marker` (the shared cache's ready marker: its directory is
    the one the Job was given)."""
    marker.parent.mkdir(parents=True, exist_ok=True)
    directory = os.open(marker.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        write_record(directory, marker.name, record)
    finally:
        os.close(directory)


def write_record(directory: int, name: str, record: Mapping[str, Any]) -> None:
    """Write `record` as `name` in the directory open as `directory`, whole or not at all.

    The bytes go to a temporary file created afresh (whatever held its name is unlinked
    first, so nothing is written through a link or into another file's hard link), flushed,
    and renamed over `name`, which replaces a link there instead of following it; the
    directory entry is flushed too.
    """
    temporary = f"{name}.{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary, dir_fd=directory)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    with os.fdopen(os.open(temporary, flags, 0o644, dir_fd=directory), "wb") as handle:
        handle.write(json.dumps(record, sort_keys=True).encode() + b"\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
    os.fsync(directory)
