"""What lets the gateway follow its backend's pods: a ServiceAccount, a Role and a RoleBinding
per service, and the projected token a pod presents as that account.

The Role grants `get`, `list` and `watch` on EndpointSlices and nothing else, in the service's
namespace only. It cannot name the backend's slices: RBAC's `resourceNames` does not restrict
`list` or `watch` (a collection request names no object), and the EndpointSlice controller
names slices with a random suffix anyway. So the account can read every EndpointSlice of the
namespace; the gateway selects its Service's by the `kubernetes.io/service-name` label.

The token is projected, not automounted: it expires after `TOKEN_LIFETIME` (the kubelet
replaces it before then, and the gateway rereads the file), and it is mounted into the one
container that uses it, read-only, beside the cluster's CA bundle.
"""

from __future__ import annotations

from noctaya.core.plan.identity import ServiceIdentity
from noctaya.k8s.render.labels import gateway_service_labels
from noctaya.k8s.render.objects import Obj, mount, new_object

RBAC_API_VERSION = "rbac.authorization.k8s.io/v1"
ENDPOINT_SLICE_GROUP = "discovery.k8s.io"
ENDPOINT_SLICE_RULE: Obj = {
    "apiGroups": [ENDPOINT_SLICE_GROUP],
    "resources": ["endpointslices"],
    "verbs": ["get", "list", "watch"],
}
TOKEN_LIFETIME = 3600
"""Seconds; the kubelet rotates the file at 80% of it. The API server's floor is 600."""
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
"""Published in every namespace by the controller manager: the CA of the API server."""
KUBERNETES_DIR = "/var/run/noctaya/kubernetes"
TOKEN_FILE = f"{KUBERNETES_DIR}/token"
CA_FILE = f"{KUBERNETES_DIR}/ca.crt"
_VOLUME = "kubernetes-api"
_FILE_MODE = 0o440


def render_endpoint_access(svc: ServiceIdentity) -> tuple[Obj, Obj, Obj]:
    """The ServiceAccount, the Role and the RoleBinding, in the order they are applied."""
    name, namespace, labels = svc.endpoint_reader, svc.namespace, gateway_service_labels(svc)
    account = new_object("v1", "ServiceAccount", name, namespace, labels)
    account["automountServiceAccountToken"] = False
    role = new_object(RBAC_API_VERSION, "Role", name, namespace, labels)
    role["rules"] = [ENDPOINT_SLICE_RULE]
    binding = new_object(RBAC_API_VERSION, "RoleBinding", name, namespace, labels)
    binding["roleRef"] = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}
    binding["subjects"] = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    return account, role, binding


def endpoint_access_volume() -> tuple[list[Obj], list[Obj]]:
    """The account's token of bounded lifetime and the CA bundle, as one read-only volume."""
    volume: Obj = {
        "name": _VOLUME,
        "projected": {
            "defaultMode": _FILE_MODE,
            "sources": [
                {
                    "serviceAccountToken": {
                        "path": "token",
                        "expirationSeconds": TOKEN_LIFETIME,
                    }
                },
                {
                    "configMap": {
                        "name": ROOT_CA_CONFIGMAP,
                        "items": [{"key": "ca.crt", "path": "ca.crt"}],
                    }
                },
            ],
        },
    }
    return [volume], [mount(_VOLUME, KUBERNETES_DIR, read_only=True)]
