"""What the box changes on the host, and taking it back: the nodes' network namespaces, their
veth pairs and the bridge joining them, the kubelets' cgroup root, the mount points of the
nodes' private folders, and the kernel settings the kubelet sets machine-wide.

Processes and mounts need no sweeping here: they live in the nodes' own PID and mount
namespaces and end with their inits (see supervisor.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

from . import layout

NETNS_DIR = Path("/run/netns")
CGROUP_FS = Path("/sys/fs/cgroup")
# Set by the kubelet for the whole machine (not per network namespace); restored by `down`.
KERNEL_SETTINGS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
)
_PROC_SYS = Path("/proc/sys")
_CGROUP_REMOVE_SECONDS = 10.0
_CLONE_NEWNET = 0x40000000


class HostError(Exception):
    """A host change could not be made or taken back; the message names the command."""


def run(*argv: str) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise HostError(f"`{' '.join(argv)}` failed: {result.stderr.strip()}")
    return result.stdout


def netns_path(node: layout.Node = layout.CONTROL_PLANE) -> Path:
    return NETNS_DIR / node.name


def connect_in_box(
    address: tuple[str, int],
    timeout: float,
    node: layout.Node = layout.CONTROL_PLANE,
    netns: Path | None = None,
) -> socket.socket:
    """A TCP connection made from inside a node's network namespace, as a pod on the node
    would make it: to a Service IP (kube-proxy's rules live there) without the API server.

    `netns` names another network namespace to connect from (a pod's: `/proc/<pid>/ns/net` of
    one of its processes). The namespace is entered by a thread of its own, which then ends:
    only that thread ever changes namespace, and the socket keeps the one it was made in.
    """
    made: list[socket.socket | BaseException] = []

    def connect() -> None:
        try:
            descriptor = os.open(netns or netns_path(node), os.O_RDONLY)
            try:
                if ctypes.CDLL(None, use_errno=True).setns(descriptor, _CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns into the box's network namespace")
            finally:
                os.close(descriptor)
            made.append(socket.create_connection(address, timeout=timeout))
        except BaseException as error:
            made.append(error)

    thread = threading.Thread(target=connect, name="box connection")
    thread.start()
    thread.join()
    (result,) = made
    if isinstance(result, BaseException):
        raise result
    return result


def save_host_state(path: Path) -> None:
    """Records what `down` restores; kept if present, since then it predates a killed run."""
    if path.exists():
        return
    state = {
        "kernel": {name: (_PROC_SYS / name).read_text().strip() for name in KERNEL_SETTINGS},
        "netns_dir_existed": NETNS_DIR.exists(),
        "private_folders_made": [
            folder for folder in layout.NODE_PRIVATE_FOLDERS if not Path(folder).exists()
        ],
    }
    path.write_text(json.dumps(state))


def create_private_mount_points() -> None:
    """The host folders the nodes bind their own folders over must exist; `down` removes those
    it made (recorded by save_host_state)."""
    for folder in layout.NODE_PRIVATE_FOLDERS:
        Path(folder).mkdir(parents=True, exist_ok=True)


def create_network(nodes: tuple[layout.Node, ...]) -> None:
    """The host bridge, and per node a network namespace with a veth port on it, routes to the
    other nodes' pod ranges, and no route out of the box."""
    run("ip", "link", "add", layout.HOST_LINK, "type", "bridge")
    run("ip", "addr", "add", f"{layout.HOST_ADDRESS}/{layout.LINK_PREFIX}", "dev", layout.HOST_LINK)
    run("ip", "link", "set", layout.HOST_LINK, "up")
    for node in nodes:
        _create_node_network(node, nodes)


def _create_node_network(node: layout.Node, nodes: tuple[layout.Node, ...]) -> None:
    name, box = node.name, ["ip", "-n", node.name]
    run("ip", "netns", "add", name)
    run("ip", "link", "add", node.host_link, "type", "veth", "peer", "name", "eth0", "netns", name)
    run("ip", "link", "set", node.host_link, "master", layout.HOST_LINK, "up")
    run(*box, "addr", "add", f"{node.ip}/{layout.LINK_PREFIX}", "dev", "eth0")
    run(*box, "link", "set", "lo", "up")
    run(*box, "link", "set", "eth0", "up")
    for other in nodes:
        if other != node:
            run(*box, "route", "add", other.pod_cidr, "via", other.ip)
    # Service IPs need a route for the node's own connections (kube-proxy rewrites them after
    # the routing decision); a bridge without ports drops whatever no Service claims.
    run(*box, "link", "add", "services", "type", "bridge")
    run(*box, "link", "set", "services", "up")
    run(*box, "route", "add", layout.SERVICE_CIDR, "dev", "services")
    for setting in ("net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables"):
        run("nsenter", f"--net={netns_path(node)}", "sh", "-c", f"echo 1 > /proc/sys/{setting}")


def set_node_link(node: layout.Node, up: bool) -> None:
    """Cuts a node off the others and the control plane (its port on the host bridge down), or
    joins it again; what runs on it goes on running."""
    run("ip", "link", "set", node.host_link, "up" if up else "down")


def create_cgroup_root(nodes: tuple[layout.Node, ...]) -> None:
    """The box's cgroup root and each kubelet's cgroupRoot below it, in every v1 hierarchy,
    cpuset filled in so tasks may join."""
    for hierarchy in _hierarchies():
        root = hierarchy / layout.NAME
        for folder in (root, *(root / node.name for node in nodes)):
            folder.mkdir(exist_ok=True)
            for name in ("cpuset.cpus", "cpuset.mems"):
                if (hierarchy / name).exists():
                    (folder / name).write_text((hierarchy / name).read_text())


def box_namespaces() -> list[str]:
    """The nodes' network namespaces, those of a killed run with another node count included
    (and the single namespace of boxes before nodes had their own)."""
    if not NETNS_DIR.exists():
        return []
    return sorted(
        name
        for name in os.listdir(NETNS_DIR)
        if name == layout.NAME or name.startswith(f"{layout.NAME}-")
    )


def box_links() -> list[str]:
    """The host bridge and the nodes' veth ends on it."""
    return sorted(
        name
        for name in os.listdir("/sys/class/net")
        if name == layout.HOST_LINK or name.startswith(f"{layout.HOST_LINK}-")
    )


def box_pids() -> list[int]:
    """Processes still in the box: in a node's network namespace or under the cgroup root."""
    namespaces = set()
    for name in box_namespaces():
        try:
            namespaces.add(os.stat(NETNS_DIR / name).st_ino)
        except FileNotFoundError:
            continue
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            in_ns = os.stat(entry / "ns" / "net").st_ino in namespaces
            cgroups = (entry / "cgroup").read_text()
        except OSError:
            continue
        if in_ns or f":/{layout.NAME}/" in cgroups or cgroups.rstrip().endswith(f":/{layout.NAME}"):
            found.append(int(entry.name))
    return found


def remove_network() -> None:
    """Deletes the veth ends and the bridge first: with only a namespace gone, the kernel takes
    the host end away later, in the background. That background removal (of a namespace an
    earlier, killed run left) can take a link between our check and our delete, so a link
    already gone counts as removed."""
    for name in reversed(box_links()):  # the nodes' ends, then the bridge
        link = Path("/sys/class/net", name)
        try:
            run("ip", "link", "delete", name)
        except HostError:
            if link.exists():
                raise
    for name in box_namespaces():
        run("ip", "netns", "delete", name)


def remove_cgroup_root() -> None:
    """Removes the cgroup tree deepest first; a cgroup whose last task just died may still be
    busy for a moment, hence the retries."""
    deadline = time.monotonic() + _CGROUP_REMOVE_SECONDS
    for hierarchy in _hierarchies():
        root = hierarchy / layout.NAME
        if not root.exists():
            continue
        folders = sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
        for folder in [*folders, root]:
            while True:
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as error:
                    if time.monotonic() > deadline:
                        raise HostError(f"cannot remove cgroup {folder}: {error}") from error
                    time.sleep(0.1)


def restore_host_state(path: Path) -> None:
    if not path.exists():
        return
    state = json.loads(path.read_text())
    for name, value in state["kernel"].items():
        (_PROC_SYS / name).write_text(value)
    for folder in state.get("private_folders_made", []):
        with contextlib.suppress(OSError):  # kept if something was put there since
            Path(folder).rmdir()
    if not state["netns_dir_existed"] and NETNS_DIR.exists() and not any(NETNS_DIR.iterdir()):
        # `ip netns add` made the folder a mount point of itself. The syscall, not umount(8),
        # which would leave its own /run/mount behind.
        ctypes.CDLL(None, use_errno=True).umount2(str(NETNS_DIR).encode(), 0)
        NETNS_DIR.rmdir()
    path.unlink()


def _hierarchies() -> list[Path]:
    """Mounted cgroup hierarchies: the v1 ones, and the v2 one of a hybrid set-up, where runc
    also makes a folder for each container."""
    mounted = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" - ")
        if len(fields) == 2 and fields[1].startswith(("cgroup ", "cgroup2 ")):
            mounted.append(Path(fields[0].split()[4]))
    return mounted
