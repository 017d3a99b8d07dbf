"""The box's components: their configuration files and the order each node's supervisor starts
them.

Each node's components run inside that node's namespaces; the API server listens on node 0's
address, which the other nodes and the host reach over the host bridge. Every component
authenticates with the one admin certificate: the box tests the cluster's behaviour, not its
authorization set-up.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

from ..envtest.pki import ADMIN_USER, Pki, write_pki
from . import images, layout, registry
from .images import Image

APISERVER = f"https://{layout.NODE_IP}:{layout.APISERVER_PORT}"
SUPERVISOR = Path(__file__).with_name("supervisor.py")
BOX_IMAGE = "noctaya.local/box:latest"
COREDNS_IMAGE = "noctaya.local/coredns:latest"
KEDA_IMAGE = "noctaya.local/keda:latest"
LOCAL_PATH_IMAGE = "noctaya.local/local-path-provisioner:latest"
_NONROOT = "1000:1000"
NODE_MONITOR_GRACE = 20
"""Seconds without a kubelet's lease renewal (every 10 s) before its node is marked unreachable."""
UNREACHABLE_TOLERATION = 30
"""Seconds a pod stays bound to an unreachable or not ready node before it is evicted."""


def box_images(programs: layout.Programs) -> list[Image]:
    """The test image (busybox and box-agent; its entrypoint is the sandbox's pause; also the
    storage provisioner's helper pods' image), CoreDNS's, KEDA's and local-path-provisioner's,
    each made from the built binaries."""
    return [
        Image(
            BOX_IMAGE,
            files={"/bin/busybox": layout.BUSYBOX, "/box-agent": programs.path("box-agent")},
            links=images.busybox_links(),
            entrypoint=("/box-agent", "pause"),
        ),
        Image(
            COREDNS_IMAGE, files={"/coredns": programs.path("coredns")}, entrypoint=("/coredns",)
        ),
        Image(
            KEDA_IMAGE,
            files={
                "/keda": programs.path("keda"),
                "/keda-adapter": programs.path("keda-adapter"),
            },
            entrypoint=("/keda",),
            user=_NONROOT,
        ),
        Image(
            LOCAL_PATH_IMAGE,
            files={"/local-path-provisioner": programs.path("local-path-provisioner")},
            entrypoint=("/local-path-provisioner",),
        ),
    ]


def write_plans(
    folders: layout.Folders,
    programs: layout.Programs,
    nodes: tuple[layout.Node, ...],
) -> dict[str, Path]:
    """Writes PKI, kubeconfig and each node's configuration files; returns each node's plan,
    by node name, for its supervisor."""
    pki = write_pki(
        folders.run / "pki",
        serving_ips=("127.0.0.1", layout.NODE_IP, layout.KUBERNETES_SERVICE_IP),
        serving_names=(
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            f"kubernetes.default.svc.{layout.CLUSTER_DOMAIN}",
        ),
    )
    _write_kubeconfig(folders.kubeconfig, pki)
    return {node.name: _write_node_plan(folders, programs, pki, node) for node in nodes}


def _write_node_plan(
    folders: layout.Folders,
    programs: layout.Programs,
    pki: Pki,
    node: layout.Node,
) -> Path:
    mine = folders.node(node)
    root, socket, kubeconfig = mine.root, mine.containerd_socket, str(folders.kubeconfig)
    _write(root / "containerd.toml", _containerd_config(root, socket))
    registry.write_mirrors(root / "registry-hosts")
    _write(root / "cni" / "10-box.conflist", json.dumps(_cni_config(root, node), indent=2))
    _write(root / "resolv.conf", "")
    _write(root / "kubelet.yaml", yaml.safe_dump(_kubelet_config(root, socket, pki, node)))
    _write(root / "kube-proxy.yaml", yaml.safe_dump(_proxy_config(kubeconfig, node)))
    for folder in layout.NODE_PRIVATE_FOLDERS:
        mine.private(folder).mkdir(parents=True, exist_ok=True)
    mine.logs.mkdir(parents=True, exist_ok=True)
    containerd = {
        "name": "containerd",
        "argv": ["containerd", f"--config={root / 'containerd.toml'}"],
        "ready": f"unix:{socket}",
    }
    control_plane = (
        [registry.registry_component(folders), *_control_plane(folders, programs, pki)]
        if node.holds_control_plane
        else []
    )
    kubelet = [
        str(programs.path("kubelet")),
        f"--config={root / 'kubelet.yaml'}",
        f"--kubeconfig={kubeconfig}",
        f"--root-dir={root / 'kubelet'}",
        f"--hostname-override={node.name}",
        f"--node-ip={node.ip}",
    ]
    if node.taints:
        kubelet.append("--register-with-taints=" + ",".join(node.taints))
    plan = {
        "state_file": str(mine.state_file),
        "log_dir": str(mine.logs),
        "control_dir": str(mine.control),
        # Private to the node's mount namespace: what the kubelet and containerd write there
        # without asking (log links, shim sockets and fifos) never reaches the host or another
        # node.
        "tmpfs": ["/run", "/var/log"],
        "binds": [[str(mine.private(folder)), folder] for folder in layout.NODE_PRIVATE_FOLDERS],
        "components": [
            containerd,
            *control_plane,
            # Restarted when it exits, as systemd restarts it on a real node: after a power
            # cut containerd's socket answers before its CRI service is ready, and the kubelet
            # gives up on a runtime that is not ready yet.
            {"name": "kubelet", "argv": kubelet, "restart": True},
            {
                "name": "kube-proxy",
                "argv": [str(programs.path("kube-proxy")), f"--config={root / 'kube-proxy.yaml'}"],
            },
            _network_policy_enforcer(programs, kubeconfig, node),
        ],
    }
    path = root / "plan.json"
    _write(path, json.dumps(plan, indent=2))
    return path


def _network_policy_enforcer(
    programs: layout.Programs, kubeconfig: str, node: layout.Node
) -> dict[str, Any]:
    """kube-router with only its firewall controller: it turns each NetworkPolicy into iptables
    chains and ipsets for the pods of its own node, as its DaemonSet pod would on a real
    node. It exits until the kubelet has registered the Node, so the supervisor restarts it."""
    return {
        "name": "kube-router",
        "argv": [
            str(programs.path("kube-router")),
            f"--kubeconfig={kubeconfig}",
            f"--hostname-override={node.name}",
            f"--service-cluster-ip-range={layout.SERVICE_CIDR}",
            "--run-firewall=true",
            "--run-router=false",
            "--run-service-proxy=false",
            "--health-port=0",
            "--metrics-port=0",
        ],
        "env": {"NODE_NAME": node.name},
        "restart": True,
    }


def _control_plane(
    folders: layout.Folders, programs: layout.Programs, pki: Pki
) -> list[dict[str, Any]]:
    kubeconfig = str(folders.kubeconfig)
    return [
        {
            "name": "etcd",
            "argv": _etcd_argv(programs, folders.run),
            "ready": "tcp:127.0.0.1:2379",
        },
        {
            "name": "kube-apiserver",
            "argv": _apiserver_argv(programs, pki),
            "ready": f"tcp:127.0.0.1:{layout.APISERVER_PORT}",
        },
        {
            "name": "kube-controller-manager",
            "argv": _controller_manager_argv(programs, kubeconfig, pki),
        },
        {
            "name": "kube-scheduler",
            "argv": [
                str(programs.path("kube-scheduler")),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
            ],
        },
    ]


def supervisor_argv(node: layout.Node, plan: Path) -> list[str]:
    """A node's init, started in the node's network namespace and new PID and mount ones."""
    return [
        "nsenter",
        f"--net=/run/netns/{node.name}",
        "unshare",
        "--pid",
        "--fork",
        "--kill-child",
        "--mount",
        "--mount-proc",
        "--propagation=private",
        sys.executable,
        str(SUPERVISOR),
        str(plan),
    ]


def _etcd_argv(programs: layout.Programs, run: Path) -> list[str]:
    return [
        str(programs.path("etcd")),
        "--name=noctaya-box",
        f"--data-dir={run / 'etcd'}",
        "--listen-client-urls=http://127.0.0.1:2379",
        "--advertise-client-urls=http://127.0.0.1:2379",
        "--listen-peer-urls=http://127.0.0.1:2380",
        "--initial-advertise-peer-urls=http://127.0.0.1:2380",
        "--initial-cluster=noctaya-box=http://127.0.0.1:2380",
        "--unsafe-no-fsync=true",
        "--log-level=warn",
    ]


def _apiserver_argv(programs: layout.Programs, pki: Pki) -> list[str]:
    return [
        str(programs.path("kube-apiserver")),
        "--etcd-servers=http://127.0.0.1:2379",
        "--bind-address=0.0.0.0",
        f"--advertise-address={layout.NODE_IP}",
        f"--secure-port={layout.APISERVER_PORT}",
        f"--tls-cert-file={pki.serving_cert}",
        f"--tls-private-key-file={pki.serving_key}",
        f"--client-ca-file={pki.ca_cert}",
        f"--service-account-issuer=https://kubernetes.default.svc.{layout.CLUSTER_DOMAIN}",
        f"--service-account-key-file={pki.service_account_public_key}",
        f"--service-account-signing-key-file={pki.service_account_key}",
        f"--service-cluster-ip-range={layout.SERVICE_CIDR}",
        "--authorization-mode=Node,RBAC",
        "--allow-privileged=true",
        "--profiling=false",
        "--kubelet-preferred-address-types=InternalIP",
        f"--kubelet-client-certificate={pki.admin_cert}",
        f"--kubelet-client-key={pki.admin_key}",
        # The aggregation layer (KEDA's metrics API server): the API server proxies as the
        # admin identity, which the extension server trusts through the request-header CA.
        f"--proxy-client-cert-file={pki.admin_cert}",
        f"--proxy-client-key-file={pki.admin_key}",
        f"--requestheader-client-ca-file={pki.ca_cert}",
        f"--requestheader-allowed-names={ADMIN_USER}",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        "--enable-aggregator-routing=true",
        # How long a pod stays on a node marked unreachable or not ready (default 300 s):
        # what a cluster admin shortens where failover matters more than riding out a blip.
        f"--default-not-ready-toleration-seconds={UNREACHABLE_TOLERATION}",
        f"--default-unreachable-toleration-seconds={UNREACHABLE_TOLERATION}",
    ]


def _controller_manager_argv(programs: layout.Programs, kubeconfig: str, pki: Pki) -> list[str]:
    return [
        str(programs.path("kube-controller-manager")),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        f"--service-account-private-key-file={pki.service_account_key}",
        f"--root-ca-file={pki.ca_cert}",
        f"--service-cluster-ip-range={layout.SERVICE_CIDR}",
        # KEDA's HPA acts within seconds instead of the default 15 s.
        "--horizontal-pod-autoscaler-sync-period=2s",
        # A node silent for NODE_MONITOR_GRACE is marked unreachable (default 40 s): the
        # node-loss tests wait for that, then for the pods' toleration of it.
        f"--node-monitor-grace-period={NODE_MONITOR_GRACE}s",
    ]


def _containerd_config(run: Path, socket: Path) -> str:
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return "\n".join(
        [
            "version = 2",
            f'root = "{run / "containerd" / "root"}"',
            f'state = "{run / "containerd" / "state"}"',
            "[grpc]",
            f'  address = "{socket}"',
            '[plugins."io.containerd.internal.v1.opt"]',
            f'  path = "{run / "containerd" / "opt"}"',
            f"[{cri}]",
            f'  sandbox_image = "{BOX_IMAGE}"',
            "  netns_mounts_under_state_dir = true",
            "  enable_selinux = false",
            # Lowering oom_score_adj is refused here even to root (runc's pause fails with
            # "failed to update /proc/self/oom_score_adj"); keep containers at or above ours.
            "  restrict_oom_score_adj = true",
            f"[{cri}.containerd]",
            '  snapshotter = "overlayfs"',
            '  default_runtime_name = "runc"',
            f"[{cri}.containerd.runtimes.runc]",
            '  runtime_type = "io.containerd.runc.v2"',
            f"[{cri}.containerd.runtimes.runc.options]",
            "  SystemdCgroup = false",
            f'  BinaryName = "{shutil.which("runc")}"',
            f"[{cri}.registry]",
            f'  config_path = "{run / "registry-hosts"}"',
            f"[{cri}.cni]",
            f'  bin_dir = "{layout.CNI_BIN_DIR}"',
            f'  conf_dir = "{run / "cni"}"',
            "",
        ]
    )


def _cni_config(run: Path, node: layout.Node) -> dict[str, Any]:
    """Pod addresses are recorded under the node's folder, which `down` removes: host-local's
    default, a folder under /var/lib, outlived every box, and the addresses of pods a box took
    down with it were never given back (after a few runs: no IP addresses available)."""
    return {
        "cniVersion": "0.4.0",
        "name": "box",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(run / "cni-ipam"),
                    "ranges": [[{"subnet": node.pod_cidr}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def _kubelet_config(run: Path, socket: Path, pki: Pki, node: layout.Node) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # This machine has cgroup v1; the kubelet refuses it unless told otherwise.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{layout.NAME}/{node.name}",
        "containerRuntimeEndpoint": f"unix://{socket}",
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(pki.ca_cert)},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "clusterDNS": [layout.DNS_SERVICE_IP],
        "clusterDomain": layout.CLUSTER_DOMAIN,
        "resolvConf": str(run / "resolv.conf"),
        "failSwapOn": False,
        "healthzBindAddress": "127.0.0.1",
        "readOnlyPort": 0,
        # A test box on a shared disk: no evictions, no image garbage collection.
        "evictionHard": {
            "memory.available": "1Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "syncFrequency": "10s",
    }


def _proxy_config(kubeconfig: str, node: layout.Node) -> dict[str, Any]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": kubeconfig},
        "mode": "iptables",
        "clusterCIDR": layout.CLUSTER_POD_CIDR,
        "hostnameOverride": node.name,
        # The conntrack table size is machine-wide: leave it as it is.
        "conntrack": {"maxPerCore": 0, "min": 0},
        "metricsBindAddress": "127.0.0.1:10249",
        "healthzBindAddress": "127.0.0.1:10256",
    }


def _write_kubeconfig(path: Path, pki: Pki) -> None:
    _write(path, yaml.safe_dump(pki.admin_kubeconfig(layout.NAME, APISERVER)))


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
