"""Reading a file that someone else can write: a served manifest, a mounted key, a cache record.

Such a path may be a FIFO (opening it for reading blocks until a writer comes), a device
(`/dev/zero` never ends), a symlink to either, a hard link to a file elsewhere, huge, or
replaced while it is read. `read_regular` refuses each before it costs anything: it looks at
what the path is before opening it, opens without blocking, checks that the open file is the
one it looked at and is a regular file, and reads at most `limit` bytes. Every refusal is an
`UnexpectedFile`, an `OSError`, so a caller that already handles a missing or unreadable file
handles these the same way.

These calls block on the filesystem: an asynchronous caller runs them on a worker thread.
"""

from __future__ import annotations

import errno
import os
import stat

_READ_CHUNK = 1 << 16


class UnexpectedFile(OSError):
    """The path is not the bounded regular file the caller expects."""


def kind_of(mode: int) -> str:
    """What a file of this mode is, in words for a message."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symlink"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def check_regular(
    status: os.stat_result, path: str | os.PathLike[str], *, single_link: bool
) -> None:
    """Raise UnexpectedFile unless `status` is a regular file (with one name, if asked)."""
    if not stat.S_ISREG(status.st_mode):
        raise UnexpectedFile(
            errno.EINVAL, f"{kind_of(status.st_mode)}, not a regular file", os.fspath(path)
        )
    if single_link and status.st_nlink != 1:
        raise UnexpectedFile(
            errno.EMLINK,
            f"has {status.st_nlink} hard links; a file here must have one",
            os.fspath(path),
        )


def open_regular(
    path: str | os.PathLike[str],
    flags: int = os.O_RDONLY,
    *,
    follow_symlinks: bool = True,
    single_link: bool = False,
    mode: int = 0o644,
) -> int:
    """A descriptor for `path` opened with `flags`, only if it is a regular file.

    An existing path is looked at first (never opened when it is a FIFO or a device), then
    opened without blocking and checked again through the descriptor, which must be the file
    looked at. With `follow_symlinks=False` a symlink is refused (`ELOOP`) instead of followed.
    With `single_link` a file that has another name (a hard link planted to steer a write)
    is refused too. The descriptor is blocking again when returned.
    """
    name = os.fspath(path)
    try:
        before: os.stat_result | None = os.stat(name, follow_symlinks=follow_symlinks)
    except FileNotFoundError:
        if not flags & os.O_CREAT:
            raise
        before = None
    if before is not None:
        check_regular(before, name, single_link=single_link)
    open_flags = flags | os.O_CLOEXEC | os.O_NONBLOCK | (0 if follow_symlinks else os.O_NOFOLLOW)
    descriptor = os.open(name, open_flags, mode)
    try:
        after = os.fstat(descriptor)
        check_regular(after, name, single_link=single_link)
        if before is not None and (before.st_dev, before.st_ino) != (after.st_dev, after.st_ino):
            raise UnexpectedFile(errno.ESTALE, "replaced while it was opened", name)
        os.set_blocking(descriptor, True)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def read_regular(
    path: str | os.PathLike[str],
    limit: int,
    *,
    follow_symlinks: bool = True,
    single_link: bool = False,
) -> bytes:
    """The whole content of the regular file `path`, refused when larger than `limit` bytes
    (also when it grows past `limit` while it is read)."""
    descriptor = open_regular(path, follow_symlinks=follow_symlinks, single_link=single_link)
    try:
        size = os.fstat(descriptor).st_size
        if size > limit:
            raise UnexpectedFile(errno.EFBIG, _too_large(limit), os.fspath(path))
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(descriptor, min(_READ_CHUNK, limit + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise UnexpectedFile(errno.EFBIG, _too_large(limit), os.fspath(path))
        return b"".join(chunks)
    finally:
        os.close(descriptor)


def _too_large(limit: int) -> str:
    return f"larger than {limit} bytes"
