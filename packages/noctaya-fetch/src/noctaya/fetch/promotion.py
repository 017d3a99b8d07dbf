"""Atomic promotion: a model appears in the cache complete, with its marker, or not at all.

Every fetcher writes into `<destination>.partial`, verifies it, renames it into place with one
`os.replace`, and writes the marker last; backends wait for the marker, so a crash at any
point leaves either no marker or a complete tree with its marker.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import BinaryIO

from noctaya.core.model_source import READY_MARKER


def marker_of(destination: Path) -> Path:
    return destination / READY_MARKER


def is_complete(destination: Path) -> bool:
    """The marker is a regular file, as the backend's wait-for-prewarm check requires."""
    return marker_of(destination).is_file()


def partial_of(destination: Path) -> Path:
    return destination.with_name(destination.name + ".partial")


def remove(path: Path) -> None:
    """Remove a file, link or directory tree, if present; a link is never followed."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def fresh_directory(path: Path) -> Path:
    remove(path)
    path.mkdir(parents=True)
    return path


def promote(tree: Path, destination: Path) -> None:
    """Make `tree` the destination and mark it complete; `tree` must be on the same filesystem.

    A destination left from an unfinished earlier attempt (no marker) is swapped aside first,
    because a rename cannot replace a non-empty directory.
    """
    _sync_tree(tree)
    destination.parent.mkdir(parents=True, exist_ok=True)
    stale = destination.with_name(destination.name + ".stale")
    remove(stale)
    if destination.is_symlink() or destination.exists():
        os.replace(destination, stale)
    os.replace(tree, destination)
    remove(stale)
    _sync_directory(destination.parent)
    write_marker(marker_of(destination))


def write_marker(marker: Path) -> None:
    """Create an empty marker file durably: flushed, with its directory entry flushed too."""
    marker.parent.mkdir(parents=True, exist_ok=True)
    with marker.open("wb") as handle:
        os.fsync(handle.fileno())
    _sync_directory(marker.parent)


WRITEBACK_STEP = 16 << 20
"""Bytes a writer lets pile up before their writeback is started."""


class Writeback:
    """Starts writing a file's bytes back to disk every `WRITEBACK_STEP` as they are written,
    without waiting for them.

    Only a head start for the fsync that must still follow: without it a download leaves every
    byte dirty in memory (below the kernel's background threshold nothing is written) and the
    disk idles until the fsync, which then waits for all of them. Linux's sync_file_range;
    elsewhere, or if it fails, nothing happens.
    """

    def __init__(self, output: BinaryIO, offset: int = 0) -> None:
        self._output = output
        self._submitted = offset

    def written_to(self, end: int) -> None:
        """The file now holds its bytes up to `end`."""
        count = end - self._submitted
        if count < WRITEBACK_STEP:
            return
        self._output.flush()
        submit = _sync_file_range()
        if submit is not None:
            submit(self._output.fileno(), self._submitted, count, _SYNC_FILE_RANGE_WRITE)
        self._submitted = end


_SYNC_FILE_RANGE_WRITE = 2


@cache
def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    function.restype = ctypes.c_int
    submit: Callable[[int, int, int, int], int] = function
    return submit


def _sync_tree(tree: Path) -> None:
    """Flush the bytes before the rename, so a node crash cannot promote unwritten data."""
    for root, _, files in os.walk(tree):
        for name in files:
            path = os.path.join(root, name)
            if os.path.islink(path):
                continue
            descriptor = os.open(path, os.O_RDONLY)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
        _sync_directory(Path(root))


def _sync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
