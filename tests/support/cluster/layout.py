"""Where the box lives and what it is built from: addresses, folders, binaries.

One box per machine: its network namespace, cgroup root and folder have fixed names, so a
second `up` (or `down`) finds what a killed run left.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..envtest import locate_binaries
from ..envtest.prerequisites import REPO_ROOT, PrerequisiteMissing, cached_folder

NAME = "noctaya-box"  # network namespace, node, cgroup root
HOST_LINK = "noctaya-box0"  # the host end of the veth pair; the box end is eth0
HOST_ADDRESS = "198.18.0.1"  # RFC 2544 benchmarking space: no real network uses it
NODE_IP = "198.18.0.2"
LINK_PREFIX = 30
POD_CIDR = "10.244.0.0/24"
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
)
CNI_BIN_DIR = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "loopback", "portmap")
BUSYBOX = Path("/bin/busybox")


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
    def control(self) -> Path:
        """Where the host asks the box's init to stop, start or restart a component."""
        return self.run / "control"

    @property
    def host_state(self) -> Path:
        """What `up` changed on the host and `down` restores; beside `run`, so `down` finds it."""
        return self.root / "host-state.json"


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
