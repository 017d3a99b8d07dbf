"""`noctaya-fetch`'s exit status on a filesystem failure, caused for real: the status tells the
prewarm Job whether another pod can succeed, and the Job's pod failure policy fails it at once
on the permanent status. Each errno of `ERRNO_VERDICTS` that a cache can be made to raise is
raised here: a symlink loop, a directory, a regular file, a read-only mount, a name too long,
and a full volume (a tiny tmpfs), the last through the hub clients' own writes."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from noctaya.fetch import cli
from noctaya.fetch.cli import EXIT_INTERNAL, EXIT_PERMANENT, EXIT_TRANSIENT
from noctaya.k8s.render.cache import render_prewarm_job
from support.plans import serving_plan

from .fake_hub import Hub
from .test_cli import COMMAND, hub_env

HUB_URIS = ["hf://acme/tiny-model", "modelscope://acme/tiny-model"]


def run(hub: Hub, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [COMMAND, *arguments, "--attempts", "1"],
        capture_output=True,
        text=True,
        env={**os.environ, **hub_env(hub)},
        timeout=120,
    )


def fail_job_statuses() -> set[int]:
    """The exit statuses on which the prewarm Job the operator renders fails at once."""
    job = render_prewarm_job(serving_plan({"cache": {"prewarm": True}}))
    assert job is not None
    rules = job["spec"]["podFailurePolicy"]["rules"]
    return {
        status
        for rule in rules
        if rule["action"] == "FailJob"
        for status in rule["onExitCodes"]["values"]
    }


@contextlib.contextmanager
def tmpfs(folder: Path, options: str) -> Iterator[Path]:
    """A tmpfs mounted at `folder` (the test runs as root, as the prewarm Job on a HostPath
    cache does); skipped where mounting is not allowed."""
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def symlink_loop(tmp_path: Path) -> list[str]:
    (tmp_path / "loop").symlink_to("loop")
    return ["--cache", str(tmp_path / "loop" / "cache")]


def directory_as_marker(tmp_path: Path) -> list[str]:
    (tmp_path / "marker").mkdir()
    return ["--cache", str(tmp_path / "cache"), "--ready-marker", str(tmp_path / "marker")]


def file_above_cache(tmp_path: Path) -> list[str]:
    (tmp_path / "file").write_text("")
    return ["--cache", str(tmp_path / "file" / "cache")]


def name_too_long(tmp_path: Path) -> list[str]:
    return ["--cache", str(tmp_path / ("x" * 300))]


WRONG_ENTRY = "an entry in the cache is not what its layout needs"


@pytest.mark.parametrize("uri", HUB_URIS)
@pytest.mark.parametrize(
    ("arrange", "expected"),
    [
        (symlink_loop, f"{WRONG_ENTRY}: OSError: [Errno 40] Too many levels of symbolic links"),
        (directory_as_marker, f"{WRONG_ENTRY}: IsADirectoryError: [Errno 21] Is a directory"),
        (file_above_cache, f"{WRONG_ENTRY}: NotADirectoryError: [Errno 20] Not a directory"),
        (
            name_too_long,
            "the cache's filesystem cannot hold this path: OSError: [Errno 36] File name too long",
        ),
    ],
    ids=["ELOOP", "EISDIR", "ENOTDIR", "ENAMETOOLONG"],
)
def test_a_cache_that_cannot_hold_the_model_fails_the_job_at_once(
    hub: Hub, tmp_path: Path, uri: str, arrange: Callable[[Path], list[str]], expected: str
) -> None:
    """The same pod spec meets the same cache on every try: retrying only delays the error."""
    result = run(hub, uri, *arrange(tmp_path))

    assert result.returncode == EXIT_PERMANENT, result.stderr
    assert result.returncode in fail_job_statuses()
    assert result.stderr.strip().splitlines()[-1].startswith(f"noctaya-fetch: {uri}: {expected}"), (
        result.stderr
    )
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("uri", HUB_URIS)
def test_a_read_only_cache_fails_the_job_at_once(hub: Hub, tmp_path: Path, uri: str) -> None:
    with tmpfs(tmp_path / "read-only", "ro,size=1m") as cache:
        result = run(hub, uri, "--cache", str(cache))

    assert result.returncode == EXIT_PERMANENT, result.stderr
    assert result.returncode in fail_job_statuses()
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"noctaya-fetch: {uri}: the cache is not writable: OSError: "), line
    assert "[Errno 30] Read-only file system" in line


@pytest.mark.parametrize("uri", HUB_URIS)
def test_a_full_cache_volume_is_tried_again(hub: Hub, tmp_path: Path, uri: str) -> None:
    """The 256 KiB model does not fit a 64 KiB volume; evicting other models or growing the
    volume lets the Job's next pod finish, so the Job must not fail at once."""
    with tmpfs(tmp_path / "full", "size=64k") as cache:
        result = run(hub, uri, "--cache", str(cache))

    assert result.returncode == EXIT_TRANSIENT, result.stderr
    assert result.returncode not in fail_job_statuses()
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"noctaya-fetch: {uri}: the cache volume is full: "), line
    assert "No space left on device" in line


def test_an_errno_the_table_does_not_list_is_reported_as_unclassified_and_retried() -> None:
    """Neither "try again later" nor "fails at once": the Job retries it as it retries a
    transient failure, and the line says the fetcher could not classify it."""
    line, status = cli._failure("hf://acme/tiny-model", OSError(errno.ENOTSUP, "Not supported"))

    assert status == EXIT_INTERNAL
    assert status not in fail_job_statuses()
    assert line == "hf://acme/tiny-model: OSError: [Errno 95] Not supported"
