"""Starting the measured processes (engine stub, gateway, reference proxies) and reading RSS."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Process:
    popen: subprocess.Popen[bytes]
    url: str

    def rss_mib(self) -> float:
        status = Path(f"/proc/{self.popen.pid}/status").read_text()
        match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
        assert match, "no VmRSS"
        return int(match.group(1)) / 1024

    def cpu_seconds(self) -> float:
        """User + system CPU time the process has used so far."""
        fields = Path(f"/proc/{self.popen.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def launch(
    command: list[str], env: dict[str, str], url: str, ready_path: str, log: Path | None = None
) -> Process:
    """Start `command` and wait until `url + ready_path` answers (any HTTP status).

    Its output goes to `log` when given, else to the terminal with BENCH_VERBOSE, else nowhere.
    """
    if log is not None:
        with log.open("wb") as output:
            popen = subprocess.Popen(
                command, env={**os.environ, **env}, stdout=output, stderr=subprocess.STDOUT
            )
    else:
        popen = subprocess.Popen(
            command,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=None if os.environ.get("BENCH_VERBOSE") else subprocess.DEVNULL,
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if popen.poll() is not None:
            raise RuntimeError(f"{command[0]} exited with {popen.returncode}")
        try:
            with urllib.request.urlopen(url + ready_path, timeout=1):
                return Process(popen, url)
        except urllib.error.HTTPError:
            return Process(popen, url)
        except OSError:
            time.sleep(0.05)
    popen.kill()
    raise RuntimeError(f"{command[0]} did not start")


def engine(host: str = "127.0.0.1", **env: str) -> Process:
    port = free_port()
    settings = {"STUB_LISTEN_ADDR": f"{host}:{port}", "STUB_TOKEN_DELAY": "0s", **env}
    url = f"http://{host}:{port}"
    return launch([str(BIN / "noctaya-engine-stub")], settings, url, "/metrics")


def gateway(
    backend: str, log: Path | None = None, command: list[str] | None = None, **env: str
) -> Process:
    """The gateway in front of `backend`; `command` runs it some other way (e.g. profiled)."""
    port = free_port()
    settings = {
        "NOCTAYA_BACKEND_URL": backend,
        "NOCTAYA_LISTEN_ADDR": f"127.0.0.1:{port}",
        "NOCTAYA_SCALER_LISTEN_ADDR": f"127.0.0.1:{free_port()}",
        "NOCTAYA_MAX_QUEUE": "10000",
        **env,
    }
    url = f"http://127.0.0.1:{port}"
    return launch(command or [str(BIN / "noctaya-gateway")], settings, url, "/healthz", log)


def reference_proxy(client: str, backend: str, *, gateway_server: bool = False) -> Process:
    """A bare hypercorn proxy using `client` upstream: what the choice of client costs
    (`gateway_server`: hypercorn with the gateway's changes to it)."""
    port = free_port()
    command = [sys.executable, "-m", "benchmarks.gateway.client_choice", client, str(port), backend]
    env = {"BENCH_GATEWAY_SERVER": "1"} if gateway_server else {}
    return launch(command, env, f"http://127.0.0.1:{port}", "/__ping")
