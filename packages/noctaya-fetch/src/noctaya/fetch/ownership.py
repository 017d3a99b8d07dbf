"""One writer per destination: the owner holds `<destination>.lock`; every other fetcher of the
same destination waits, then adopts the owner's verified, marked tree or takes over from an
owner that died.

Which mechanism covers which filesystem:

- Local disks and `hostPath` volumes, where every fetcher runs on one kernel (in any container
  or mount namespace of the node): `flock(2)` on the lock file. The kernel releases it the
  moment its holder dies, SIGKILL included, so a waiter on the same node takes over at once.
- `ReadWriteMany` volumes on NFS: the Linux NFS client turns `flock` into an NFS lock that the
  server arbitrates between nodes (NLM on NFSv3, the protocol's own locks on NFSv4). A dead
  node's lock lapses with its lease (NFSv4) or when it comes back (NFSv3).
- Volumes whose locks do not reach other nodes (NFS mounted `nolock` or `local_lock=…`, many
  FUSE filesystems) or that refuse locks (`ENOLCK`: NFSv3 without a lock daemon): the owner
  record in the lock file. The owner writes who it is and which node (kernel boot) it runs on,
  and rewrites it every `heartbeat` seconds; a fetcher never takes over a record of another
  node, or any record where locks are refused, until the record has not changed for
  `stale_after` seconds, and then checks after one poll that its own record stayed. Two
  fetchers on two such nodes that find no owner at the same instant can both write; the marker
  is still written only on a tree its writer verified after the rename.

The lock file stays beside the destination (empty when nobody owns it): removing it could let
a late waiter lock a file that no longer has a name. For the same reason a lock file that no
fetcher could have made (a link, a FIFO, a directory, a file with a second hard link: planted by
whoever can write the cache) is refused, as a permanent failure naming it, and never replaced:
it is never opened either, so a FIFO cannot block the fetcher and another file's hard link is
not written or truncated. A lock file replaced between its open and its lock is opened again,
so every fetcher locks the file the name holds.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from noctaya.core.files import UnexpectedFile, open_regular
from noctaya.fetch.errors import PermanentFetchError, TransientFetchError
from noctaya.fetch.progress import format_bytes, format_duration, tree_size

log = logging.getLogger("noctaya.fetch")
_NO_LOCKS = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
_RECORD_MAX = 4096
"""A record is a short line; more is not read (the lock file may hold anything)."""


@dataclass(frozen=True, slots=True)
class Waiting:
    """How a fetcher waits for another that owns its destination."""

    interval: float = 5.0
    """Seconds between the lines that say whom it waits for."""
    timeout: float = 6 * 3600.0
    """Give up (a transient failure: a Job retries later) after this long."""
    heartbeat: float = 5.0
    stale_after: float = 60.0
    """A record of another node unchanged this long is an owner that died."""
    poll: float = 0.2


@dataclass(frozen=True, slots=True)
class Owner:
    pid: int
    host: str
    node: str
    since: float

    def __str__(self) -> str:
        return f"pid {self.pid} on {self.host}"


class _Lock(Enum):
    HELD = "held by another"
    ACQUIRED = "acquired"
    UNSUPPORTED = "not supported by the filesystem"


class Ownership:
    """The right to write one destination's partial state and promote it."""

    def __init__(self, destination: Path, source: str, waiting: Waiting) -> None:
        self._path = destination.with_name(destination.name + ".lock")
        self._partial = destination.with_name(destination.name + ".partial")
        self._source = source
        self._waiting = waiting
        self._descriptor = -1
        self._me = Owner(os.getpid(), socket.gethostname(), _node(), time.time())
        self._beat = 0
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None
        self.waited_for: Owner | None = None
        """The owner this fetcher last waited for, if it waited."""

    def acquire(self, done: Callable[[], bool]) -> bool:
        """Own the destination (True), or return False once `done()` says another finished it.

        Raises `TransientFetchError` after waiting `waiting.timeout` seconds, and
        `PermanentFetchError` for a lock file no fetcher made. The destination's parent must
        exist.
        """
        self._open()
        started = time.monotonic()
        reported = -float("inf")
        seen = (b"", started)
        while True:
            if done():
                self._close()
                return False
            state = self._lock()
            raw, owner = self._read()
            if raw != seen[0]:
                seen = (raw, time.monotonic())
            unchanged = time.monotonic() - seen[1]
            if state is not _Lock.HELD:
                if not self._named():
                    self._close()  # a lock on a file without the name excludes nobody
                    self._open()
                elif self._may_take(state, raw, owner, unchanged) and self._claim(state, owner):
                    return True
                elif state is _Lock.ACQUIRED:
                    fcntl.flock(self._descriptor, fcntl.LOCK_UN)
            self.waited_for = owner or self.waited_for
            waited = time.monotonic() - started
            if waited > self._waiting.timeout:
                self._close()
                raise TransientFetchError(
                    self._source,
                    f"still being fetched by {owner or 'another fetcher'} after "
                    f"{format_duration(waited)}; try again later",
                )
            if time.monotonic() - reported >= self._waiting.interval:
                reported = time.monotonic()
                log.info("%s", self._waiting_line(state, owner, unchanged))
            time.sleep(self._waiting.poll)

    def release(self) -> None:
        """Clear the record and let the next fetcher in; safe to call when not owned."""
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
            self._heartbeat = None
        if self._descriptor >= 0:
            os.ftruncate(self._descriptor, 0)
            os.fsync(self._descriptor)
        self._close()

    def _open(self) -> None:
        """Open (or create) the lock file, only if it is a regular file with one name."""
        try:
            self._descriptor = open_regular(
                self._path, os.O_RDWR | os.O_CREAT, follow_symlinks=False, single_link=True
            )
        except UnexpectedFile as error:
            if error.errno == errno.ESTALE:
                raise TransientFetchError(
                    self._source, f"{self._path} was replaced while it was opened; try again"
                ) from None
            raise PermanentFetchError(
                self._source,
                f"the lock file {self._path} {_described(error)}: no fetcher makes such a file, "
                "and every fetcher must lock the same one, so it is left as it is, unopened; "
                "remove it",
            ) from None

    def _named(self) -> bool:
        """Whether the lock file's name still holds the file this fetcher opened."""
        try:
            named = os.stat(self._path, follow_symlinks=False)
        except FileNotFoundError:
            return False
        opened = os.fstat(self._descriptor)
        return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)

    def _lock(self) -> _Lock:
        try:
            fcntl.flock(self._descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return _Lock.HELD
        except OSError as error:
            if error.errno in _NO_LOCKS:
                return _Lock.UNSUPPORTED
            raise
        return _Lock.ACQUIRED

    def _may_take(self, state: _Lock, raw: bytes, owner: Owner | None, unchanged: float) -> bool:
        if not raw.strip():
            return True
        if state is _Lock.ACQUIRED and owner is not None and owner.node == self._me.node:
            log.warning("%s: taking over from %s, which is no longer running", self._source, owner)
            return True
        if unchanged >= self._waiting.stale_after:
            log.warning(
                "%s: taking over from %s, whose record has not changed for %s",
                self._source,
                owner or "an unreadable owner record",
                format_duration(unchanged),
            )
            return True
        return False

    def _claim(self, state: _Lock, previous: Owner | None) -> bool:
        """Write this fetcher's record; where the lock may not exclude the other writer, keep
        the claim only if the record is still this fetcher's one poll later."""
        self._write_record()
        if state is _Lock.UNSUPPORTED or (previous is not None and previous.node != self._me.node):
            time.sleep(self._waiting.poll)
            if self._read()[1] != self._me:
                return False
        self._stop.clear()
        self._heartbeat = threading.Thread(target=self._beating, name="heartbeat", daemon=True)
        self._heartbeat.start()
        return True

    def _beating(self) -> None:
        while not self._stop.wait(self._waiting.heartbeat):
            try:
                self._write_record()
            except OSError as error:
                log.warning("%s: cannot refresh %s: %s", self._source, self._path, error)

    def _write_record(self) -> None:
        self._beat += 1
        me = self._me
        record = {"pid": me.pid, "host": me.host, "node": me.node, "since": me.since}
        data = json.dumps({**record, "beat": self._beat}).encode() + b"\n"
        os.pwrite(self._descriptor, data, 0)
        os.ftruncate(self._descriptor, len(data))
        os.fsync(self._descriptor)

    def _read(self) -> tuple[bytes, Owner | None]:
        """The record as stored (opened afresh: NFS revalidates a file when it is opened)."""
        try:
            descriptor = open_regular(self._path, follow_symlinks=False)
            try:
                raw = os.read(descriptor, _RECORD_MAX)
            finally:
                os.close(descriptor)
        except OSError:
            return b"", None
        try:
            fields = json.loads(raw)
            owner = Owner(
                int(fields["pid"]), str(fields["host"]), str(fields["node"]), float(fields["since"])
            )
        except (ValueError, KeyError, TypeError):
            return raw, None
        return raw, owner

    def _waiting_line(self, state: _Lock, owner: Owner | None, unchanged: float) -> str:
        """Whom this fetcher waits for, saying only what it saw: that the file is locked only
        when its lock was refused."""
        if owner is None and state is _Lock.HELD:
            return f"{self._source}: waiting for another fetcher ({self._path.name} is locked)"
        if owner is None:
            name = self._path.name
            seen = f"nobody holds {name}" if state is _Lock.ACQUIRED else f"{name} cannot be locked"
            stale_after = format_duration(self._waiting.stale_after)
            return (
                f"{self._source}: {seen}, and it records no owner this fetcher can read; it is "
                f"taken over once it has not changed for {stale_after} "
                f"({format_duration(unchanged)} so far)"
            )
        fetching = format_duration(max(0.0, time.time() - owner.since))
        held = format_bytes(tree_size(self._partial) or 0)
        return (
            f"{self._source}: waiting for {owner}, which has been fetching it for {fetching} "
            f"({held} in {self._partial.name} so far)"
        )

    def _close(self) -> None:
        if self._descriptor >= 0:
            os.close(self._descriptor)  # also releases the lock
            self._descriptor = -1


def _described(error: UnexpectedFile) -> str:
    """`is a FIFO, not a regular file` or `has 2 hard links; …`, from the refusal's words."""
    words = str(error.strerror)
    return words if words.startswith("has ") else f"is {words}"


def _node() -> str:
    """This kernel's boot: the same for every container of a node, new after a reboot."""
    try:
        return _BOOT_ID.read_text(encoding="ascii").strip() or socket.gethostname()
    except OSError:
        return socket.gethostname()
