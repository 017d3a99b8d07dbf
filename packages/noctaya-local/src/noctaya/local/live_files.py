"""The files local mode serves, watched: the last good version of each, and the set they make now.

Local mode looks every `WATCH_INTERVAL`: a stat of each file, its content read only when the
stat changed (once, bounded, and only if it is a regular file: `manifest.read_manifest_bytes`),
and compared by digest, so a `touch` changes nothing. A look blocks on the filesystem, so local
mode runs it on a worker thread, never on its event loop.

What changed in one look is judged as one set: every file as it is now, combined and checked
together (`noctaya.local.admission`), then applied together. Judging changes one file at a time
sees sets that never existed on disk: `mv b.yaml a.yaml` is a change of `a.yaml` (now declaring
b, as `b.yaml` still does: refused) and a removal of `b.yaml` (leaving a's old version). A file
whose new version cannot be read or is invalid keeps its last good version in the set, and is
read again when it changes again. A set that is refused (two files declaring one service, a
port used twice) is judged again, whole, at the next change of any file, so once the files on
disk go together again they are what is served, whatever order the edits came in.

An argument is a folder or a file for as long as local mode runs, as it was at start-up: a FILE
argument replaced by a folder is a file that cannot be read, not a folder of files to serve.
"""

from __future__ import annotations

import errno
import hashlib
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from noctaya.local.errors import LocalConfigError
from noctaya.local.manifest import ManifestFile, parse_manifest, read_manifest_bytes
from noctaya.local.sources import LocalManifests, combine, folder_manifests

WATCH_INTERVAL = 1.0
START_READS = 20
"""How often start-up reads a file that changes while it is read before giving up."""
_SHOWN_FILES = 3

_Key = tuple[int, int, int, int, int] | str
"""A file's device, inode, size, mtime and ctime; or why it cannot be looked at."""


@dataclass(frozen=True, slots=True)
class _Version:
    """A file as last read."""

    key: _Key
    digest: bytes
    """Of its content, or of the reason it could not be read."""
    file: ManifestFile | LocalConfigError


@dataclass(frozen=True)
class Edit:
    """The files after a look that found changes: the set to judge and apply as one."""

    changed: tuple[Path, ...]
    """The files added, changed or removed since the last look."""
    refused: tuple[tuple[Path, LocalConfigError], ...]
    """Changed files whose new version cannot be served; each keeps its last good version."""
    files: Mapping[Path, ManifestFile]
    """Every file's version to serve."""
    differs: bool
    """Whether `files` differs from the set served now."""

    def manifests(self) -> LocalManifests:
        """What the files declare together (LocalConfigError if they do not go together)."""
        return combine(self.files.values())

    def describe(self) -> str:
        """The changed files, for a message."""
        shown = ", ".join(str(path) for path in self.changed[:_SHOWN_FILES])
        more = len(self.changed) - _SHOWN_FILES
        return f"{shown} and {more} other files" if more > 0 else shown


class ServedFiles:
    def __init__(self, arguments: Sequence[Path]) -> None:
        self._arguments = list(arguments)
        self._folders = {argument for argument in self._arguments if argument.is_dir()}
        self._good: dict[Path, ManifestFile] = {}
        self._seen: dict[Path, _Version] = {}

    def read_all(self) -> LocalManifests:
        """Every file, as local mode starts: the first error is raised."""
        for path in self._paths():
            version = _settled(path)
            if isinstance(version.file, LocalConfigError):
                raise version.file
            self._seen[path] = version
            self._good[path] = version.file
        manifests = combine(self._good.values())
        if not manifests.services:
            shown = self.describe()
            raise LocalConfigError(f"{shown}: no LLMService found; local mode serves them")
        return manifests

    def look(self) -> Edit | None:
        """The files as they are now if any was added, changed or removed since the last look
        (each change is reported once); None if none was. Blocks on the filesystem."""
        present = set(self._paths())
        changed: list[Path] = []
        refused: list[tuple[Path, LocalConfigError]] = []
        for path in sorted(present | set(self._seen)):
            before = self._seen.get(path)
            key = _stat_key(path) if path in present else None
            if key is None:
                if self._seen.pop(path, None) is not None:
                    changed.append(path)
                continue
            if before is not None and before.key == key:
                continue
            now = _read(path, key, before)
            if now is None:
                continue  # being written: looked at again next time
            self._seen[path] = now
            if before is not None and before.digest == now.digest:
                continue  # touched, not changed
            changed.append(path)
            if isinstance(now.file, LocalConfigError):
                refused.append((path, now.file))
        if not changed:
            return None
        files = self._to_serve()
        return Edit(tuple(changed), tuple(refused), files, files != self._good)

    def accept(self, edit: Edit) -> None:
        """`edit`'s files are served now."""
        self._good = dict(edit.files)

    def describe(self) -> str:
        return " ".join(str(argument) for argument in self._arguments)

    def _paths(self) -> list[Path]:
        paths: list[Path] = []
        for argument in self._arguments:
            paths += folder_manifests(argument) if argument in self._folders else [argument]
        return list(dict.fromkeys(paths))  # a file named twice is served once

    def _to_serve(self) -> dict[Path, ManifestFile]:
        """Each file's latest version, or its last good one if the latest cannot be served."""
        files: dict[Path, ManifestFile] = {}
        for path, version in self._seen.items():
            if isinstance(version.file, ManifestFile):
                files[path] = version.file
            elif path in self._good:
                files[path] = self._good[path]
        return files


def _settled(path: Path) -> _Version:
    """`path` read whole between two equal stats (a file being written is read again)."""
    for _ in range(START_READS):
        key = _stat_key(path)
        version = _read(path, os.strerror(errno.ENOENT) if key is None else key, None)
        if version is not None:
            return version
        time.sleep(WATCH_INTERVAL / START_READS)
    return _Version("", b"", LocalConfigError(f"read {path}: changes while it is read"))


def _read(path: Path, key: _Key, before: _Version | None) -> _Version | None:
    """The file's version with stat `key`; None if its stat changed while it was read. Parsed
    only when its content changed since `before`."""
    if isinstance(key, str):
        return _refused(key, LocalConfigError(f"read {path}: {key}"))
    try:
        data = read_manifest_bytes(path)
    except LocalConfigError as error:
        return None if _stat_key(path) != key else _refused(key, error)
    if _stat_key(path) != key:
        return None
    digest = hashlib.sha256(data).digest()
    if before is not None and before.digest == digest:
        return _Version(key, digest, before.file)
    try:
        return _Version(key, digest, parse_manifest(data, str(path)))
    except LocalConfigError as error:
        return _Version(key, digest, error)


def _refused(key: _Key, error: LocalConfigError) -> _Version:
    """A version that cannot be served, told from another by its reason."""
    return _Version(key, hashlib.sha256(str(error).encode()).digest(), error)


def _stat_key(path: Path) -> _Key | None:
    """None: the path is gone."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as error:
        return error.strerror or str(error)
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns
