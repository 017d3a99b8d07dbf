"""`noctaya-fetch` on a cache that someone else can write: prewarm Jobs run it as root on a
shared `hostPath`, so every name it uses there may have been planted as a link, a hard link, a
FIFO, a huge file or a forged record. Nothing outside the cache may be read through them,
written, truncated or removed; the fetch either goes on (what it may replace is its own
scratch) or ends at once with a permanent failure (exit 2) that names what to remove.

Each test runs the command as the Job does, against the fake hub or the real registry, with a
folder outside the cache that must come out unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from noctaya.fetch.errors import TransientFetchError
from noctaya.fetch.marker import marker_of, new_record, trusted, write_marker
from noctaya.fetch.promotion import partial_of, promote

from .conftest import leftovers, model_files, tree_files
from .fake_hub import COMMIT, Hub
from .registry import RunningRegistry, push_files
from .test_cli import COMMAND

EXIT_PERMANENT = 2
WEIGHTS = bytes(range(256)) * 1024
"""The OCI artifact's single file layer: its blob is named by this content's SHA-256."""


@dataclass
class Model:
    """One source's model and where it lands in a cache."""

    uri: str
    destination: Path
    """Relative to the cache."""
    files: dict[str, bytes]
    """What the directory an engine loads holds."""
    env: dict[str, str]
    extra: tuple[str, ...] = field(default=())

    def command(self, cache: Path, *more: str) -> list[str]:
        return [COMMAND, self.uri, "--cache", str(cache), *self.extra, *more]

    def run(self, cache: Path, *more: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(cache, *more),
            capture_output=True,
            text=True,
            env={**os.environ, **self.env},
            timeout=timeout,
        )

    def loaded(self, cache: Path) -> Path:
        """The directory an engine loads once the model is complete."""
        if self.uri.startswith("hf://"):
            return cache / self.destination / "snapshots" / COMMIT
        return cache / self.destination


@pytest.fixture
def hf(hub: Hub) -> Model:
    return Model(
        "hf://acme/tiny-model",
        Path("hf/hub/models--acme--tiny-model"),
        model_files(),
        {"HF_ENDPOINT": hub.url, "HF_TOKEN": ""},
    )


@pytest.fixture
def modelscope(hub: Hub) -> Model:
    return Model(
        "modelscope://acme/tiny-model",
        Path("modelscope/models/acme/tiny-model"),
        model_files(),
        {"MODELSCOPE_ENDPOINT": hub.url, "MODELSCOPE_API_TOKEN": ""},
    )


@pytest.fixture
def oci(registry: RunningRegistry, tmp_path_factory: pytest.TempPathFactory) -> Model:
    scratch = tmp_path_factory.mktemp("artifact")
    (scratch / "weights.bin").write_bytes(WEIGHTS)
    digest = push_files(registry, "models/hostile", "v1", [scratch / "weights.bin"])
    config = registry.config_file(scratch)
    return Model(
        f"oci://{registry.host}/models/hostile@{digest}",
        Path("oci") / f"sha256-{digest.removeprefix('sha256:')}",
        {"weights.bin": WEIGHTS},
        {},
        ("--plain-http", "--registry-config", str(config)),
    )


@pytest.fixture
def model(request: pytest.FixtureRequest) -> Model:
    found: Model = request.getfixturevalue(request.param)
    return found


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the cache, shaped like what a fetcher would write into a link to it,
    with a file named like the OCI blob (which a fetcher would take for its own and move)."""
    folder = tmp_path / "outside"
    for name in ("tree/keep.bin", "blobs/keep.bin", "victim.txt"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"not the fetcher's: " + name.encode())
    (folder / hashlib.sha256(WEIGHTS).hexdigest()).write_bytes(bytes(len(WEIGHTS)))
    return folder


def snapshot(folder: Path) -> dict[str, object]:
    """Everything under `folder`: each file's bytes, each link's target, each directory."""
    seen: dict[str, object] = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_symlink():
            seen[name] = ("link", os.readlink(path))
        elif path.is_dir():
            seen[name] = "dir"
        else:
            seen[name] = path.read_bytes()
    return seen


def delivered(model: Model, cache: Path, result: subprocess.CompletedProcess[str]) -> None:
    """The command succeeded, downloading the model into real directories of the cache."""
    assert result.returncode == 0, result.stderr
    assert ": fetched " in result.stderr, result.stderr
    assert result.stdout.strip() == str(model.loaded(cache))
    assert not (cache / model.destination).is_symlink()
    assert tree_files(model.loaded(cache)) == model.files
    assert leftovers(cache) == []


def refused(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == EXIT_PERMANENT, result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


SOURCES = ["hf", "oci", "modelscope"]


@pytest.mark.parametrize("model", SOURCES, indirect=True)
def test_a_partial_planted_as_a_link_is_unlinked_and_nothing_outside_is_touched(
    model: Model, cache: Path, outside: Path
) -> None:
    """The `.partial` is the owner's scratch: a link there is removed as a link (its target
    never entered), and the download goes on in a directory of the cache."""
    before = snapshot(outside)
    partial = partial_of(cache / model.destination)
    partial.parent.mkdir(parents=True)
    partial.symlink_to(outside, target_is_directory=True)

    result = model.run(cache)

    delivered(model, cache, result)
    assert snapshot(outside) == before


HF_BLOB = (
    "models--acme--tiny-model/blobs/"
    + hashlib.sha256(model_files()["model.safetensors"]).hexdigest()
)
OCI_PART = f"blobs/{hashlib.sha256(WEIGHTS).hexdigest()}.part"
PLANTED_INSIDE = [
    ("hf", "models--acme--tiny-model/blobs", "dir-link"),
    ("hf", ".locks", "dir-link"),
    ("hf", "models--acme--tiny-model/refs", "dir-link"),
    ("hf", HF_BLOB, "fifo"),
    ("oci", "blobs", "dir-link"),
    ("oci", "tree", "dir-link"),
    ("oci", OCI_PART, "hard-link"),
    ("oci", OCI_PART, "file-link"),
    ("oci", OCI_PART, "fifo"),
]


@pytest.mark.parametrize(
    ("model", "name", "kind"), PLANTED_INSIDE, indirect=["model"], ids=lambda v: str(v)
)
def test_what_was_planted_inside_the_partial_is_dropped_before_the_download(
    model: Model, cache: Path, outside: Path, name: str, kind: str
) -> None:
    """An earlier run leaves only directories and regular files of one name there: a link,
    a hard link to a file elsewhere or a FIFO is dropped before a client writes (the hub
    client opens `refs/main` and its lock files by name and hashes the blobs it finds, the
    blob writer appends to its `.part`)."""
    partial = partial_of(cache / model.destination)
    planted = partial / name
    planted.parent.mkdir(parents=True)
    if kind == "dir-link":
        planted.symlink_to(outside, target_is_directory=True)
    elif kind == "file-link":
        planted.symlink_to(outside / "victim.txt")
    elif kind == "hard-link":
        os.link(outside / "victim.txt", planted)
    else:
        os.mkfifo(planted)
    before = snapshot(outside)

    result = model.run(cache, timeout=30)

    delivered(model, cache, result)
    assert snapshot(outside) == before


@pytest.mark.parametrize("what", ["file", "fifo"])
@pytest.mark.parametrize("model", ["hf", "oci"], indirect=True)
def test_a_partial_that_is_not_a_directory_is_replaced(
    model: Model, cache: Path, what: str
) -> None:
    """Before, the directory could never be made there and every retry failed the same way."""
    partial = partial_of(cache / model.destination)
    partial.parent.mkdir(parents=True)
    if what == "file":
        partial.write_bytes(b"in the way")
    else:
        os.mkfifo(partial)

    delivered(model, cache, model.run(cache, timeout=30))


@pytest.mark.parametrize("what", ["link", "file"])
@pytest.mark.parametrize("model", ["hf", "oci"], indirect=True)
def test_a_destination_parent_that_is_not_a_directory_is_refused_and_left_alone(
    model: Model, cache: Path, outside: Path, what: str
) -> None:
    """`hf/hub` or `oci` holds every other model too: a link there (or a file) is not the
    fetcher's to remove, and a retry cannot help until someone replaces it."""
    parent = cache / model.destination.parent
    parent.parent.mkdir(parents=True)
    if what == "link":
        parent.symlink_to(outside, target_is_directory=True)
    else:
        parent.write_bytes(b"in the way")
    before = snapshot(outside)

    result = model.run(cache)

    refused(result, str(parent), "symbolic link" if what == "link" else "not a directory")
    assert snapshot(outside) == before
    assert parent.is_symlink() if what == "link" else parent.is_file()


@pytest.mark.parametrize("model", ["hf", "oci"], indirect=True)
def test_a_destination_that_is_a_link_is_neither_trusted_nor_followed(
    model: Model, cache: Path, tmp_path: Path
) -> None:
    """A link to a complete, marked copy elsewhere is not the cache's model: the fetcher
    downloads into a directory of its own, unlinking the link, and the copy stays."""
    elsewhere = tmp_path / "elsewhere"
    delivered(model, elsewhere, model.run(elsewhere))
    copy = tmp_path / "copy"
    shutil.copytree(elsewhere / model.destination, copy, symlinks=True)
    before = snapshot(copy)
    destination = cache / model.destination
    destination.parent.mkdir(parents=True)
    destination.symlink_to(copy, target_is_directory=True)

    delivered(model, cache, model.run(cache))
    assert snapshot(copy) == before


@pytest.mark.parametrize("name", [".stale", ""], ids=["stale", "destination"])
@pytest.mark.parametrize("model", ["hf", "oci"], indirect=True)
def test_a_fifo_where_a_directory_is_swapped_aside_is_unlinked(
    model: Model, cache: Path, name: str
) -> None:
    """The promotion moves the destination to `.stale` and removes it; a FIFO at either was
    handed to a tree removal, whose open of it blocked the fetcher forever."""
    destination = cache / model.destination
    destination.parent.mkdir(parents=True)
    os.mkfifo(destination.with_name(destination.name + name))

    delivered(model, cache, model.run(cache, timeout=30))


@pytest.mark.parametrize("lock_kind", ["hard-link", "fifo", "link", "directory"])
@pytest.mark.parametrize("model", ["hf", "oci"], indirect=True)
def test_a_lock_that_is_not_a_regular_file_of_one_name_ends_the_fetch_at_once(
    model: Model, cache: Path, outside: Path, lock_kind: str
) -> None:
    """The lock must stay one inode for every fetcher, so it is never replaced: a planted one
    is refused before it is opened (a FIFO would block the open forever, past any
    `--wait-timeout`) or written (a hard link's other name would be truncated on release)."""
    destination = cache / model.destination
    lock = destination.with_name(destination.name + ".lock")
    lock.parent.mkdir(parents=True)
    if lock_kind == "hard-link":
        os.link(outside / "victim.txt", lock)
    elif lock_kind == "fifo":
        os.mkfifo(lock)
    elif lock_kind == "link":
        lock.symlink_to(outside / "victim.txt")
    else:
        lock.mkdir()
    before = snapshot(outside)

    result = model.run(cache, "--wait-timeout", "2", timeout=30)

    refused(result, str(lock), "remove it")
    assert snapshot(outside) == before
    assert not (destination / ".noctaya-ready").exists()


def forge(model: Model, cache: Path, change: Callable[[Path], object]) -> None:
    """Fetch `model`, then let `change` alter its tree and record the new sizes in the
    marker, as someone who can write the cache can."""
    delivered(model, cache, model.run(cache))
    destination = cache / model.destination
    change(destination)
    marker = marker_of(destination)
    record = json.loads(marker.read_bytes())
    record["files"] = {
        name: (destination / name).stat().st_size
        for name in record["files"]
        if (destination / name).is_file()
    }
    marker.write_text(json.dumps(record))


@pytest.mark.parametrize(
    "ref",
    [b"../../../../etc", b"0" * (8 << 20), COMMIT.encode() + b"/../../../..", b"."],
    ids=["climbs-out", "huge", "commit-then-climbs", "dot"],
)
def test_a_ref_that_names_no_commit_of_the_repo_folder_is_fetched_again(
    hf: Model, hub: Hub, cache: Path, ref: bytes
) -> None:
    """`refs/main` decides the directory the engine loads: read with a bound, it must be a
    commit whose snapshot is a directory of the repo folder, or the model is fetched again."""
    forge(hf, cache, lambda folder: (folder / "refs" / "main").write_bytes(ref))
    hub.requests.clear()

    result = hf.run(cache)

    delivered(hf, cache, result)
    assert any("/resolve/" in request.path for request in hub.requests)


@pytest.mark.parametrize("directory", ["blobs", "snapshots"])
def test_a_marked_tree_reached_through_a_link_is_fetched_again(
    hf: Model, cache: Path, tmp_path: Path, directory: str
) -> None:
    """Every recorded file must be reached through directories of the cache: a directory of
    the tree moved out and linked back would have the engine read whatever the link leads to."""
    moved = tmp_path / "moved"

    def link_out(folder: Path) -> None:
        (folder / directory).rename(moved)
        (folder / directory).symlink_to(moved, target_is_directory=True)

    forge(hf, cache, link_out)
    before = snapshot(moved)

    delivered(hf, cache, hf.run(cache))
    assert snapshot(moved) == before


@pytest.mark.parametrize("kind", ["fifo", "link-to-dev-zero", "link-to-a-good-marker"])
@pytest.mark.parametrize("model", ["hf", "oci"], indirect=True)
def test_a_marker_that_is_not_a_regular_file_is_not_trusted(
    model: Model, cache: Path, tmp_path: Path, kind: str
) -> None:
    """A FIFO blocked the reader forever; a link is not read at all (a good marker elsewhere
    included), and the model is fetched again."""
    delivered(model, cache, model.run(cache))
    marker = marker_of(cache / model.destination)
    good = tmp_path / "good-marker"
    marker.rename(good)
    if kind == "fifo":
        os.mkfifo(marker)
    elif kind == "link-to-dev-zero":
        marker.symlink_to("/dev/zero")
    else:
        marker.symlink_to(good)

    delivered(model, cache, model.run(cache, timeout=30))


def test_a_huge_marker_is_refused_without_being_read(tmp_path: Path) -> None:
    """A sparse marker costs its writer nothing; reading it whole cost the fetcher its size
    in memory before it could find it is no record."""
    destination = tmp_path / "oci" / "sha256-abc"
    destination.mkdir(parents=True)
    with marker_of(destination).open("wb") as handle:
        handle.truncate(256 << 20)

    tracemalloc.start()
    try:
        assert not trusted(destination, {"kind": "oci", "manifest": "sha256:abc"})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert peak < 16 << 20


def test_a_marker_is_never_written_through_a_link_at_its_temporary_name(tmp_path: Path) -> None:
    """The temporary name carries the writer's pid, which in a container is predictable (the
    fetcher often runs as pid 1): a link planted there must not have the record written, or
    the file it leads to truncated."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"not the fetcher's")
    marker = tmp_path / "cache" / ".noctaya-ready"
    marker.parent.mkdir()
    marker.with_name(f".noctaya-ready.{os.getpid()}.tmp").symlink_to(victim)

    write_marker(marker, {"schema": 1})

    assert victim.read_bytes() == b"not the fetcher's"
    assert json.loads(marker.read_bytes()) == {"schema": 1}
    assert sorted(path.name for path in marker.parent.iterdir()) == [".noctaya-ready"]


def test_a_destination_swapped_for_a_link_during_promotion_gets_no_marker_outside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the check that the renamed directory is the one verified and the marker's
    write, someone swaps the destination for a link out of the cache: the marker goes into
    the verified directory, wherever it now is, and the promotion fails to be retried."""
    outside = tmp_path / "outside"
    outside.mkdir()
    cache = tmp_path / "cache"
    destination = cache / "oci" / "sha256-abc"
    tree = partial_of(destination) / "tree"
    tree.mkdir(parents=True)
    (tree / "weights.bin").write_bytes(b"verified")
    make_record = new_record

    def swap_then_record(*arguments: object) -> object:
        destination.rename(destination.with_name("moved-away"))
        destination.symlink_to(outside, target_is_directory=True)
        return make_record(*arguments)  # type: ignore[arg-type]

    monkeypatch.setattr("noctaya.fetch.promotion.new_record", swap_then_record)

    with pytest.raises(TransientFetchError, match="changed while it was promoted"):
        promote(
            tree,
            destination,
            source="oci://r/x",
            identity={"kind": "oci", "manifest": "sha256:abc"},
            verified={},
        )

    assert list(outside.iterdir()) == []
    assert (cache / "oci" / "moved-away" / "weights.bin").read_bytes() == b"verified"


def test_a_partial_swapped_for_a_link_after_verification_moves_nothing_in(
    tmp_path: Path, outside: Path
) -> None:
    """Between the verification and the promotion someone swaps the `.partial` for a link to
    a folder holding a `tree`: that folder must not be moved into the cache and marked."""
    destination = tmp_path / "cache" / "oci" / "sha256-abc"
    partial = partial_of(destination)
    (partial / "tree").mkdir(parents=True)
    (partial / "tree" / "weights.bin").write_bytes(b"verified")
    partial.rename(partial.with_name("moved-away"))
    partial.symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)

    with pytest.raises(TransientFetchError, match="changed while it was promoted"):
        promote(
            partial / "tree",
            destination,
            source="oci://r/x",
            identity={"kind": "oci", "manifest": "sha256:abc"},
            verified={},
        )

    assert snapshot(outside) == before
    assert not destination.exists()


@pytest.mark.parametrize("model", ["hf", "oci"], indirect=True)
def test_four_fetchers_with_a_planted_partial_link_all_succeed_touching_nothing_outside(
    model: Model, cache: Path, outside: Path
) -> None:
    """One owner unlinks the link; the waiters never measure or write through it."""
    before = snapshot(outside)
    partial = partial_of(cache / model.destination)
    partial.parent.mkdir(parents=True)
    partial.symlink_to(outside, target_is_directory=True)
    processes = [
        subprocess.Popen(
            model.command(cache, "--progress-interval", "0.2"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **model.env},
        )
        for _ in range(4)
    ]
    results = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=120)
        results.append(
            subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
        )

    for result in results:
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == str(model.loaded(cache))
    assert sum(": fetched " in result.stderr for result in results) == 1
    assert tree_files(model.loaded(cache)) == model.files
    assert snapshot(outside) == before
    assert leftovers(cache) == []
