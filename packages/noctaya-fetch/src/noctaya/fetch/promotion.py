"""Atomic promotion: a model appears in the cache complete, with its marker, or not at all.

Every fetcher writes into `<destination>.partial`, verifies it, renames it into place with one
`os.replace`, checks that what now sits at the destination is the tree it verified, and writes
the marker last, recording what it verified; backends wait for the marker, so a crash at any
point leaves either no marker or a complete tree with its marker. Only the destination's owner
(`noctaya.fetch.ownership`) promotes.

Whoever can write the cache can plant a link, a hard link or a FIFO at any of these names, or
swap one while a fetcher works. A link is never entered to write or remove: one found where the
fetcher keeps its own scratch (the `.partial` and what is in it, the `.stale`) is unlinked, and
the promotion's renames, checks and marker go through descriptors of the directories involved,
so a name swapped at any instant cannot take them out of the cache.
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import stat
import sys
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any, BinaryIO

from noctaya.core.model_source import READY_MARKER
from noctaya.fetch.errors import TransientFetchError
from noctaya.fetch.marker import listing, new_record, write_record

log = logging.getLogger("noctaya.fetch")
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NAMES_SHOWN = 5


def partial_of(destination: Path) -> Path:
    return destination.with_name(destination.name + ".partial")


def remove(path: Path | str, *, dir_fd: int | None = None) -> None:
    """Remove a file, link or directory tree, if present (relative to `dir_fd` if given); a
    link is unlinked, never followed, and a tree is removed without entering the links in it."""
    try:
        status = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(status.st_mode):
        shutil.rmtree(path, dir_fd=dir_fd)
    else:
        os.unlink(path, dir_fd=dir_fd)


def fresh_directory(path: Path) -> Path:
    remove(path)
    path.mkdir(parents=True)
    return path


def prepare_partial(partial: Path) -> None:
    """Make `partial` a directory that holds only what its owner may resume.

    Only the destination's owner writes there, so what it finds was left by an earlier owner
    or planted. Anything at `partial` that is not a directory is unlinked, and so is every
    entry inside that is neither a directory nor a regular file with one name: the clients
    create and write files by name in there (the hub client its refs, lock files and blobs,
    the blob writer its `.part` files), through a link or into another name of the same file
    wherever it leads, and hash what they find (a FIFO would block them). Unlinking is safe
    here, where replacing the lock is not, since nobody else uses these names while the owner
    holds the lock. The Hugging Face client's snapshot links go too; it makes them again from
    the blobs it finds, without downloading them.
    """
    try:
        status: os.stat_result | None = os.lstat(partial)
    except FileNotFoundError:
        status = None
    if status is not None and not stat.S_ISDIR(status.st_mode):
        log.warning("%s is not a directory; removed (a link is not followed)", partial)
        os.unlink(partial)
        status = None
    if status is None:
        os.mkdir(partial, 0o755)
        return
    dropped: list[str] = []
    for root, directories, files, root_descriptor in os.fwalk(partial):
        kept = []
        for name in [*directories, *files]:
            entry = os.stat(name, dir_fd=root_descriptor, follow_symlinks=False)
            if stat.S_ISDIR(entry.st_mode):
                kept.append(name)
            elif not stat.S_ISREG(entry.st_mode) or entry.st_nlink != 1:
                os.unlink(name, dir_fd=root_descriptor)
                dropped.append(os.path.relpath(os.path.join(root, name), partial))
        directories[:] = [name for name in directories if name in kept]
    if dropped:
        log.info(
            "%s: dropped %d entries that are neither directories nor regular files with one "
            "name (links, hard links, FIFOs), which a client would write through: %s",
            partial,
            len(dropped),
            ", ".join(sorted(dropped)[:_NAMES_SHOWN])
            + (", …" if len(dropped) > _NAMES_SHOWN else ""),
        )


def promote(
    tree: Path,
    destination: Path,
    *,
    source: str,
    identity: Mapping[str, str],
    verified: Mapping[str, Any],
) -> None:
    """Make the verified `tree`, a directory below the destination's parent (in its
    `.partial`), the destination and mark it.

    A destination left from an unfinished or untrusted earlier attempt (or a link planted
    there) is swapped aside first, because a rename cannot replace a non-empty directory. The
    marker is written into the directory the rename placed, opened without following a link,
    only if it is the one flushed (the same inode: a rename keeps it) with the same files and
    sizes; if the destination no longer names it afterwards, the promotion fails too. Every
    name is looked up from the destination's parent through directories only, so a `.partial`
    swapped for a link cannot have a directory from elsewhere moved in and marked.
    """
    changed = TransientFetchError(
        source, f"{destination} changed while it was promoted; it is left unmarked"
    )
    parent = os.open(destination.parent, _DIRECTORY)
    try:
        try:
            holder, name = _open_parent(parent, tree.relative_to(destination.parent))
        except OSError:
            raise changed from None
        try:
            flushed = _open_directory(name, holder, changed)
            try:
                files = listing(flushed)
                _sync_tree(flushed)
                verified_tree = os.fstat(flushed)
            finally:
                os.close(flushed)
            _swap_in(holder, name, parent, destination.name)
        finally:
            os.close(holder)
        placed = _open_directory(destination.name, parent, changed)
        try:
            if not _same(os.fstat(placed), verified_tree) or listing(placed) != files:
                raise changed
            write_record(placed, READY_MARKER, new_record(source, identity, verified, files))
        finally:
            os.close(placed)
        if not _same(
            os.stat(destination.name, dir_fd=parent, follow_symlinks=False), verified_tree
        ):
            raise changed
    finally:
        os.close(parent)


def _open_parent(directory: int, relative: Path) -> tuple[int, str]:
    """A descriptor of the directory holding `relative` below `directory`, reached through
    directories only, and the name `relative` has in it."""
    current = os.dup(directory)
    for part in relative.parts[:-1]:
        try:
            child = os.open(part, _DIRECTORY, dir_fd=current)
        finally:
            os.close(current)
        current = child
    return current, relative.name


def _open_directory(name: str, directory: int, changed: TransientFetchError) -> int:
    try:
        return os.open(name, _DIRECTORY, dir_fd=directory)
    except OSError:
        raise changed from None


def _swap_in(holder: int, name: str, parent: int, destination: str) -> None:
    """Rename `name` (in `holder`) to `destination` (in `parent`), moving aside and removing
    whatever was there; a link there is moved and unlinked, never entered."""
    stale = destination + ".stale"
    remove(stale, dir_fd=parent)
    if _exists(destination, parent):
        os.replace(destination, stale, src_dir_fd=parent, dst_dir_fd=parent)
    os.replace(name, destination, src_dir_fd=holder, dst_dir_fd=parent)
    remove(stale, dir_fd=parent)
    os.fsync(parent)


def _exists(name: str, directory: int) -> bool:
    try:
        os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _same(one: os.stat_result, other: os.stat_result) -> bool:
    return (one.st_dev, one.st_ino) == (other.st_dev, other.st_ino)


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


def _sync_tree(tree: int) -> None:
    """Flush the bytes of the directory open as `tree` before the rename, so a node crash
    cannot promote unwritten data; only regular files are opened (a FIFO would block)."""
    for _, _, names, directory in os.fwalk(".", dir_fd=tree):
        for name in names:
            if not stat.S_ISREG(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode):
                continue
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            descriptor = os.open(name, flags, dir_fd=directory)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
        os.fsync(directory)
