"""The files local mode serves, watched: the last good version of each, and what changed since.

Local mode looks every `WATCH_INTERVAL` (a stat of each file, its content read only when the
stat changed, and compared by digest, so a `touch` changes nothing). A changed file is read
and checked with the others (`noctaya.local.admission`) before anything changes; a file
that fails keeps serving its last good version, and is read again when it changes again.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from noctaya.local.errors import LocalConfigError
from noctaya.local.manifest import ManifestFile, read_manifest
from noctaya.local.sources import LocalManifests, combine, manifest_paths

WATCH_INTERVAL = 1.0


@dataclass(frozen=True, slots=True)
class FileChange:
    path: Path
    file: ManifestFile | None
    """The new version; None: the file is gone."""
    error: LocalConfigError | None = None
    """Why the new version cannot be read (then `file` is None too)."""


class ServedFiles:
    def __init__(self, arguments: Sequence[Path]) -> None:
        self._arguments = list(arguments)
        self._good: dict[Path, ManifestFile] = {}
        self._seen: dict[Path, tuple[tuple[int, int, int], bytes]] = {}  # stat, digest

    def read_all(self) -> LocalManifests:
        """Every file, as local mode starts: the first error is raised."""
        for path in manifest_paths(self._arguments):
            self._good[path] = read_manifest(path)
            self._seen[path] = _seen(path) or ((0, 0, 0), b"")
        manifests = combine(self._good.values())
        if not manifests.services:
            shown = " ".join(str(argument) for argument in self._arguments)
            raise LocalConfigError(f"{shown}: no LLMService found; local mode serves them")
        return manifests

    def changes(self) -> list[FileChange]:
        """The files added, changed or removed since last seen (each reported once)."""
        found = manifest_paths(self._arguments)
        changes = []
        for path in sorted(set(found) | set(self._seen)):
            key = _stat_key(path) if path in found else None
            before = self._seen.get(path)
            if before is not None and before[0] == key:
                continue
            now = None if key is None else _seen(path)
            if now is None:
                if before is not None:
                    del self._seen[path]
                    changes.append(FileChange(path, None))
                continue
            self._seen[path] = now
            if before is not None and before[1] == now[1]:
                continue  # touched, not changed
            try:
                changes.append(FileChange(path, read_manifest(path)))
            except LocalConfigError as error:
                changes.append(FileChange(path, None, error))
        return changes

    def with_change(self, change: FileChange) -> LocalManifests:
        """The files as they would be with `change` (raises if they do not go together)."""
        files = dict(self._good)
        if change.file is None:
            files.pop(change.path, None)
        else:
            files[change.path] = change.file
        return combine(files.values())

    def accept(self, change: FileChange) -> None:
        if change.file is None:
            self._good.pop(change.path, None)
        else:
            self._good[change.path] = change.file

    def describe(self) -> str:
        return " ".join(str(argument) for argument in self._arguments)


def _stat_key(path: Path) -> tuple[int, int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size, info.st_ino


def _seen(path: Path) -> tuple[tuple[int, int, int], bytes] | None:
    """The file's stat key and content digest; None if it cannot be read now."""
    key = _stat_key(path)
    try:
        with open(path, "rb") as file:
            digest = hashlib.sha256(file.read()).digest()
    except OSError:
        return None
    return None if key is None else (key, digest)
