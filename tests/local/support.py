"""Local-mode test support: manifests written to tmp_path and `noctaya-local` as a real process.

`LocalMode` reads the process's output on a thread and answers "has this line appeared yet?"
with a deadline, so tests wait for events instead of sleeping.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from noctaya.core.plugins import VendorRegistry
from noctaya.local import log_lines
from noctaya.local.manifest import read_manifest
from noctaya.local.plan import LocalPlan, plan_local
from noctaya.local.sources import combine

DEADLINE = 30.0
LISTEN = ("--listen", "127.0.0.1:0")
SCALE_DOWN_WITHIN = 45.0
"""The gateway holds demand 15 s after readiness (activation grace), then the 1 s cooldown runs."""


def runtime_doc(
    port: int,
    *,
    name: str = "stub",
    command: str | None = "noctaya-engine-stub",
    env: dict[str, str] | None = None,
    grace: int = 5,
    **spec: Any,
) -> dict[str, Any]:
    """An InferenceRuntime whose engine is the stub listening on 127.0.0.1:`port`."""
    annotations = {} if command is None else {"serving.noctaya.io/local-command": command}
    stub_env = {
        "STUB_LISTEN_ADDR": f"127.0.0.1:{port}",
        "STUB_STARTUP_DELAY": "300ms",
        "STUB_TOKEN_COUNT": "3",
        "STUB_TOKEN_DELAY": "10ms",
        **(env or {}),
    }
    return {
        "apiVersion": "serving.noctaya.io/v1alpha1",
        "kind": "InferenceRuntime",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "vendor": "nvidia",
            "container": {
                "image": "example.invalid/vllm-stub:test",
                "args": ["--model={{ .Model.Path }}", "--served-model-name={{ .Service.Name }}"],
                "env": [{"name": key, "value": value} for key, value in stub_env.items()],
                "port": {"containerPort": port},
            },
            "accelerator": {"resourceName": "nvidia.com/gpu"},
            "lifecycle": {"terminationGracePeriodSeconds": grace},
            **spec,
        },
    }


def service_doc(runtime: str = "stub", **spec: Any) -> dict[str, Any]:
    scaling = {"target": 1, "activationTimeout": "30s", "scaleDownStabilization": "1s"}
    return {
        "apiVersion": "serving.noctaya.io/v1alpha1",
        "kind": "LLMService",
        "metadata": {"name": "svc"},
        "spec": {
            "model": {"source": {"uri": "hf://org/model"}},
            "runtime": {"name": runtime},
            "scaling": scaling,
            "endpoint": {"coldStart": {"mode": "keepalive", "heartbeatInterval": "200ms"}},
            **spec,
        },
    }


def write_manifest(path: Path, *documents: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False), encoding="utf-8")
    return path


def plan_file(path: Path, **options: Any) -> LocalPlan:
    """The one service of `path`, planned over the runtimes of that file."""
    manifests = combine([read_manifest(path)])
    (served,) = manifests.services
    return plan_local(served, manifests.runtimes, vendors=VendorRegistry.discover(), **options)


def pid_exists(pid: int) -> bool:
    """True while `pid` names a process that has not been reaped (zombies count as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_until_gone(pid: int, within: float = DEADLINE) -> bool:
    return wait_until(lambda: not pid_exists(pid), within)


def wait_until(condition: Callable[[], bool], within: float = DEADLINE) -> bool:
    """Poll `condition` until it holds (True) or `within` seconds pass (False)."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def engine_refuses_connections(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def assert_scales_back_to_zero(local: LocalMode, pid: int, port: int) -> None:
    """The engine `pid`, the only one started, stops by itself once demand is gone and leaves
    its port closed."""
    stopped = local.wait_for(log_lines.ENGINE_STOPPED_RE, within=SCALE_DOWN_WITHIN)
    assert int(stopped["pid"]) == pid
    assert wait_until_gone(pid, within=5)
    assert engine_refuses_connections(port)
    assert local.count(log_lines.ENGINE_STARTED_RE) == 1


def port_is_free(port: int) -> bool:
    """Nothing listens on 127.0.0.1:`port` and it can be bound again."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def output_holder(pid_file: Path) -> str:
    """Shell words that start a process in a session of its own which keeps the caller's stdout
    open for minutes, writing its pid to `pid_file` (for the test to end it)."""
    code = (
        "import os, sys, time; os.setsid(); "
        "open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(300)"
    )
    return shlex.join([sys.executable, "-c", code, str(pid_file)])


def kill_pid_in(pid_file: Path) -> None:
    """End the process whose pid a test helper wrote to `pid_file`, if it ever started."""
    with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
        os.kill(int(pid_file.read_text(encoding="utf-8")), signal.SIGKILL)


class LocalMode:
    """`python -m noctaya.local FILE --listen 127.0.0.1:0` with its output collected, and
    the services' logs in a folder of its own (`logs`)."""

    def __init__(
        self, manifest: Path | list[Path], *args: str, env: dict[str, str] | None = None
    ) -> None:
        paths = manifest if isinstance(manifest, list) else [manifest]
        self.logs = Path(tempfile.mkdtemp(prefix="noctaya-local-logs-"))
        command = [sys.executable, "-m", "noctaya.local", *map(str, paths), *LISTEN]
        self.process = subprocess.Popen(
            [*command, "--logs", str(self.logs), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(
        self, pattern: re.Pattern[str], *, after: int = 0, within: float = DEADLINE
    ) -> re.Match[str]:
        """The first line from index `after` on that matches; AssertionError at the deadline."""
        deadline = time.monotonic() + within
        with self._changed:
            while True:
                for line in self.lines[after:]:
                    if match := pattern.search(line):
                        return match
                left = deadline - time.monotonic()
                if left <= 0 or (self.process.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(f"no line matching {pattern.pattern!r}:\n" + self.log())
                self._changed.wait(timeout=min(left, 0.5))

    def count(self, pattern: re.Pattern[str]) -> int:
        with self._changed:
            return sum(1 for line in self.lines if pattern.search(line))

    def url(self) -> str:
        """The endpoint, once the first service serves."""
        return self.wait_for(log_lines.SERVING_RE)["url"]

    def log(self) -> str:
        with self._changed:
            return "\n".join(self.lines)

    def stop(self, sig: signal.Signals = signal.SIGTERM, within: float = DEADLINE) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=within)
        finally:
            self._reader.join(timeout=5)

    def exit_code(self, within: float = DEADLINE) -> int:
        """The exit code of a process expected to end on its own."""
        try:
            return self.process.wait(timeout=within)
        finally:
            self._reader.join(timeout=5)

    def child_pids(self) -> list[int]:
        patterns = (log_lines.GATEWAY_STARTED_RE, log_lines.ENGINE_STARTED_RE)
        with self._changed:
            return [
                int(match["pid"])
                for line in self.lines
                for pattern in patterns
                if (match := pattern.search(line))
            ]

    def teardown(self) -> None:
        """Stop as a user would; if that fails, kill local mode and every group it started."""
        try:
            self.stop(within=DEADLINE)
            shutil.rmtree(self.logs, ignore_errors=True)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            for pid in self.child_pids():
                if pid_exists(pid):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(pid, signal.SIGKILL)
            raise
