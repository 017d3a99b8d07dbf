"""The readiness marker: written last, by the process that verified the tree it marks, recording
what that process verified.

The marker holds one JSON object: the source, the request identity it answers (the OCI manifest
digest, or the hub repository and revision), the digests that were checked, and every regular
file of the tree with its size. A fetcher trusts a marked tree only when the identity matches
its request and every recorded file is still there with its size; a marker without a record
(an earlier version's, or the reference implementation's empty file) is not trusted, and the
model is fetched again. A backend's wait needs only the file to exist.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from noctaya.core.model_source import READY_MARKER

_SCHEMA = 1


def marker_of(destination: Path) -> Path:
    return destination / READY_MARKER


def read_record(marker: Path) -> dict[str, Any] | None:
    """The marker's record; None when there is no marker or it records nothing readable."""
    try:
        with marker.open("rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            record = json.loads(handle.read())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("schema") != _SCHEMA:
        return None
    return record


def trusted(destination: Path, identity: Mapping[str, str]) -> bool:
    """Whether `destination` is a marked tree that answers `identity` and is still whole."""
    record = read_record(marker_of(destination))
    if record is None or record.get("identity") != dict(identity):
        return False
    files = record.get("files")
    if not isinstance(files, dict):
        return False
    for name, size in files.items():
        try:
            status = os.lstat(destination / name)
        except OSError:
            return False
        if not stat.S_ISREG(status.st_mode) or status.st_size != size:
            return False
    return True


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


def listing(tree: Path) -> dict[str, int]:
    """Every regular file under `tree` (links not followed, the marker left out) by its path
    relative to `tree`, with its size."""
    files: dict[str, int] = {}
    for root, _, names in os.walk(tree):
        for name in names:
            path = os.path.join(root, name)
            status = os.lstat(path)
            relative = os.path.relpath(path, tree)
            if stat.S_ISREG(status.st_mode) and relative != READY_MARKER:
                files[relative] = status.st_size
    return dict(sorted(files.items()))


def write_marker(marker: Path, record: Mapping[str, Any]) -> None:
    """Write the marker whole or not at all: a temporary file, flushed, renamed into place,
    with its directory entry flushed too."""
    marker.parent.mkdir(parents=True, exist_ok=True)
    temporary = marker.with_name(f"{marker.name}.{os.getpid()}.tmp")
    with temporary.open("wb") as handle:
        handle.write(json.dumps(record, sort_keys=True).encode() + b"\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, marker)
    sync_directory(marker.parent)


def sync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
