"""Who may write a destination: the rules for owners this process cannot see die (another node's,
or any where the filesystem refuses locks), and the bound on waiting.

The common case, owners on one kernel, is proven with real processes in
`test_concurrent_fetch.py`; here the owner is a record the test writes, as another node's
fetcher would.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from noctaya.fetch import ownership
from noctaya.fetch.errors import PermanentFetchError, TransientFetchError
from noctaya.fetch.ownership import Ownership, Waiting

QUICK = Waiting(interval=0.1, timeout=30, heartbeat=0.05, stale_after=0.6, poll=0.02)


def record(lock: Path, *, node: str, pid: int = 999_999, beat: int = 1) -> None:
    """Write an owner's record as an owner does: overwritten in place, never empty."""
    fields = {"pid": pid, "host": "node-b", "node": node, "since": time.time(), "beat": beat}
    data = json.dumps(fields).encode()
    descriptor = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        os.pwrite(descriptor, data, 0)
        os.ftruncate(descriptor, len(data))
    finally:
        os.close(descriptor)


@pytest.fixture
def destination(tmp_path: Path) -> Path:
    return tmp_path / "oci" / "sha256-abc"


@pytest.fixture
def lock(destination: Path) -> Path:
    destination.parent.mkdir(parents=True)
    return destination.with_name("sha256-abc.lock")


@pytest.fixture
def heartbeat(lock: Path) -> Iterator[threading.Event]:
    """Another node's live owner: its record changes every 50 ms until the event is set."""
    stop = threading.Event()

    def beat() -> None:
        count = 0
        while not stop.wait(QUICK.heartbeat):
            count += 1
            record(lock, node="another-boot", beat=count)

    record(lock, node="another-boot")
    thread = threading.Thread(target=beat)
    thread.start()
    yield stop
    stop.set()
    thread.join()


def test_another_nodes_owner_is_waited_for_while_its_record_changes(
    destination: Path, heartbeat: threading.Event, caplog: pytest.LogCaptureFixture
) -> None:
    """Its lock may not reach this node (NFS without cross-node locks), so only a record
    that stopped changing means it died."""
    caplog.set_level(logging.INFO, logger="noctaya.fetch")
    owner = Ownership(destination, "oci://r/x", QUICK)
    threading.Timer(1.5, heartbeat.set).start()
    started = time.monotonic()

    assert owner.acquire(done=lambda: False)
    took = time.monotonic() - started
    owner.release()

    last_beat = 1.5 - QUICK.heartbeat  # the record's last change, at the latest one beat early
    assert last_beat + QUICK.stale_after <= took < 1.5 + QUICK.stale_after + 2
    assert "oci://r/x: waiting for pid 999999 on node-b, which has been fetching it for" in (
        caplog.text
    )
    assert "taking over from pid 999999 on node-b, whose record has not changed for" in (
        caplog.text
    )


def test_a_dead_owner_of_this_node_is_taken_over_at_once(
    destination: Path, lock: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing holds the lock, and the kernel would hold it for a live owner on this node."""
    record(lock, node=ownership._node())
    owner = Ownership(destination, "oci://r/x", Waiting(stale_after=3600))
    started = time.monotonic()

    assert owner.acquire(done=lambda: False)
    owner.release()

    assert time.monotonic() - started < 1
    assert "taking over from pid 999999 on node-b, which is no longer running" in caplog.text
    assert lock.read_bytes() == b"", "a released lock records no owner"


def test_where_locks_are_refused_a_fresh_record_is_waited_for_and_a_claim_is_checked(
    destination: Path, lock: Path, heartbeat: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NFSv3 without a lock daemon answers ENOLCK: the record alone decides, even this node's."""

    def refused(descriptor: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(ownership.fcntl, "flock", refused)
    threading.Timer(1.0, heartbeat.set).start()
    first = Ownership(destination, "oci://r/x", QUICK)
    assert first.acquire(done=lambda: False)
    assert json.loads(lock.read_text())["pid"] == os.getpid()

    second = Ownership(destination, "oci://r/x", QUICK)
    finished = threading.Event()
    threading.Timer(1.0, finished.set).start()
    started = time.monotonic()
    assert not second.acquire(done=finished.is_set), "first's heartbeat keeps it the owner"
    assert time.monotonic() - started >= 1.0
    first.release()


def test_waiting_is_bounded_and_names_the_owner(destination: Path, lock: Path) -> None:
    record(lock, node=ownership._node(), pid=4242)
    holder = os.open(lock, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        owner = Ownership(destination, "oci://r/x", Waiting(timeout=0.3, poll=0.02))
        with pytest.raises(TransientFetchError, match=r"still being fetched by pid 4242 on node-b"):
            owner.acquire(done=lambda: False)
    finally:
        os.close(holder)


def test_a_waiter_returns_as_soon_as_the_destination_is_done(destination: Path, lock: Path) -> None:
    record(lock, node=ownership._node())
    holder = os.open(lock, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)
    done = threading.Event()
    threading.Timer(0.3, done.set).start()
    try:
        owner = Ownership(destination, "oci://r/x", Waiting(poll=0.02))
        assert not owner.acquire(done=done.is_set)
        assert owner.waited_for is not None
        assert str(owner.waited_for) == "pid 999999 on node-b"
    finally:
        os.close(holder)


def test_a_lock_file_that_is_a_link_is_never_written_through(
    destination: Path, lock: Path, tmp_path: Path
) -> None:
    """Whoever can plant a link in the cache gets a refusal, not a truncated file elsewhere."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"not the fetcher's")
    lock.symlink_to(elsewhere)

    with pytest.raises(PermanentFetchError, match=r"is a symlink, not a regular file.*remove it"):
        Ownership(destination, "oci://r/x", QUICK).acquire(done=lambda: False)

    assert elsewhere.read_bytes() == b"not the fetcher's"


def test_a_huge_lock_file_is_read_only_as_far_as_a_record_goes(
    destination: Path, lock: Path
) -> None:
    lock.write_bytes(b"x" * (64 << 20))

    owner = Ownership(destination, "oci://r/x", QUICK)
    started = time.monotonic()
    assert owner.acquire(done=lambda: False), "unreadable, unlocked, and it stopped changing"
    owner.release()

    assert time.monotonic() - started < QUICK.stale_after + 2


def test_nobody_is_said_to_hold_a_lock_that_nobody_holds(
    destination: Path, lock: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A lock file holding something other than a record (left by anything) is free to lock;
    the waiting lines say the record is waited out, not that the file is locked."""
    caplog.set_level(logging.INFO, logger="noctaya.fetch")
    lock.write_bytes(b"not a record")

    owner = Ownership(destination, "oci://r/x", QUICK)
    assert owner.acquire(done=lambda: False)
    owner.release()

    assert "is locked" not in caplog.text
    assert "nobody holds sha256-abc.lock, and it records no owner this fetcher can read" in (
        caplog.text
    )


def test_a_lock_replaced_between_open_and_flock_is_opened_again(
    destination: Path, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Locking a file that no longer has the name would let the next fetcher, opening the
    name, own the destination too: the owner locks the file the name holds."""
    lock.write_bytes(b"")
    real_flock = fcntl.flock
    replaced: list[bool] = []

    def replace_first(descriptor: int, operation: int) -> None:
        if not replaced:
            replacement = lock.with_name("replacement")
            replacement.write_bytes(b"")
            replacement.rename(lock)
            replaced.append(True)
        real_flock(descriptor, operation)

    monkeypatch.setattr("noctaya.fetch.ownership.fcntl.flock", replace_first)
    owner = Ownership(destination, "oci://r/x", QUICK)
    assert owner.acquire(done=lambda: False)
    try:
        other = subprocess.run(
            ["flock", "--nonblock", "--exclusive", str(lock), "true"], check=False
        )
        assert other.returncode == 1, "another process could lock the file the name holds"
    finally:
        owner.release()


def test_a_lock_that_is_a_fifo_is_refused_without_being_opened(
    destination: Path, lock: Path
) -> None:
    """Opening a FIFO blocks until a writer comes, before any timeout is looked at."""
    os.mkfifo(lock)
    failures: list[BaseException] = []

    def acquire() -> None:
        try:
            Ownership(destination, "oci://r/x", QUICK).acquire(done=lambda: False)
        except BaseException as error:
            failures.append(error)

    attempt = threading.Thread(target=acquire, daemon=True)
    attempt.start()
    attempt.join(timeout=5)
    if attempt.is_alive():  # let the blocked open through, so the thread ends
        os.close(os.open(lock, os.O_WRONLY | os.O_NONBLOCK))
    attempt.join(timeout=5)

    [failure] = failures
    assert isinstance(failure, PermanentFetchError), failure
    assert "is a FIFO, not a regular file" in str(failure)


def test_a_lock_with_another_name_is_refused_and_the_other_file_never_written(
    destination: Path, lock: Path, tmp_path: Path
) -> None:
    """Every fetcher must lock the same inode, so a planted lock is not replaced: it is
    refused, as permanent, before anything is written to it."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"not the fetcher's")
    os.link(elsewhere, lock)

    with pytest.raises(PermanentFetchError, match=r"has 2 hard links.*remove it"):
        Ownership(destination, "oci://r/x", QUICK).acquire(done=lambda: False)

    assert elsewhere.read_bytes() == b"not the fetcher's"


def test_a_waiter_never_measures_through_a_planted_partial_link(
    destination: Path, lock: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The waiting line counts the bytes in the owner's `.partial`; a link there to a large
    tree outside the cache (`/`, say) would have it walk that tree every few seconds."""
    caplog.set_level(logging.INFO, logger="noctaya.fetch")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "big").write_bytes(b"x" * (1 << 20))
    destination.with_name("sha256-abc.partial").symlink_to(elsewhere)
    record(lock, node=ownership._node())
    holder = os.open(lock, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)
    done = threading.Event()
    threading.Timer(0.3, done.set).start()
    try:
        assert not Ownership(destination, "oci://r/x", QUICK).acquire(done=done.is_set)
    finally:
        os.close(holder)

    assert "(0 B in sha256-abc.partial so far)" in caplog.text
