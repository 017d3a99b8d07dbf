"""Four real `noctaya-fetch` processes on one cache, for every source kind: one downloads, the
others wait for it and adopt its verified, marked tree; when the owner is killed mid-download,
a waiter takes over and finishes.

The artifacts are small so that many rounds stay quick; the processes still overlap, since each
spends far longer starting than downloading.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from .conftest import leftovers, model_files, tree_files
from .fake_hub import Hub
from .fault_proxy import proxy_to
from .faults import Fault, FaultPlan
from .registry import RunningRegistry, push_files
from .test_cli import COMMAND

PROCESSES = 4
ROUNDS = 20
KILL_ROUNDS = 5
MOUNT_ROUNDS = 5
SLOW_CHUNKS, SLOW_DELAY = 20, 0.05
"""A download the owner is still in the middle of when it is killed (about a second)."""
FETCHED = re.compile(r": fetched [\d.]+ \w+ in ")


@dataclass
class Source:
    """One model, and the server whose request log counts its downloads."""

    uri: str
    files: dict[str, bytes]
    server: FaultPlan
    downloaded: Callable[[str], bool]
    """Whether a request path downloads a file (or blob) of the model."""
    slow: str
    """A request path fragment of one file, to slow down before a kill."""
    env: dict[str, str]
    extra: tuple[str, ...] = field(default=())

    def downloads(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for request in self.server.requests:
            if request.method == "GET" and self.downloaded(request.path):
                counts[request.path] = counts.get(request.path, 0) + 1
        return counts


@dataclass
class Finished:
    pid: int
    returncode: int
    stdout: str
    stderr: str


def command(source: Source, cache: Path) -> list[str]:
    argv = [COMMAND, source.uri, "--cache", str(cache), "--progress-interval", "0.5"]
    return [*argv, *source.extra]


def launch(source: Source, commands: list[list[str]]) -> list[subprocess.Popen[str]]:
    return [
        subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **source.env},
        )
        for argv in commands
    ]


def start(source: Source, cache: Path) -> list[subprocess.Popen[str]]:
    return launch(source, [command(source, cache)] * PROCESSES)


def in_a_mount_namespace(cache: Path, seen_at: Path, argv: list[str]) -> list[str]:
    """`argv` where `cache` is bind-mounted at `seen_at`, in a mount namespace of its own."""
    script = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'
    namespace = ["unshare", "--mount", "--propagation", "private"]
    return [*namespace, "sh", "-c", script, "sh", str(cache), str(seen_at), *argv]


def finish(processes: list[subprocess.Popen[str]]) -> list[Finished]:
    results = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=120)
        results.append(Finished(process.pid, process.returncode, stdout, stderr))
    return results


def check_delivered(source: Source, cache: Path, results: list[Finished]) -> None:
    """Every survivor exited 0 naming the same folder, which holds the source's bytes."""
    survivors = [result for result in results if result.returncode != -signal.SIGKILL]
    for result in survivors:
        assert result.returncode == 0, result.stderr
    [path] = {result.stdout.strip() for result in survivors}
    assert tree_files(Path(path)) == source.files
    assert leftovers(cache) == []


def test_four_fetchers_on_one_cache_download_once_and_all_succeed(
    source: Source, tmp_path: Path
) -> None:
    for round_number in range(ROUNDS):
        cache = tmp_path / f"round-{round_number}"
        source.server.requests.clear()

        results = finish(start(source, cache))

        check_delivered(source, cache, results)
        downloads = source.downloads()
        assert len(downloads) >= len(source.files), downloads
        assert set(downloads.values()) == {1}, (round_number, downloads)
        [owner] = [r for r in results if FETCHED.search(r.stderr)]
        for waiter in results:
            if waiter is not owner:
                said = rf"waiting for pid {owner.pid} on \S+|already complete|completed by"
                assert re.search(said, waiter.stderr), waiter.stderr


def test_a_killed_owner_is_taken_over_by_a_waiter(source: Source, tmp_path: Path) -> None:
    for round_number in range(KILL_ROUNDS):
        cache = tmp_path / f"round-{round_number}"
        source.server.requests.clear()
        source.server.fail(
            Fault(source.slow, "slow", slow_chunks=SLOW_CHUNKS, slow_delay=SLOW_DELAY)
        )
        processes = start(source, cache)
        by_pid = {process.pid: process for process in processes}

        deadline = time.monotonic() + 60
        while not any(source.slow in request.path for request in source.server.requests):
            assert time.monotonic() < deadline, "the slow file was never requested"
            time.sleep(0.02)
        time.sleep(0.2)  # well inside the slowed download
        victim = by_pid[_owner_pid(cache)]
        victim.send_signal(signal.SIGKILL)
        results = finish(processes)

        assert victim.returncode == -signal.SIGKILL
        check_delivered(source, cache, results)
        takeovers = [r for r in results if f"taking over from pid {victim.pid}" in r.stderr]
        assert len(takeovers) == 1, [r.stderr for r in results]


@pytest.mark.parametrize("source", ["oci"], indirect=True)
def test_fetchers_in_another_mount_namespace_wait_for_the_same_owner(
    source: Source, tmp_path: Path
) -> None:
    """Two pods on one node see a hostPath cache through mounts of their own: half the
    fetchers here see the cache through a bind mount at another path, in a mount namespace of
    their own, and still one download happens."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        reason = "needs root and unshare(1) to make a mount namespace"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    for round_number in range(MOUNT_ROUNDS):
        cache, elsewhere = tmp_path / f"cache-{round_number}", tmp_path / f"bind-{round_number}"
        cache.mkdir()
        elsewhere.mkdir()
        source.server.requests.clear()
        ours = command(source, cache)
        theirs = in_a_mount_namespace(cache, elsewhere, command(source, elsewhere))
        processes = launch(source, [ours, theirs] * (PROCESSES // 2))
        results = finish(processes)

        for result in results:
            result.stdout = result.stdout.replace(str(elsewhere), str(cache))
        check_delivered(source, cache, results)
        assert set(source.downloads().values()) == {1}, source.downloads()
        assert not any(elsewhere.iterdir()), "the bind mount stayed inside its namespace"


def _owner_pid(cache: Path) -> int:
    """The pid the owner recorded in its lock file."""
    for lock in cache.rglob("*.lock"):
        text = lock.read_text(encoding="utf-8").strip()
        if text:
            return int(json.loads(text)["pid"])
    raise AssertionError("no fetcher recorded itself as the owner")


@pytest.fixture(params=["oci", "hf", "modelscope"])
def source(request: pytest.FixtureRequest) -> Source:
    found: Source = request.getfixturevalue(f"{request.param}_source")
    return found


@pytest.fixture
def oci_source(
    registry: RunningRegistry, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Source]:
    """Six files, downloaded through a pass-through proxy that counts the requests."""
    scratch = tmp_path_factory.mktemp("artifact")
    files = {f"shard-{index}.bin": os.urandom(256 * 1024) for index in range(6)}
    for name, content in files.items():
        (scratch / name).write_bytes(content)
    digest = push_files(registry, "models/shared", "v1", [scratch / name for name in files])
    with proxy_to(registry.host) as proxy:
        config = registry.config_file(scratch, host=proxy.host)
        yield Source(
            uri=f"oci://{proxy.host}/models/shared@{digest}",
            files=files,
            server=proxy,
            downloaded=lambda path: "/blobs/" in path or "/manifests/" in path,
            slow="/blobs/",
            env={},
            extra=("--plain-http", "--registry-config", str(config)),
        )


@pytest.fixture
def hf_source(hub: Hub) -> Source:
    return hub_source(hub, "hf", "HF", "/resolve/", "model.safetensors")


@pytest.fixture
def modelscope_source(hub: Hub) -> Source:
    return hub_source(hub, "modelscope", "MODELSCOPE", "FilePath=", "FilePath=model.safetensors")


def hub_source(hub: Hub, scheme: str, prefix: str, download: str, slow: str) -> Source:
    """The fake hub's model, its client pointed at the hub (`<prefix>_ENDPOINT`), no token."""
    token = "HF_TOKEN" if prefix == "HF" else f"{prefix}_API_TOKEN"
    return Source(
        uri=f"{scheme}://acme/tiny-model",
        files=model_files(),
        server=hub,
        downloaded=lambda path: download in path,
        slow=slow,
        env={f"{prefix}_ENDPOINT": hub.url, token: ""},
    )
