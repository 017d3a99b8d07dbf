"""A node's init: PID 1 of the node's own PID and mount namespaces, inside its network one.

Started by `unshare --pid --fork --kill-child --mount --mount-proc`: when this process dies, for
whatever reason, the kernel kills every process of the node and drops every mount it made, so
no kubelet, shim or container can outlive it; killing it is how a node loses power. It mounts
private tmpfs over the folders the kubelet and containerd write to without asking (/run,
/var/log) and binds the node's own folders over the host folders `hostPath` volumes use, so
each node has its own; then it starts the components in order, each once the previous one is
ready, and reaps every orphan. A component marked `restart` is started again whenever it exits,
as systemd or a DaemonSet would start it again (the kubelet, which exits when containerd's CRI
service is not ready yet; kube-router, which exits while its Node is not registered). Progress
goes to the state file; the harness on the host side reads it.

Once the box is up, it stops, starts or restarts a component on request, for tests of a control
plane or runtime restart: the host writes `<id>.json` (`{"action": ..., "component": ...}`) into
the control folder, and this process answers with `<id>.done` (`{"ok": ..., "error": ...}`)
once the component has exited or is ready again.

Standard library only: it runs as a script, with no package around it.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

_POLL_SECONDS = 0.1
_STOP_GRACE_SECONDS = 5.0
_RESTART_DELAY_SECONDS = 1.0
_MS_BIND = 4096


def main(plan_path: str) -> int:
    plan: dict[str, Any] = json.loads(Path(plan_path).read_text())
    state = Path(plan["state_file"])
    logs = Path(plan["log_dir"])
    control = Path(plan["control_dir"])
    components = {component["name"]: component for component in plan["components"]}
    children: dict[int, str] = {}
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        for target in plan["tmpfs"]:
            _mount_tmpfs(target)
        for source, target in plan["binds"]:
            _bind(source, target)
        for component in plan["components"]:
            _start(component, children, logs, lambda: stopping)
        control.mkdir(parents=True, exist_ok=True)
        state.write_text(json.dumps({"ready": True}))
    except Exception as error:
        state.write_text(json.dumps({"error": str(error)}))
        stopping = True
    restarts: dict[str, float] = {}  # component → when to start it again
    while not stopping:
        for name in _reap(children, logs):
            if components[name].get("restart"):
                restarts[name] = time.monotonic() + _RESTART_DELAY_SECONDS
        for name, due in list(restarts.items()):
            if time.monotonic() >= due and not stopping:
                del restarts[name]
                _start(components[name], children, logs, lambda: stopping)
        _serve_requests(control, components, children, logs, lambda: stopping)
        time.sleep(_POLL_SECONDS)
    _stop_all(children)
    return 0


def _start(component: dict[str, Any], children: dict[int, str], logs: Path, stopping: Any) -> None:
    name = component["name"]
    with (logs / f"{name}.log").open("ab") as log:
        process = subprocess.Popen(
            component["argv"],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=logs,
            env={**os.environ, **component.get("env", {})},
        )
    children[process.pid] = name
    _wait_ready(component, process, stopping)


def _stop(name: str, children: dict[int, str], logs: Path) -> None:
    """SIGTERM, then SIGKILL after the grace; the component's exit is noted in its log."""
    pids = [pid for pid, child in children.items() if child == name]
    if not pids:
        raise RuntimeError(f"{name} is not running")
    (pid,) = pids
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_GRACE_SECONDS
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done, status = pid, 0
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
        time.sleep(_POLL_SECONDS)
    children.pop(pid)
    with (logs / f"{name}.log").open("a") as log:
        log.write(f"==== {name} stopped on request: status {status}\n")


def _serve_requests(
    control: Path,
    components: dict[str, dict[str, Any]],
    children: dict[int, str],
    logs: Path,
    stopping: Any,
) -> None:
    """Carries out the host's stop, start and restart requests, oldest first."""
    for request in sorted(control.glob("*.json")):
        answer: dict[str, Any] = {"ok": True}
        try:
            order = json.loads(request.read_text())
            name, action = order["component"], order["action"]
            if action in ("stop", "restart"):
                _stop(name, children, logs)
            if action in ("start", "restart"):
                _start(components[name], children, logs, stopping)
            if action not in ("stop", "start", "restart"):
                raise ValueError(f"unknown action {action!r}")
        except Exception as error:
            answer = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        partial = request.with_suffix(".partial")
        partial.write_text(json.dumps(answer))
        partial.rename(request.with_suffix(".done"))
        request.unlink()


def _mount_tmpfs(target: str) -> None:
    """The syscall, not mount(8): that would write its table under the host's /run first."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"box", target.encode(), b"tmpfs", 0, None) != 0:
        raise OSError(ctypes.get_errno(), f"mounting tmpfs on {target}")


def _bind(source: str, target: str) -> None:
    if ctypes.CDLL(None, use_errno=True).mount(
        source.encode(), target.encode(), None, _MS_BIND, None
    ):
        raise OSError(ctypes.get_errno(), f"binding {source} on {target}")


def _wait_ready(component: dict[str, Any], process: subprocess.Popen[bytes], stopping: Any) -> None:
    ready = component.get("ready")
    deadline = time.monotonic() + component.get("timeout", 120)
    while ready is not None:
        if process.poll() is not None:
            raise RuntimeError(f"{component['name']} exited with code {process.returncode}")
        if stopping():
            raise RuntimeError("stopped while starting")
        if _is_ready(ready):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{component['name']} not ready ({ready}) within the deadline")
        time.sleep(_POLL_SECONDS)


def _is_ready(check: str) -> bool:
    kind, _, target = check.partition(":")
    if kind == "path":
        return Path(target).exists()
    if kind == "unix":  # a socket file a stopped process left would pass a `path` check
        try:
            with socket.socket(socket.AF_UNIX) as client:
                client.settimeout(1)
                client.connect(target)
                return True
        except OSError:
            return False
    if kind == "tcp":
        host, _, port = target.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=1):
                return True
        except OSError:
            return False
    raise ValueError(f"unknown readiness check {check!r}")


def _reap(children: dict[int, str], logs: Path) -> list[str]:
    """Collects every exited process; returns the components among them, each exit noted in the
    component's own log."""
    exited: list[str] = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return exited
        if pid == 0:
            return exited
        name = children.pop(pid, None)
        if name is not None:
            exited.append(name)
            with (logs / f"{name}.log").open("a") as log:
                log.write(f"==== {name} exited: status {status}\n")


def _stop_all(children: dict[int, str]) -> None:
    """SIGTERM the components, newest first; whatever is left dies with this process."""
    for pid in reversed(list(children)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_GRACE_SECONDS
    while children and time.monotonic() < deadline:
        for pid in list(children):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                children.pop(pid)
        time.sleep(_POLL_SECONDS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
