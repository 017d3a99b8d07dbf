"""A real three-node Kubernetes cluster in a box of namespaces, without Docker or image pulls.

Each node has its kubelet, containerd, runc, CNI and kube-proxy in network, PID and mount
namespaces of its own; node 0 also runs the control plane; CoreDNS and KEDA run as pods (see
layout.py and box.py); `python -m support.cluster up|down` from tests/.
"""

from .box import Cluster, ClusterError
from .layout import ClusterPrerequisiteMissing, Folders, locate_programs

__all__ = ["Cluster", "ClusterError", "ClusterPrerequisiteMissing", "Folders", "locate_programs"]
