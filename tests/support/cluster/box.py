"""The single-node cluster's life: `up` builds the box, `down` takes every trace of it away.

`up` starts with a `down`, so whatever a killed run left (a namespace, cgroups, changed kernel
settings, state files) is gone before anything new is made.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from . import components, host, layout
from .addons import AddonError, install_addons

_PR_SET_PDEATHSIG = 1
_POLL_SECONDS = 0.2
_SUPERVISOR_PID = "supervisor.pid"


class ClusterError(Exception):
    """The box could not be brought up or down; the message carries the relevant log tails."""


class Cluster:
    """One box. `attached`: its processes die with this Python process (the pytest fixture);
    detached, they outlive it (`hack/cluster-up`) until `down`."""

    def __init__(self, folders: layout.Folders | None = None, *, attached: bool = True) -> None:
        self.folders = folders or layout.Folders.default()
        self._attached = attached
        self._supervisor: subprocess.Popen[bytes] | None = None
        self._api_client: k8s_client.ApiClient | None = None
        self.timings: dict[str, float] = {}

    @property
    def kubeconfig(self) -> Path:
        return self.folders.kubeconfig

    @property
    def api_client(self) -> k8s_client.ApiClient:
        if self._api_client is None:
            self._api_client = k8s_config.new_client_from_config(  # type: ignore[no-untyped-call]
                config_file=str(self.kubeconfig), persist_config=False
            )
        return self._api_client

    def up(self, timeout: float = 300.0) -> None:
        started = time.monotonic()
        programs = layout.locate_programs()
        self.down()
        self.timings["leftovers removed"] = time.monotonic() - started
        deadline = started + timeout
        if self.folders.logs.exists():
            shutil.rmtree(self.folders.logs)
        for folder in (self.folders.logs, self.folders.run):
            folder.mkdir(parents=True)
        host.save_host_state(self.folders.host_state)
        host.create_network()
        host.create_cgroup_root()
        archives = self._image_archives(programs)
        self.timings["images written"] = time.monotonic() - started
        plan = components.write_plan(self.folders, programs, archives)
        self._start_supervisor(plan)
        self._wait_supervisor(deadline)
        self.timings["components started"] = time.monotonic() - started
        self._wait(deadline, "the node to be Ready", self._node_ready)
        self.timings["node Ready"] = time.monotonic() - started
        try:
            install_addons(self.api_client, programs, deadline)
        except AddonError as error:
            raise ClusterError(self.describe_failure(str(error))) from error
        self.timings["CoreDNS and KEDA available"] = time.monotonic() - started

    def down(self) -> None:
        """Idempotent; also takes away what a killed run left."""
        if self._api_client is not None:
            self._api_client.close()  # type: ignore[no-untyped-call]
            self._api_client = None
        self._stop_supervisor()
        deadline = time.monotonic() + 30
        while pids := host.box_pids():
            if time.monotonic() > deadline:
                raise ClusterError(f"box processes still running after 30 s: {pids}")
            for pid in pids:
                _kill(pid)
            time.sleep(_POLL_SECONDS)
        host.remove_network()
        host.remove_cgroup_root()
        host.restore_host_state(self.folders.host_state)
        shutil.rmtree(self.folders.run, ignore_errors=True)
        self.kubeconfig.unlink(missing_ok=True)

    def stop_component(self, name: str, timeout: float = 60.0) -> None:
        """Stops a component of the box (`kube-apiserver`, `containerd`, ...): SIGTERM, SIGKILL
        after a grace; what runs in containers is left alone."""
        self._ask("stop", name, timeout)

    def start_component(self, name: str, timeout: float = 120.0) -> None:
        """Starts a stopped component again with its arguments and waits for its readiness."""
        self._ask("start", name, timeout)

    def restart_component(self, name: str, timeout: float = 120.0) -> None:
        self._ask("restart", name, timeout)

    def _ask(self, action: str, name: str, timeout: float) -> None:
        control = self.folders.control
        request = control / f"{time.time_ns()}-{action}-{name}"
        partial = request.with_suffix(".partial")
        partial.write_text(json.dumps({"action": action, "component": name}))
        partial.rename(request.with_suffix(".json"))
        answer = request.with_suffix(".done")
        deadline = time.monotonic() + timeout
        while not answer.exists():
            if time.monotonic() > deadline:
                raise ClusterError(self.describe_failure(f"{action} {name}: no answer in time"))
            time.sleep(_POLL_SECONDS / 4)
        done = json.loads(answer.read_text())
        answer.unlink()
        if not done["ok"]:
            raise ClusterError(self.describe_failure(f"{action} {name}: {done['error']}"))

    def log_tails(self, lines: int = 30) -> dict[str, str]:
        tails = {}
        for log in sorted(self.folders.logs.glob("*.log")):
            with log.open("rb") as file:
                tails[log.stem] = b"".join(deque(file, maxlen=lines)).decode(errors="replace")
        return tails

    def describe_failure(self, what: str) -> str:
        tails = "\n".join(
            f"---- {name} ({self.folders.logs / name}.log)\n{tail}"
            for name, tail in self.log_tails().items()
        )
        return f"{what}\n{tails}"

    def _image_archives(self, programs: layout.Programs) -> list[Path]:
        folder = programs.cluster / "images"
        folder.mkdir(exist_ok=True)
        return [image.write_archive(folder) for image in components.box_images(programs)]

    def _start_supervisor(self, plan: Path) -> None:
        log = (self.folders.logs / "supervisor.log").open("ab")
        with log:
            self._supervisor = subprocess.Popen(
                components.supervisor_argv(plan),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent if self._attached else None,
            )
        (self.folders.run / _SUPERVISOR_PID).write_text(str(self._supervisor.pid))

    def _wait_supervisor(self, deadline: float) -> None:
        state_file = self.folders.run / "supervisor.json"
        while not state_file.exists():
            if self._supervisor is not None and self._supervisor.poll() is not None:
                raise ClusterError(self.describe_failure("the box's supervisor exited"))
            if time.monotonic() > deadline:
                raise ClusterError(self.describe_failure("the box's components did not start"))
            time.sleep(_POLL_SECONDS)
        state = json.loads(state_file.read_text())
        if "error" in state:
            raise ClusterError(self.describe_failure(f"the box did not start: {state['error']}"))

    def _wait(self, deadline: float, what: str, done: Callable[[], bool]) -> None:
        while not done():
            if time.monotonic() > deadline:
                raise ClusterError(self.describe_failure(f"timed out waiting for {what}"))
            time.sleep(_POLL_SECONDS)

    def _node_ready(self) -> bool:
        try:
            node = k8s_client.CoreV1Api(self.api_client).read_node(layout.NAME, _request_timeout=5)
        except Exception:
            return False
        conditions = (node.status and node.status.conditions) or []
        return any(c.type == "Ready" and c.status == "True" for c in conditions)

    def _stop_supervisor(self) -> None:
        """SIGKILL to `unshare` kills the box's init (--kill-child), and with it the box."""
        pid_file = self.folders.run / _SUPERVISOR_PID
        if self._supervisor is not None:
            _kill(self._supervisor.pid)
            self._supervisor.wait(timeout=30)
            self._supervisor = None
        elif pid_file.exists():
            pid = int(pid_file.read_text())
            if _is_supervisor(pid):  # not a stranger that got the number after a reboot
                _kill(pid)


def _is_supervisor(pid: int) -> bool:
    try:
        return str(components.SUPERVISOR).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
