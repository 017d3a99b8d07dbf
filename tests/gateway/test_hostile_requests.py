"""The client API key file as someone else's file: replaced by a FIFO, a link to one or to a
device, a file too large to be a key, or rotated while it is read. The gateway runs as its own
process, so a read that blocked its event loop would show as requests and SIGTERM going
unanswered."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest
from noctaya.gateway.requests.auth import KEY_FILE_LIMIT, KEY_MAX_AGE, read_key

from .support import Command, Engine, eventually, start_gateway_command

KEY = 'k3y-w1th:od\\d "chars"/+='
AUTH = {"Authorization": f"Bearer {KEY}"}
StartCommand = Callable[..., Command]


def _fifo(folder: Path) -> Path:
    os.mkfifo(folder / "fifo")
    return folder / "fifo"


def _link(folder: Path, target: Path) -> Path:
    (folder / "link").symlink_to(target)
    return folder / "link"


def _huge(folder: Path) -> Path:
    (folder / "huge").write_text("k" * (KEY_FILE_LIMIT + 1))
    return folder / "huge"


BREAKAGES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "fifo": (_fifo, "a FIFO, not a regular file"),
    "link to a fifo": (lambda folder: _link(folder, _fifo(folder)), "a FIFO, not a regular file"),
    "link to /dev/zero": (
        lambda folder: _link(folder, Path("/dev/zero")),
        "a character device, not a regular file",
    ),
    "over the limit": (_huge, f"larger than {KEY_FILE_LIMIT} bytes"),
}


@pytest.mark.parametrize("breakage", list(BREAKAGES))
async def test_a_key_file_turned_into_no_key_answers_503_and_never_stalls_the_gateway(
    engine: Engine, commands: StartCommand, tmp_path: Path, breakage: str
) -> None:
    key_file = tmp_path / "api-key"
    key_file.write_text(f"{KEY}\n")
    gateway, port = await start_gateway_command(
        commands, engine.url, NOCTAYA_CLIENT_API_KEY_FILE=str(key_file)
    )
    url = f"http://127.0.0.1:{port}"
    timeout = aiohttp.ClientTimeout(total=5)
    async with aiohttp.ClientSession(timeout=timeout) as http:

        async def status() -> int:
            async with http.post(f"{url}/v1/completions", json={}, headers=AUTH) as response:
                return response.status

        assert await status() == 200
        make, reason = BREAKAGES[breakage]
        os.replace(make(tmp_path), key_file)

        async def refused() -> bool:
            return await status() == 503

        await eventually(refused, within=KEY_MAX_AGE + 2, what="503 without a key")
        async with http.get(f"{url}/other", headers=AUTH) as response:
            assert response.status == 503
            assert await response.read() == b"gateway authentication unavailable\n"
        for path in ("/healthz", "/metrics", "/noctaya/queue"):
            async with http.get(f"{url}{path}") as response:
                assert response.status == 200, path

        (tmp_path / "restored").write_text(f"{KEY}\r\n")
        os.replace(tmp_path / "restored", key_file)

        async def accepted() -> bool:
            return await status() == 200

        await eventually(accepted, within=KEY_MAX_AGE + 2, what="the key back in use")
    gateway.signal(signal.SIGTERM)
    assert await gateway.wait_exit(within=20) == 0
    lines = [line for line in gateway.text().splitlines() if "authentication" in line]
    assert [line.split(" ", 2)[2] for line in lines] == [
        f"gateway authentication unavailable: read client API key: open {key_file}: {reason}",
        "gateway authentication available again",
    ], "why, once, and its end"
    assert KEY not in gateway.text()


def test_a_key_file_rotated_while_it_is_read_is_read_whole_from_the_new_file(
    tmp_path: Path,
) -> None:
    """The kubelet swaps a Secret's files at once: a read that looked at the old file and opened
    the new one reads the new one, never failing (which would answer 503 for KEY_MAX_AGE)."""
    key_file, keys = tmp_path / "api-key", (b"first-key", b"second-key")
    key_file.write_bytes(keys[0])
    done = threading.Event()

    def rotate() -> None:
        turn = 0
        while not done.is_set():
            turn += 1
            replacement = tmp_path / f"key-{turn}"
            replacement.write_bytes(keys[turn % 2] + b"\n")
            os.replace(replacement, key_file)
            time.sleep(0.02)

    rotator = threading.Thread(target=rotate)
    rotator.start()
    seen: set[bytes] = set()
    try:
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            seen.add(read_key(str(key_file)))
    finally:
        done.set()
        rotator.join()
    assert seen == set(keys)
