"""Launching the real `noctaya-gateway` processes the scaler benchmarks measure, and their RSS."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

BIN = Path(sys.executable).parent
TOKEN = "s" * 43


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def token_file() -> str:
    path = os.path.join(tempfile.mkdtemp(prefix="noctaya-bench-"), "token")
    Path(path).write_text(TOKEN)
    return path


WITHOUT = "BENCH_WITHOUT"
"""Set in `env`: the process runs with these changes undone (`benchmarks.gateway.without`)."""


def launch(args: list[str], env: dict[str, str], ready_url: str) -> subprocess.Popen[bytes]:
    """Start `noctaya-gateway <args>` with `env` and wait until `ready_url` answers 200."""
    command = [str(BIN / "noctaya-gateway")]
    if env.get(WITHOUT):
        command = [sys.executable, "-m", "benchmarks.gateway.without"]
    process = subprocess.Popen(
        [*command, *args],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=None if os.environ.get("BENCH_VERBOSE") else subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"noctaya-gateway {args} exited with {process.returncode}")
        try:
            with urllib.request.urlopen(ready_url, timeout=1) as reply:
                if reply.status == 200:
                    return process
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"noctaya-gateway {args} did not become ready")


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def rss_mib(pid: int) -> tuple[float, float]:
    """(current RSS, peak RSS) of `pid` in MiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.split()[0] if value.split() else "0"
    return int(fields["VmRSS"]) / 1024, int(fields["VmHWM"]) / 1024


def aggregator(token: str, **extra_env: str) -> tuple[subprocess.Popen[bytes], int, int]:
    """A `--mode=aggregator` process: (process, HTTP port, gRPC port)."""
    http_port, grpc_port = free_port(), free_port()
    env = {
        "NOCTAYA_DEMAND_AUTH_TOKEN_FILE": token,
        "NOCTAYA_AGGREGATOR_LISTEN_ADDR": f"127.0.0.1:{http_port}",
        "NOCTAYA_SCALER_LISTEN_ADDR": f"127.0.0.1:{grpc_port}",
        **extra_env,
    }
    process = launch(["--mode=aggregator"], env, f"http://127.0.0.1:{http_port}/readyz")
    return process, http_port, grpc_port


def gateway(extra_env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int, int]:
    """A gateway whose backend never becomes ready (so every request is cold).

    Returns (process, HTTP port, gRPC scaler port; the latter unused in reporter mode).
    """
    http_port, grpc_port = free_port(), free_port()
    env = {
        "NOCTAYA_BACKEND_URL": f"http://127.0.0.1:{free_port()}",
        "NOCTAYA_LISTEN_ADDR": f"127.0.0.1:{http_port}",
        "NOCTAYA_SCALER_LISTEN_ADDR": f"127.0.0.1:{grpc_port}",
        **extra_env,
    }
    process = launch([], env, f"http://127.0.0.1:{http_port}/healthz")
    return process, http_port, grpc_port
