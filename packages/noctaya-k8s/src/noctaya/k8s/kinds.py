"""The API kinds the operator reads and writes, named once."""

from __future__ import annotations

from noctaya.core.api import GROUP_VERSION
from noctaya.k8s.runtime.resources import ResourceKind

LLMSERVICE = ResourceKind(GROUP_VERSION, "LLMService")
INFERENCE_RUNTIME = ResourceKind(GROUP_VERSION, "InferenceRuntime")
SCALED_OBJECT = ResourceKind("keda.sh/v1alpha1", "ScaledObject")
DEPLOYMENT = ResourceKind("apps/v1", "Deployment")
SERVICE = ResourceKind("v1", "Service")
SECRET = ResourceKind("v1", "Secret")
PVC = ResourceKind("v1", "PersistentVolumeClaim")
PV = ResourceKind("v1", "PersistentVolume")
NODE = ResourceKind("v1", "Node")
POD = ResourceKind("v1", "Pod")
JOB = ResourceKind("batch/v1", "Job")
PDB = ResourceKind("policy/v1", "PodDisruptionBudget")
EVENT = ResourceKind("events.k8s.io/v1", "Event")
STORAGE_CLASS = ResourceKind("storage.k8s.io/v1", "StorageClass")
SERVICE_ACCOUNT = ResourceKind("v1", "ServiceAccount")
ROLE = ResourceKind("rbac.authorization.k8s.io/v1", "Role")
ROLE_BINDING = ResourceKind("rbac.authorization.k8s.io/v1", "RoleBinding")
ENDPOINT_ACCESS = (SERVICE_ACCOUNT, ROLE, ROLE_BINDING)
"""The gateway's endpoint reader, which a platform may forbid the operator to create."""


def kind_of(obj: dict[str, object]) -> ResourceKind:
    return ResourceKind(str(obj["apiVersion"]), str(obj["kind"]))
