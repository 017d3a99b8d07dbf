"""A served path is one others can write: a FILE argument or a file in a served folder replaced by
a FIFO, a device, a symlink loop, a folder, a huge sparse file or one growing while it is read is
refused, naming the file, while local mode answers on every endpoint and serves the last good
version. Real local mode, real FIFOs, links and files; the watcher on its own with real files
where the race is the point."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from noctaya.local import log_lines
from noctaya.local.errors import LocalConfigError
from noctaya.local.live_files import Edit, ServedFiles
from support.ports import free_port

from .conftest import StartLocal
from .many import stream_chat, stub_file
from .support import LocalMode

ANSWER_WITHIN = 5.0
"""How long any endpoint may take to answer while local mode looks at a hostile file."""
PEAK_GROWTH_MIB = 32
"""How much a hostile file may add to local mode's peak memory: a bounded read is 1 MiB."""
LOOK_WITHIN = 5.0


def peak_mib(local: LocalMode) -> float:
    for line in Path(f"/proc/{local.process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def replace(path: Path, make: str, target: Path | None = None) -> None:
    """Replace `path` at once (a rename) by a FIFO, a symlink to `target`, or a folder."""
    staged = path.with_name(f".staged-{path.name}")
    if make == "fifo":
        os.mkfifo(staged)
    elif make == "symlink":
        assert target is not None
        staged.symlink_to(target)
    else:
        staged.mkdir()
    if make == "folder" and path.exists():
        path.unlink()  # rename cannot put a folder over a file
    os.rename(staged, path)


def answers(url: str) -> None:
    """/healthz answers at once, and the service streams from its last good version."""
    base = url.removesuffix("/v1")
    assert httpx.get(f"{base}/healthz", timeout=ANSWER_WITHIN).status_code == 200
    assert stream_chat(url, "a", timeout=ANSWER_WITHIN * 2).done


@pytest.mark.parametrize("through", ["fifo", "symlink"])
def test_a_file_argument_replaced_by_a_fifo_is_refused_while_every_endpoint_answers(
    tmp_path: Path, start_local: StartLocal, through: str
) -> None:
    served = stub_file(tmp_path, "a", free_port())
    good = served.read_text(encoding="utf-8")
    local = start_local(served)
    url = local.url()
    if through == "fifo":
        replace(served, "fifo")
    else:
        fifo = tmp_path / "elsewhere.fifo"
        os.mkfifo(fifo)
        replace(served, "symlink", fifo)

    refused = local.wait_for(log_lines.EDIT_REFUSED_RE)
    assert refused["file"] == str(served)
    assert "a FIFO, not a regular file" in refused.string
    answers(url)
    lines = len(local.lines)
    staged = tmp_path / ".fixed"
    staged.write_text(good.replace("heartbeatInterval: 200ms", "heartbeatInterval: 300ms"), "utf-8")
    os.rename(staged, served)
    local.wait_for(re.compile(r"a: changed \("), after=lines)
    assert local.stop(signal.SIGTERM) == 0, "SIGTERM was handled"


def test_a_file_argument_replaced_by_a_link_to_dev_zero_is_refused_in_bounded_memory(
    tmp_path: Path, start_local: StartLocal
) -> None:
    served = stub_file(tmp_path, "a", free_port())
    local = start_local(served)
    url = local.url()
    before = peak_mib(local)
    replace(served, "symlink", Path("/dev/zero"))

    refused = local.wait_for(log_lines.EDIT_REFUSED_RE)
    assert "a character device, not a regular file" in refused.string
    answers(url)
    assert peak_mib(local) - before < PEAK_GROWTH_MIB


def test_a_huge_sparse_file_dropped_in_a_served_folder_is_refused_in_bounded_memory(
    tmp_path: Path, start_local: StartLocal
) -> None:
    folder = tmp_path / "served"
    folder.mkdir()
    stub_file(folder, "a", free_port())
    local = start_local(folder)
    url = local.url()
    before = peak_mib(local)
    staged = tmp_path / "big.yaml"
    with staged.open("wb") as big:
        big.truncate(2 << 30)
    os.rename(staged, folder / "big.yaml")

    refused = local.wait_for(log_lines.EDIT_REFUSED_RE)
    assert refused["file"] == str(folder / "big.yaml")
    assert "larger than 1048576 bytes (1 MiB), the most a manifest file may hold" in refused.string
    answers(url)
    assert peak_mib(local) - before < PEAK_GROWTH_MIB


def test_a_file_argument_growing_while_it_is_read_is_refused_in_bounded_memory(
    tmp_path: Path, start_local: StartLocal
) -> None:
    served = stub_file(tmp_path, "a", free_port())
    local = start_local(served)
    url = local.url()
    before = peak_mib(local)

    def grow() -> None:
        with served.open("ab") as file:
            for _ in range(1024):  # to 64 MiB, over a few seconds
                file.write(b"# padding\n" * 6554)
                file.flush()
                time.sleep(0.002)

    writer = threading.Thread(target=grow)
    writer.start()
    try:
        answers(url)  # while it grows
    finally:
        writer.join()
    refused = local.wait_for(log_lines.EDIT_REFUSED_RE)
    assert "larger than 1048576 bytes" in refused.string
    answers(url)
    assert peak_mib(local) - before < PEAK_GROWTH_MIB


# --- the watcher on its own, with real files


def served_folder(tmp_path: Path) -> tuple[Path, ServedFiles]:
    folder = tmp_path / "served"
    folder.mkdir()
    stub_file(folder, "a", free_port())
    files = ServedFiles([folder])
    files.read_all()
    return folder, files


def look(files: ServedFiles) -> Edit | None:
    """`files.look()` on a thread: AssertionError if it blocks."""
    result: list[Edit | None] = []
    worker = threading.Thread(target=lambda: result.append(files.look()), daemon=True)
    worker.start()
    worker.join(LOOK_WITHIN)
    assert not worker.is_alive(), "the look blocked"
    return result[0]


def served_names(edit: Edit | None, files: ServedFiles) -> list[str]:
    """What the set after `edit` serves, accepted as local mode accepts a set that combines."""
    assert edit is not None
    manifests = edit.manifests()
    files.accept(edit)
    return [service.name for service in manifests.services]


def refusals(edit: Edit | None) -> dict[str, str]:
    assert edit is not None
    return {path.name: str(error) for path, error in edit.refused}


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        ("fifo", "a FIFO, not a regular file"),
        ("folder", "a directory, not a regular file"),
        ("loop", "Too many levels of symbolic links"),
        ("zero", "a character device, not a regular file"),
    ],
)
def test_a_file_argument_that_is_no_regular_file_keeps_its_last_good_version(
    tmp_path: Path, make: str, reason: str
) -> None:
    served = stub_file(tmp_path, "a", free_port())
    files = ServedFiles([served])
    files.read_all()
    if make == "loop":
        replace(served, "symlink", served)
    elif make == "zero":
        replace(served, "symlink", Path("/dev/zero"))
    else:
        replace(served, make)
    if make == "folder":
        stub_file(served, "inside", free_port())  # a folder's files: not served for a FILE

    edit = look(files)
    assert refusals(edit) == {"a.yaml": f"read {served}: {reason}"}
    assert edit is not None
    assert not edit.differs
    assert [service.name for service in edit.manifests().services] == ["a"]
    assert look(files) is None, "reported once"


def test_entries_of_a_folder_that_hold_no_manifest_are_skipped(tmp_path: Path) -> None:
    folder, files = served_folder(tmp_path)
    (folder / "dir.yaml").mkdir()
    stub_file(folder / "dir.yaml", "inside", free_port())
    os.mkfifo(folder / "pipe.yaml")
    (folder / "loop.yaml").symlink_to(folder / "loop.yaml")
    (folder / "dangling.yaml").symlink_to(folder / "absent")
    (folder / "zero.yaml").symlink_to("/dev/zero")

    assert look(files) is None


def test_a_file_swapped_for_a_fifo_again_and_again_never_blocks_a_look(tmp_path: Path) -> None:
    """Whatever moment the swap comes (between the stat and the open, the open and the read),
    a look returns, and once the swaps stop the last version is served."""
    folder, files = served_folder(tmp_path)
    staging = tmp_path / "staging"
    staging.mkdir()
    port = free_port()
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            os.rename(stub_file(staging, "b", port), folder / "b.yaml")
            os.mkfifo(staging / "b.fifo")
            os.rename(staging / "b.fifo", folder / "b.yaml")

    served = ["a"]

    def settle() -> None:
        edit = look(files)
        if edit is not None and edit.differs:
            served[:] = served_names(edit, files)

    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            settle()
    finally:
        stop.set()
        swapper.join()
    os.rename(stub_file(staging, "b", port), folder / "b.yaml")
    settle()
    assert served == ["a", "b"]


def test_a_file_that_cannot_be_read_at_start_up_is_named(tmp_path: Path) -> None:
    served = tmp_path / "a.yaml"
    os.mkfifo(served)
    with pytest.raises(LocalConfigError, match=f"read {served}: a FIFO, not a regular file"):
        ServedFiles([served]).read_all()


def test_a_hundred_files_moved_at_once_are_one_set_that_serves_the_same_services(
    tmp_path: Path,
) -> None:
    folder, files = served_folder(tmp_path)
    staging = tmp_path / "staging"
    staging.mkdir()
    names = [f"svc-{index:03d}" for index in range(100)]
    ports = {free_port() for _ in names}
    while len(ports) < len(names):
        ports.add(free_port())
    for name, port in zip(names, sorted(ports), strict=True):
        os.rename(stub_file(staging, name, port), folder / f"{name}.yaml")
    added = look(files)
    assert added is not None
    assert len(added.changed) == 100
    assert served_names(added, files) == ["a", *names]

    for name in names:  # each moved to a name that sorts before its old one
        os.rename(folder / f"{name}.yaml", folder / f"0-{name}.yaml")
    moved = look(files)
    assert moved is not None
    assert len(moved.changed) == 200
    assert moved.refused == ()
    assert served_names(moved, files) == ["a", *names]
    assert {service.source for service in moved.manifests().services} >= {
        str(folder / f"0-{name}.yaml") for name in names
    }


@pytest.fixture(autouse=True)
def _no_stuck_fifo_readers(tmp_path: Path) -> Iterator[None]:
    """A watcher that blocked on one of this test's FIFOs (the code under test is wrong) is
    let go, so the failure is reported instead of hanging the run."""
    yield
    for fifo in tmp_path.rglob("*"):
        if fifo.is_fifo():
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
