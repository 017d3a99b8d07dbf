"""A real single-node Kubernetes cluster in a box of namespaces, without Docker or image pulls.

kubelet, containerd, runc, CNI, kube-proxy, CoreDNS and KEDA beside the control plane, all in a
network namespace of their own (see box.py); `python -m support.cluster up|down` from tests/.
"""

from .box import Cluster, ClusterError
from .layout import ClusterPrerequisiteMissing, Folders, locate_programs

__all__ = ["Cluster", "ClusterError", "ClusterPrerequisiteMissing", "Folders", "locate_programs"]
