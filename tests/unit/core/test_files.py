"""read_regular and open_regular on paths a hostile writer prepared, with real files, FIFOs,
devices and links (nothing faked): each is refused as an OSError before it blocks or grows."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest
from noctaya.core.files import UnexpectedFile, open_regular, read_regular

LIMIT = 1024


def test_reads_a_regular_file_within_its_limit(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_bytes(b"x" * LIMIT)
    assert read_regular(path, LIMIT) == b"x" * LIMIT


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link.yaml"
    link.symlink_to(fifo)
    for path in (fifo, link):
        with pytest.raises(UnexpectedFile, match="a FIFO, not a regular file"):
            read_regular(path, LIMIT)


def test_a_device_is_refused_directly_and_through_a_symlink(tmp_path: Path) -> None:
    link = tmp_path / "zero.yaml"
    link.symlink_to("/dev/zero")
    for path in (Path("/dev/zero"), link):
        with pytest.raises(UnexpectedFile, match="a character device"):
            read_regular(path, LIMIT)


def test_a_file_over_the_limit_is_refused_without_reading_it(tmp_path: Path) -> None:
    huge = tmp_path / "big.yaml"
    with huge.open("wb") as file:
        file.truncate(1 << 40)  # sparse: a terabyte on paper
    with pytest.raises(UnexpectedFile) as raised:
        read_regular(huge, LIMIT)
    assert raised.value.errno == errno.EFBIG
    assert "larger than 1024 bytes" in str(raised.value)


def test_a_file_growing_while_read_is_cut_at_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "growing"
    path.write_bytes(b"")
    stop = threading.Event()

    def grow() -> None:
        with path.open("ab") as file:
            while not stop.is_set():
                file.write(b"y" * 4096)
                file.flush()

    writer = threading.Thread(target=grow)
    writer.start()
    try:
        for _ in range(50):
            try:
                content = read_regular(path, LIMIT)
            except UnexpectedFile as error:
                refused = error.errno
            else:
                refused = None
                assert len(content) <= LIMIT
            assert refused in (None, errno.EFBIG)
    finally:
        stop.set()
        writer.join()


def test_symlinks_and_hard_links_are_refused_when_asked(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_bytes(b"secret")
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(UnexpectedFile, match="a symlink, not a regular file"):
        read_regular(link, LIMIT, follow_symlinks=False)
    hard = tmp_path / "hard"
    os.link(target, hard)
    with pytest.raises(UnexpectedFile, match="2 hard links"):
        read_regular(hard, LIMIT, single_link=True)
    assert read_regular(link, LIMIT) == b"secret"  # followed when the caller allows it


def test_open_regular_creates_a_missing_file_but_never_writes_through_a_link(
    tmp_path: Path,
) -> None:
    created = tmp_path / "new.lock"
    os.close(open_regular(created, os.O_RDWR | os.O_CREAT, follow_symlinks=False))
    assert created.is_file()
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    planted = tmp_path / "planted.lock"
    planted.symlink_to(victim)
    with pytest.raises(UnexpectedFile, match="a symlink"):
        open_regular(planted, os.O_RDWR | os.O_CREAT, follow_symlinks=False)
    fifo = tmp_path / "fifo.lock"
    os.mkfifo(fifo)
    with pytest.raises(UnexpectedFile, match="FIFO"):
        open_regular(fifo, os.O_RDWR | os.O_CREAT, follow_symlinks=False)
    assert victim.read_bytes() == b"keep"


def test_a_missing_file_is_the_usual_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "absent", LIMIT)
