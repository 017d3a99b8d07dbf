"""A private containerd for one test: its own root, state and socket under a temporary folder,
with the CRI plugin off, so importing images touches nothing of the host's."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

START_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0


@contextmanager
def private_containerd(folder: Path) -> Iterator[Path]:
    """The socket of a containerd that runs until the block ends."""
    socket = folder / "containerd.sock"
    config = folder / "config.toml"
    config.write_text(
        "version = 2\n"
        f'root = "{folder / "root"}"\n'
        f'state = "{folder / "state"}"\n'
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
        f'[grpc]\n  address = "{socket}"\n'
    )
    log = (folder / "containerd.log").open("wb")
    process = subprocess.Popen(
        ["containerd", "--config", str(config)], stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not socket.is_socket():
            assert process.poll() is None, (folder / "containerd.log").read_text()
            assert time.monotonic() < deadline, "containerd did not open its socket"
            time.sleep(0.05)
        yield socket
    finally:
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT)
        log.close()
