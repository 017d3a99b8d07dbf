"""A real Kubernetes control plane for tests: etcd and kube-apiserver on loopback, no kubelet.

The envtest pattern: schemas, CEL rules, defaulting, server-side apply, status subresources,
conflicts and watches are exercised against the real API server, not a fake.
"""

from .binaries import Binaries, BinariesMissing, locate_binaries
from .control_plane import ControlPlane, ControlPlaneError
from .crds import install_crds

__all__ = [
    "Binaries",
    "BinariesMissing",
    "ControlPlane",
    "ControlPlaneError",
    "install_crds",
    "locate_binaries",
]
