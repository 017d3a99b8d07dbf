"""Atomic promotion: a model appears in the cache complete, with its marker, or not at all.

Every fetcher writes into `<destination>.partial`, verifies it, renames it into place with one
`os.replace`, checks that what now sits at the destination is the tree it verified, and writes
the marker last, recording what it verified; backends wait for the marker, so a crash at any
point leaves either no marker or a complete tree with its marker. Only the destination's owner
(`noctaya.fetch.ownership`) promotes.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any, BinaryIO

from noctaya.fetch.errors import TransientFetchError
from noctaya.fetch.marker import listing, marker_of, new_record, sync_directory, write_marker


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


def promote(
    tree: Path,
    destination: Path,
    *,
    source: str,
    identity: Mapping[str, str],
    verified: Mapping[str, Any],
) -> None:
    """Make the verified `tree` the destination and mark it; `tree` must be on the same
    filesystem.

    A destination left from an unfinished or untrusted earlier attempt is swapped aside first,
    because a rename cannot replace a non-empty directory. The marker is written only if the
    directory now at the destination is the one verified (the same inode: a rename keeps it)
    with the same files and sizes.
    """
    files = listing(tree)
    verified_tree = os.stat(tree)
    _sync_tree(tree)
    destination.parent.mkdir(parents=True, exist_ok=True)
    stale = destination.with_name(destination.name + ".stale")
    remove(stale)
    if destination.is_symlink() or destination.exists():
        os.replace(destination, stale)
    os.replace(tree, destination)
    remove(stale)
    sync_directory(destination.parent)
    placed = os.stat(destination)
    if (placed.st_dev, placed.st_ino) != (verified_tree.st_dev, verified_tree.st_ino) or (
        listing(destination) != files
    ):
        raise TransientFetchError(
            source, f"{destination} changed while it was promoted; it is left unmarked"
        )
    write_marker(marker_of(destination), new_record(source, identity, verified, files))


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
        sync_directory(Path(root))
