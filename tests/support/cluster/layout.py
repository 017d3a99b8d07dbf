"""Where the box lives and what it is built from: nodes, addresses, folders, binaries.

One box per machine: its nodes' network namespaces, its cgroup root, host bridge and folder have
fixed names, so a second `up` (or `down`) finds what a killed run left.

The nodes sit on one host bridge (`HOST_LINK`, which also gives the host its address on their
network), each with its own address and its own pod range; each node routes the other nodes'
pod ranges to them, so a pod reaches a pod on another node as on a real cluster's flat network.
Node 0 also runs the control plane (etcd, API server, controller manager, scheduler) and takes
pods like the others.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..envtest import locate_binaries
from ..envtest.prerequisites import REPO_ROOT, PrerequisiteMissing, cached_folder

NAME = "noctaya-box"  # cgroup root, folder, and the prefix of node and namespace names
HOST_LINK = "noctaya-box0"  # the host's bridge the nodes' links are ports of
HOST_ADDRESS = "198.18.0.1"  # RFC 2544 benchmarking space: no real network uses it
LINK_PREFIX = 24
CLUSTER_POD_CIDR = "10.244.0.0/16"
NODE_COUNT = 3
"""Node 0 (control plane and pods) and two workers: what a drain, a node loss and a cache on one
node need, and the smallest cluster the reference's own end-to-end suite runs on."""
LOCAL_VOLUMES_FOLDER = "/opt/local-path-provisioner"
"""Where a node keeps the ReadWriteOnce volumes the box's provisioner makes there."""
NODE_PRIVATE_FOLDERS = ("/var/lib/noctaya", LOCAL_VOLUMES_FOLDER)
"""Host folders each node sees a folder of its own at (its mount namespace binds one there), so
a `hostPath` or a local volume written on one node is not seen on another: the HostPath cache's
root and the node's local volumes live here."""
SERVICE_CIDR = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
DNS_SERVICE_IP = "10.96.0.10"
CLUSTER_DOMAIN = "cluster.local"
APISERVER_PORT = 6443
BUILD_SCRIPT = REPO_ROOT / "hack" / "build-cluster.sh"
HOST_COMMANDS = (
    "containerd",
    "containerd-shim-runc-v2",
    "runc",
    "ctr",
    "ip",
    "iptables",
    "nsenter",
    "unshare",
    "mount",
    "ipset",  # kube-router's NetworkPolicy address sets
    "docker-registry",  # the box's image registry
)
BUILT = (
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kube-proxy",
    "kubectl",  # not part of the box: the e2e tests run the guide's kubectl commands with it
    "coredns",
    "keda",
    "keda-adapter",
    "box-agent",
    "keda-config",
    "kube-router",
    "local-path-provisioner",
)
CNI_BIN_DIR = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "loopback", "portmap")
BUSYBOX = Path("/bin/busybox")


@dataclass(frozen=True)
class Node:
    """One node of the box: its network namespace, link, address and pod range follow from its
    index. Its kubelet registers `taints` (`key=value:Effect`); the box sets `labels` once it is
    registered (a kubelet may not set `node-role.kubernetes.io` labels on its own node)."""

    index: int
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The Node's name, and its network namespace's."""
        return f"{NAME}-{self.index}"

    @property
    def ip(self) -> str:
        return f"198.18.0.{self.index + 2}"

    @property
    def pod_cidr(self) -> str:
        return f"10.244.{self.index}.0/24"

    @property
    def host_link(self) -> str:
        """The host end of the node's veth pair (a port of `HOST_LINK`); the node end is eth0."""
        return f"{HOST_LINK}-{self.index}"

    @property
    def holds_control_plane(self) -> bool:
        return self.index == 0


def default_nodes(count: int = NODE_COUNT) -> tuple[Node, ...]:
    control_plane = (("node-role.kubernetes.io/control-plane", ""),)
    return tuple(Node(i, labels=control_plane if i == 0 else ()) for i in range(count))


CONTROL_PLANE = Node(0)
NODE_IP = CONTROL_PLANE.ip
"""The API server's address, and the address the tests serve their registries at: pods on every
node reach it over the nodes' network, the host over its bridge."""


class ClusterPrerequisiteMissing(PrerequisiteMissing):
    """A program the box needs is missing; the message names the command that provides it."""


@dataclass(frozen=True)
class Folders:
    """`root` holds the kubeconfig, `logs` (kept after `down`) and `run` (removed by `down`)."""

    root: Path

    @classmethod
    def default(cls) -> Folders:
        return cls(Path(os.environ.get("NOCTAYA_BOX_DIR") or Path(tempfile.gettempdir()) / NAME))

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def shared_volumes(self) -> Path:
        """The ReadWriteMany volumes' folder: a host folder, so every node sees the same one."""
        return self.run / "shared-volumes"

    def node(self, node: Node | str) -> NodeFolders:
        name = node if isinstance(node, str) else node.name
        return NodeFolders(self.run / "nodes" / name, self.logs / name)

    @property
    def host_state(self) -> Path:
        """What `up` changed on the host and `down` restores; beside `run`, so `down` finds it."""
        return self.root / "host-state.json"


@dataclass(frozen=True)
class NodeFolders:
    """A node's state (its containerd, kubelet and private folders) and its components' logs."""

    root: Path
    logs: Path

    @property
    def containerd_socket(self) -> Path:
        return self.root / "containerd.sock"

    @property
    def control(self) -> Path:
        """Where the host asks the node's init to stop, start or restart a component."""
        return self.root / "control"

    @property
    def state_file(self) -> Path:
        """Written by the node's init once its components started, or with why they did not."""
        return self.root / "supervisor.json"

    @property
    def supervisor_pid(self) -> Path:
        return self.root / "supervisor.pid"

    def private(self, host_folder: str) -> Path:
        """What the node sees at `host_folder` (one of NODE_PRIVATE_FOLDERS)."""
        return self.root / "private" / host_folder.strip("/").replace("/", "-")

    def host_path(self, path: str) -> Path:
        """Where the host finds what the node (a `hostPath` volume) sees at `path`."""
        for folder in NODE_PRIVATE_FOLDERS:
            if Path(path).is_relative_to(folder):
                return self.private(folder) / Path(path).relative_to(folder)
        return Path(path)


@dataclass(frozen=True)
class Programs:
    """The built binaries (control plane, cluster components, KEDA) folders."""

    control_plane: Path
    cluster: Path

    def path(self, name: str) -> Path:
        folder = self.control_plane if name in {"etcd", "kube-apiserver"} else self.cluster
        return folder / name


def locate_programs() -> Programs:
    """The box's binaries and host commands, or PrerequisiteMissing naming what provides them."""
    control_plane = locate_binaries().etcd.parent
    cluster = cached_folder(BUILD_SCRIPT)
    absent = [name for name in BUILT if not (cluster / name).exists()]
    if absent:
        raise ClusterPrerequisiteMissing(
            f"cluster programs not built ({', '.join(absent)} missing in {cluster}); "
            "run `bash hack/build-cluster.sh` (or `make cluster`) first"
        )
    missing = [name for name in HOST_COMMANDS if shutil.which(name) is None]
    missing += [str(CNI_BIN_DIR / p) for p in CNI_PLUGINS if not (CNI_BIN_DIR / p).exists()]
    missing += [str(BUSYBOX)] if not BUSYBOX.exists() else []
    if missing:
        raise ClusterPrerequisiteMissing(
            f"host packages missing ({', '.join(missing)}); run `bash hack/install-cluster-deps.sh`"
            " (or `make cluster-deps`) as root"
        )
    if os.geteuid() != 0:
        raise ClusterPrerequisiteMissing("the box needs root (network namespaces, mounts, cgroups)")
    return Programs(control_plane=control_plane, cluster=cluster)
