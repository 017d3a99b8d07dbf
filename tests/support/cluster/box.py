"""The cluster's life: `up` builds the box and its nodes, `down` takes every trace of it away.

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

from . import components, host, layout, registry
from .addons import AddonError, install_addons

_PR_SET_PDEATHSIG = 1
_POLL_SECONDS = 0.2


class ClusterError(Exception):
    """The box could not be brought up or down; the message carries the relevant log tails."""


class Cluster:
    """One box. `attached`: its processes die with this Python process (the pytest fixture);
    detached, they outlive it (`hack/cluster-up`) until `down`."""

    def __init__(
        self,
        folders: layout.Folders | None = None,
        *,
        attached: bool = True,
        nodes: tuple[layout.Node, ...] | None = None,
    ) -> None:
        self.folders = folders or layout.Folders.default()
        self.nodes = nodes or layout.default_nodes()
        self._attached = attached
        self._supervisors: dict[str, subprocess.Popen[bytes]] = {}
        self._plans: dict[str, Path] = {}
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
        host.create_private_mount_points()
        host.create_network(self.nodes)
        host.create_cgroup_root(self.nodes)
        archives = self._image_archives(programs)
        self.timings["images written"] = time.monotonic() - started
        self._plans = components.write_plans(self.folders, programs, self.nodes)
        for node in self.nodes:
            self._start_supervisor(node)
        for node in self.nodes:
            self._wait_supervisor(node, deadline)
        self.timings["components started"] = time.monotonic() - started
        self.push_images(archives)
        self.timings["images pushed"] = time.monotonic() - started
        self._wait(deadline, "every node to be Ready", self._nodes_ready)
        self.timings["nodes Ready"] = time.monotonic() - started
        core = k8s_client.CoreV1Api(self.api_client)
        for node in self.nodes:
            if node.labels:
                core.patch_node(node.name, {"metadata": {"labels": dict(node.labels)}})
        try:
            install_addons(self.api_client, programs, self.folders, deadline)
        except AddonError as error:
            raise ClusterError(self.describe_failure(str(error))) from error
        self.timings["add-ons available"] = time.monotonic() - started

    def down(self) -> None:
        """Idempotent; also takes away what a killed run left."""
        if self._api_client is not None:
            self._api_client.close()  # type: ignore[no-untyped-call]
            self._api_client = None
        self._stop_supervisors()
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

    def node(self, name: str) -> layout.Node:
        (node,) = (node for node in self.nodes if node.name == name)
        return node

    def stop_component(
        self, name: str, timeout: float = 60.0, node: layout.Node = layout.CONTROL_PLANE
    ) -> None:
        """Stops a component of a node (`kube-apiserver`, `containerd`, ...): SIGTERM, SIGKILL
        after a grace; what runs in containers is left alone."""
        self._ask(node, "stop", name, timeout)

    def start_component(
        self, name: str, timeout: float = 120.0, node: layout.Node = layout.CONTROL_PLANE
    ) -> None:
        """Starts a stopped component again with its arguments and waits for its readiness."""
        self._ask(node, "start", name, timeout)

    def restart_component(
        self, name: str, timeout: float = 120.0, node: layout.Node = layout.CONTROL_PLANE
    ) -> None:
        self._ask(node, "restart", name, timeout)

    def power_off(self, node: layout.Node) -> None:
        """The node loses power: its init is killed and with it every process on the node,
        containers included. Its disk (containerd's images, the kubelet's folder, its private
        folders) stays for `power_on`."""
        if node.holds_control_plane:
            raise ValueError("the control plane's node stays on: the box would have no API")
        self._kill_supervisor(node)

    def power_on(self, node: layout.Node, timeout: float = 120.0) -> None:
        """Boots a node that lost power: its components start again, its pods come back as the
        kubelet restarts them."""
        self._start_supervisor(node)
        self._wait_supervisor(node, time.monotonic() + timeout)

    def cut_off(self, node: layout.Node) -> None:
        """The node's network is cut: it reaches neither the other nodes nor the API server, and
        nothing reaches it; what runs on it goes on running."""
        if node.holds_control_plane:
            raise ValueError("the control plane's node stays connected: the box would have no API")
        host.set_node_link(node, up=False)

    def reconnect(self, node: layout.Node) -> None:
        host.set_node_link(node, up=True)

    def push_images(self, archives: list[Path], tag: str | None = None) -> None:
        """Pushes OCI archives to the box's registry, which every node pulls from (under `tag`
        instead of their own, if given)."""
        for archive in archives:
            registry.push_archive(archive, tag)

    def _ask(self, node: layout.Node, action: str, name: str, timeout: float) -> None:
        control = self.folders.node(node).control
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
        """The last lines of each component's log, by `node/component`."""
        tails = {}
        for log in sorted(self.folders.logs.glob("**/*.log")):
            with log.open("rb") as file:
                name = str(log.relative_to(self.folders.logs).with_suffix(""))
                tails[name] = b"".join(deque(file, maxlen=lines)).decode(errors="replace")
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

    def _start_supervisor(self, node: layout.Node) -> None:
        mine = self.folders.node(node)
        log = (mine.logs / "supervisor.log").open("ab")
        with log:
            supervisor = subprocess.Popen(
                components.supervisor_argv(node, self._plans[node.name]),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent if self._attached else None,
            )
        self._supervisors[node.name] = supervisor
        mine.state_file.unlink(missing_ok=True)
        mine.supervisor_pid.write_text(str(supervisor.pid))

    def _wait_supervisor(self, node: layout.Node, deadline: float) -> None:
        state_file = self.folders.node(node).state_file
        supervisor = self._supervisors.get(node.name)
        while not state_file.exists():
            if supervisor is not None and supervisor.poll() is not None:
                raise ClusterError(self.describe_failure(f"{node.name}'s supervisor exited"))
            if time.monotonic() > deadline:
                raise ClusterError(self.describe_failure(f"{node.name}'s components did not start"))
            time.sleep(_POLL_SECONDS)
        state = json.loads(state_file.read_text())
        if "error" in state:
            raise ClusterError(
                self.describe_failure(f"{node.name} did not start: {state['error']}")
            )

    def _wait(self, deadline: float, what: str, done: Callable[[], bool]) -> None:
        while not done():
            if time.monotonic() > deadline:
                raise ClusterError(self.describe_failure(f"timed out waiting for {what}"))
            time.sleep(_POLL_SECONDS)

    def _nodes_ready(self) -> bool:
        try:
            found = k8s_client.CoreV1Api(self.api_client).list_node(_request_timeout=5).items
        except Exception:
            return False
        ready = {
            node.metadata.name
            for node in found
            if node.metadata
            if any(
                c.type == "Ready" and c.status == "True"
                for c in (node.status and node.status.conditions) or []
            )
        }
        return ready >= {node.name for node in self.nodes}

    def _kill_supervisor(self, node: layout.Node) -> None:
        """SIGKILL to `unshare` kills the node's init (--kill-child), and with it the node."""
        supervisor = self._supervisors.pop(node.name, None)
        pid_file = self.folders.node(node).supervisor_pid
        if supervisor is not None:
            _kill(supervisor.pid)
            supervisor.wait(timeout=30)
        elif pid_file.exists():
            pid = int(pid_file.read_text())
            if _is_supervisor(pid):  # not a stranger that got the number after a reboot
                _kill(pid)

    def _stop_supervisors(self) -> None:
        """Every node's, those a killed run left with another node count included."""
        nodes = self.folders.run / "nodes"
        names = {path.name for path in nodes.iterdir()} if nodes.exists() else set()
        for name in sorted(names | set(self._supervisors)):
            self._kill_supervisor(layout.Node(int(name.rpartition("-")[2])))


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
