"""A service becomes its whole serving stack, ScaledObject included, every object owned by it."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s_client
from noctaya.k8s.create_once import create_once_hash
from noctaya.k8s.reconciler import LLMServiceReconciler
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice

from .cluster import (
    ENDPOINT_READER_MOUNT,
    ENDPOINT_READER_VOLUME,
    controller_reference,
    endpoint_reader_env,
    everything_in,
    read,
)
from .conftest import GATEWAY_IMAGE

pytestmark = [pytest.mark.integration, pytest.mark.kubernetes_matrix]

RUNTIME_IMAGE = "vllm/vllm-openai:v0.10.0"
POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": 65532,
    "runAsGroup": 65532,
    "fsGroup": 65532,
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
SECRET_MODE = 0o440


def selector_labels(svc: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": svc,
        "app.kubernetes.io/managed-by": "noctaya",
        "serving.noctaya.io/llmservice": svc,
    }


def gateway_selector(svc: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": f"{svc}-gateway",
        "app.kubernetes.io/managed-by": "noctaya",
        "serving.noctaya.io/gateway": svc,
    }


def gateway_service_labels(svc: str) -> dict[str, str]:
    return {**gateway_selector(svc), "serving.noctaya.io/llmservice": svc}


def scaler_selector(svc: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": f"{svc}-scaler",
        "app.kubernetes.io/managed-by": "noctaya",
        "serving.noctaya.io/scaler": svc,
    }


def env(name: str, value: str) -> Manifest:
    return {"name": name, "value": value}


def applied_spec_fields(obj: Manifest) -> dict[str, Any]:
    """The `spec` fields the operator's server-side apply owns (from managedFields)."""
    for entry in obj["metadata"].get("managedFields") or []:
        if entry["manager"] == "noctaya-operator" and entry["operation"] == "Apply":
            return dict(entry["fieldsV1"].get("f:spec", {}))
    raise AssertionError(f"no noctaya-operator apply entry in {obj['metadata']['name']}")


class Stack:
    """Reads a service's objects by their fixed names (`<svc>`, `<svc>-gateway`…) as wire dicts."""

    def __init__(self, api_client: k8s_client.ApiClient, namespace: str, svc: str) -> None:
        self._api, self._ns, self._svc = api_client, namespace, svc

    def get(self, api_version: str, kind: str, suffix: str = "") -> Any:
        return read(self._api, api_version, kind, self._ns, self._svc + suffix)

    def require(self, api_version: str, kind: str, suffix: str = "") -> Manifest:
        found = self.get(api_version, kind, suffix)
        assert found is not None, f"{kind} {self._svc}{suffix} was not created"
        return dict(found)


@pytest.fixture
def pinned_runtime(resources: CustomResources, runtime_name: str) -> str:
    resources.create(
        inference_runtime(
            runtime_name,
            {
                "container": {
                    "args": [
                        "--model={{ .Model.Path }}",
                        "--served-model-name={{ .Service.Name }}",
                        "--port=8000",
                    ],
                    "env": [
                        {"name": "VLLM_LOGGING_LEVEL", "value": "INFO"},
                        {"name": "SERVED_IN", "value": "{{ .Service.Namespace }}"},
                        {
                            "name": "HF_TOKEN",
                            "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}},
                        },
                    ],
                },
                "lifecycle": {"preStopDrain": True},
            },
        )
    )
    return runtime_name


def test_single_gateway_service_renders_its_whole_stack_owned_by_the_service(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    pinned_runtime: str,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
) -> None:
    rt = pinned_runtime
    service = resources.create(
        llmservice(
            "qwen",
            {
                "model": {"source": {"uri": "modelscope://Qwen/Qwen3-8B-Instruct"}},
                "runtime": {"name": rt, "argsOverride": ["--max-model-len=8192"]},
                "scaling": {"max": 3},
                "cache": {"prewarm": True, "size": "20Gi"},
            },
        ),
        namespace,
    )

    reconciler.reconcile((namespace, "qwen"))

    stack = Stack(api_client, namespace, "qwen")
    scaled = stack.require("keda.sh/v1alpha1", "ScaledObject")
    backend = stack.require("apps/v1", "Deployment")
    backend_service = stack.require("v1", "Service", "-backend")
    gateway = stack.require("apps/v1", "Deployment", "-gateway")
    gateway_service = stack.require("v1", "Service")
    scaler_service = stack.require("v1", "Service", "-scaler")
    pvc = stack.require("v1", "PersistentVolumeClaim", "-cache")
    job = stack.require("batch/v1", "Job", "-prewarm")
    every = [scaled, backend, backend_service, gateway, gateway_service, scaler_service, pvc, job]
    assert all(controller_reference(obj, service) for obj in every)
    for only_with_several_gateways in (
        stack.get("policy/v1", "PodDisruptionBudget", "-gateway"),
        stack.get("apps/v1", "Deployment", "-scaler"),
        stack.get("v1", "Secret", "-demand-auth"),
    ):
        assert only_with_several_gateways is None

    # ScaledObject: min 0, max 3, target 10, stabilization 5m.
    assert scaled["metadata"]["labels"] == selector_labels("qwen")
    assert scaled["spec"] == {
        "scaleTargetRef": {"name": "qwen"},
        "minReplicaCount": 0,
        "maxReplicaCount": 3,
        "pollingInterval": 5,
        "cooldownPeriod": 300,
        "advanced": {
            "horizontalPodAutoscalerConfig": {
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300}}
            }
        },
        "triggers": [
            {
                "type": "external-push",
                "metadata": {
                    "scalerAddress": f"qwen-scaler.{namespace}.svc:9090",
                    "metricName": "pending",
                    "targetValue": "10",
                },
            }
        ],
    }

    # Backend Deployment: KEDA owns the replica count, so the operator never sets it.
    backend_labels = {**selector_labels("qwen"), "serving.noctaya.io/runtime": rt}
    assert backend["metadata"]["labels"] == backend_labels
    assert backend["spec"]["selector"] == {"matchLabels": selector_labels("qwen")}
    assert backend["spec"]["template"]["metadata"]["labels"] == backend_labels
    assert "annotations" not in backend["spec"]["template"]["metadata"]
    assert "f:replicas" not in applied_spec_fields(backend)
    pod = backend["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert not pod.get("securityContext")
    assert "initContainers" not in pod  # NodeLocalPVC never waits for a marker
    assert pod["terminationGracePeriodSeconds"] == 130  # drain 2m: sleep 120 + 10
    assert pod["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
        {"name": "model-cache", "persistentVolumeClaim": {"claimName": "qwen-cache"}},
    ]
    [serving] = pod["containers"]
    assert serving["name"] == "serving"
    assert serving["image"] == RUNTIME_IMAGE
    assert serving["args"] == [
        "--model=Qwen/Qwen3-8B-Instruct",
        "--served-model-name=qwen",
        "--port=8000",
        "--max-model-len=8192",
    ]
    assert serving["env"] == [
        env("VLLM_LOGGING_LEVEL", "INFO"),
        env("SERVED_IN", namespace),
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}},
        env("VLLM_USE_MODELSCOPE", "true"),
        env("HF_HOME", "/cache/hf"),
        env("MODELSCOPE_CACHE", "/cache/modelscope"),
    ]
    assert serving["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert serving["resources"] == {"limits": {"nvidia.com/gpu": "1"}}
    health = {"path": "/health", "port": "http", "scheme": "HTTP"}
    assert serving["readinessProbe"]["httpGet"] == health
    startup = serving["startupProbe"]
    assert (startup["httpGet"], startup["periodSeconds"], startup["failureThreshold"]) == (
        health,
        10,
        60,
    )
    assert "livenessProbe" not in serving
    drain = ["/bin/sh", "-c", "sleep 120"]
    assert serving["lifecycle"] == {"preStop": {"exec": {"command": drain}}}
    assert serving["volumeMounts"] == [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "model-cache", "mountPath": "/cache"},
    ]
    assert not serving.get("securityContext")

    # Backend Service: targets the runtime port by name.
    assert backend_service["metadata"]["labels"] == selector_labels("qwen")
    assert backend_service["spec"]["selector"] == selector_labels("qwen")
    assert backend_service["spec"]["type"] == "ClusterIP"
    assert backend_service["spec"]["ports"] == [
        {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}
    ]

    # Gateway Deployment: one hardened replica serving the scaler's gRPC itself, following the
    # backend's EndpointSlices as its endpoint reader.
    assert gateway["metadata"]["labels"] == gateway_selector("qwen")
    assert gateway["spec"]["selector"] == {"matchLabels": gateway_selector("qwen")}
    assert gateway["spec"]["template"]["metadata"]["labels"] == gateway_selector("qwen")
    assert gateway["spec"]["replicas"] == 1
    gateway_pod = gateway["spec"]["template"]["spec"]
    assert gateway_pod["terminationGracePeriodSeconds"] == 30
    assert gateway_pod["automountServiceAccountToken"] is False
    assert gateway_pod["serviceAccountName"] == "qwen-endpoint-reader"
    assert gateway_pod["securityContext"] == POD_SECURITY
    assert "affinity" not in gateway_pod
    assert gateway_pod["volumes"] == [ENDPOINT_READER_VOLUME]
    [container] = gateway_pod["containers"]
    assert container["name"] == "gateway"
    assert container["image"] == GATEWAY_IMAGE
    assert container["securityContext"] == CONTAINER_SECURITY
    for probe in (container["readinessProbe"], container["livenessProbe"]):
        assert probe["httpGet"] == {"path": "/healthz", "port": 8080, "scheme": "HTTP"}
    assert container["resources"] == {}
    assert container["ports"] == [
        {"name": "http", "containerPort": 8080, "protocol": "TCP"},
        {"name": "grpc", "containerPort": 9090, "protocol": "TCP"},
    ]
    assert container["env"] == [
        env("NOCTAYA_BACKEND_URL", f"http://qwen-backend.{namespace}.svc:80"),
        *(env(name, value) for name, value in endpoint_reader_env(namespace, "qwen")),
        env("NOCTAYA_LISTEN_ADDR", ":8080"),
        env("NOCTAYA_MAX_QUEUE", "100"),
        env("NOCTAYA_SCALER_LISTEN_ADDR", ":9090"),
        env("NOCTAYA_ACTIVATION_TIMEOUT", "5m0s"),
        env("NOCTAYA_COLDSTART_MODE", "keepalive"),
        env("NOCTAYA_HEARTBEAT_INTERVAL", "10s"),
        env("NOCTAYA_SERVED_MODELS", '["qwen"]'),
    ]
    assert container["volumeMounts"] == [ENDPOINT_READER_MOUNT]

    # Gateway Service and scaler Service (the scaler is co-located in the single gateway).
    assert gateway_service["metadata"]["labels"] == gateway_service_labels("qwen")
    assert gateway_service["spec"]["selector"] == gateway_selector("qwen")
    assert gateway_service["spec"]["ports"] == [
        {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}
    ]
    assert scaler_service["metadata"]["labels"] == gateway_service_labels("qwen")
    assert scaler_service["spec"]["type"] == "ClusterIP"
    assert scaler_service["spec"]["selector"] == gateway_selector("qwen")
    assert scaler_service["spec"]["ports"] == [
        {"name": "grpc", "port": 9090, "targetPort": 9090, "protocol": "TCP"}
    ]

    # Cache PVC: created once, carrying the hash of the spec it was created from.
    assert pvc["metadata"]["labels"] == selector_labels("qwen")
    rendered_pvc_spec = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "20Gi"}},
    }
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert pvc["spec"]["resources"] == {"requests": {"storage": "20Gi"}}
    assert "storageClassName" not in pvc["spec"]
    assert pvc["metadata"]["annotations"] == {
        "serving.noctaya.io/create-once-hash": create_once_hash(rendered_pvc_spec)
    }

    # Prewarm Job: fills the cache read-write, never asks for accelerators.
    assert job["metadata"]["labels"] == selector_labels("qwen")
    job_hash = job["metadata"]["annotations"]["serving.noctaya.io/create-once-hash"]
    assert re.fullmatch("[0-9a-f]{64}", job_hash)
    assert job["spec"]["backoffLimit"] == 4
    template_labels = job["spec"]["template"]["metadata"]["labels"]
    assert selector_labels("qwen").items() <= template_labels.items()
    assert "serving.noctaya.io/runtime" not in template_labels
    job_pod = job["spec"]["template"]["spec"]
    assert job_pod["restartPolicy"] == "Never"
    # A permanent fetch failure fails the Job at once; an evicted pod is no try.
    assert job["spec"]["podFailurePolicy"]["rules"] == [
        {
            "action": "FailJob",
            "onExitCodes": {"containerName": "prewarm", "operator": "In", "values": [2]},
        },
        {
            "action": "Ignore",
            "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
        },
    ]
    assert job_pod["automountServiceAccountToken"] is False
    assert job_pod["securityContext"] == {**POD_SECURITY, "fsGroupChangePolicy": "OnRootMismatch"}
    assert job_pod["volumes"] == [
        {"name": "model-cache", "persistentVolumeClaim": {"claimName": "qwen-cache"}},
        {"name": "scratch", "emptyDir": {}},
    ]
    [prewarm] = job_pod["containers"]
    assert prewarm["name"] == "prewarm"
    assert prewarm["image"] == GATEWAY_IMAGE, "noctaya-fetch runs from the Noctaya image"
    assert prewarm["command"] == [
        "noctaya-fetch",
        "modelscope://Qwen/Qwen3-8B-Instruct",
        "--cache",
        "/cache",
    ]
    assert prewarm["env"] == [
        env("HF_HOME", "/cache/hf"),
        env("MODELSCOPE_CACHE", "/cache/modelscope"),
        env("HOME", "/tmp"),
        env("TMPDIR", "/tmp"),
        env("XDG_CACHE_HOME", "/tmp/.cache"),
        env("TORCH_DEVICE_BACKEND_AUTOLOAD", "0"),
        env("VLLM_USE_MODELSCOPE", "true"),
    ]
    assert prewarm["securityContext"] == CONTAINER_SECURITY
    assert prewarm["volumeMounts"] == [
        {"name": "model-cache", "mountPath": "/cache"},
        {"name": "scratch", "mountPath": "/tmp"},
    ]
    assert prewarm["resources"] == {}

    status = status_of("qwen", namespace)
    assert status["phase"] == "ScaledToZero"
    assert status["resolvedRuntime"] == rt
    assert status["endpointURL"] == f"http://qwen.{namespace}.svc/v1"
    conditions = {c["type"]: c for c in status["conditions"]}
    assert {t: (c["status"], c["reason"], c["message"]) for t, c in conditions.items()} == {
        "AutoscalingReady": (
            "True",
            "ScaledObjectApplied",
            "KEDA External Push autoscaling is configured",
        ),
        # No controller-manager here: the gateway Deployment never gets a replica.
        "Ready": (
            "False",
            "GatewayUnavailable",
            'Gateway Deployment "qwen-gateway" has no available replica: '
            "Waiting for the gateway Deployment to create a gateway Pod",
        ),
        "Degraded": (
            "False",
            "Inactive",
            "Backend is scaled to zero and has no observed activation failure",
        ),
    }
    generation = service["metadata"]["generation"]
    assert all(c["observedGeneration"] == generation for c in conditions.values())


def test_several_gateways_add_a_budget_an_aggregate_scaler_and_a_demand_token(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    make_reconciler: Callable[..., LLMServiceReconciler],
) -> None:
    resources.create(inference_runtime(runtime_name))
    service = resources.create(
        llmservice("multi", {"runtime": {"name": runtime_name}, "cache": {"strategy": "None"}}),
        namespace,
    )

    make_reconciler(gateway_replicas=2).reconcile((namespace, "multi"))

    stack = Stack(api_client, namespace, "multi")
    gateway = stack.require("apps/v1", "Deployment", "-gateway")
    pdb = stack.require("policy/v1", "PodDisruptionBudget", "-gateway")
    aggregator = stack.require("apps/v1", "Deployment", "-scaler")
    scaler_service = stack.require("v1", "Service", "-scaler")
    secret = stack.require("v1", "Secret", "-demand-auth")
    assert all(
        controller_reference(obj, service)
        for obj in (gateway, pdb, aggregator, scaler_service, secret)
    )
    demand_volume = {
        "name": "demand-auth",
        "secret": {"secretName": "multi-demand-auth", "defaultMode": SECRET_MODE},
    }
    demand_mount = {
        "name": "demand-auth",
        "mountPath": "/var/run/noctaya/demand-auth",
        "readOnly": True,
    }

    # Gateway Deployment with replicas > 1: spread over nodes, report demand to the aggregator.
    assert gateway["spec"]["replicas"] == 2
    gateway_pod = gateway["spec"]["template"]["spec"]
    assert gateway_pod["affinity"] == {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": gateway_selector("multi")},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                }
            ]
        }
    }
    assert gateway_pod["volumes"] == [demand_volume, ENDPOINT_READER_VOLUME]
    [container] = gateway_pod["containers"]
    assert container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert container["env"] == [
        env("NOCTAYA_BACKEND_URL", f"http://multi-backend.{namespace}.svc:80"),
        *(env(name, value) for name, value in endpoint_reader_env(namespace, "multi")),
        env("NOCTAYA_LISTEN_ADDR", ":8080"),
        env("NOCTAYA_MAX_QUEUE", "100"),
        env("NOCTAYA_DEMAND_AGGREGATOR_URL", f"http://multi-scaler.{namespace}.svc:9091/v1/demand"),
        {
            "name": "NOCTAYA_GATEWAY_ID",
            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.uid"}},
        },
        env("NOCTAYA_ACTIVATION_TIMEOUT", "5m0s"),
        env("NOCTAYA_COLDSTART_MODE", "keepalive"),
        env("NOCTAYA_HEARTBEAT_INTERVAL", "10s"),
        env("NOCTAYA_SERVED_MODELS", '["Qwen/Qwen3-8B"]'),
        env("NOCTAYA_DEMAND_AUTH_TOKEN_FILE", "/var/run/noctaya/demand-auth/token"),
    ]
    assert container["volumeMounts"] == [demand_mount, ENDPOINT_READER_MOUNT]

    # Gateway PodDisruptionBudget: one gateway stays up through voluntary disruptions.
    assert pdb["metadata"]["labels"] == gateway_service_labels("multi")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"] == {"matchLabels": gateway_selector("multi")}
    assert "unhealthyPodEvictionPolicy" not in pdb["spec"]

    # Aggregate scaler Deployment, hardened like the gateway.
    assert aggregator["metadata"]["labels"] == scaler_selector("multi")
    assert aggregator["spec"]["selector"] == {"matchLabels": scaler_selector("multi")}
    assert aggregator["spec"]["template"]["metadata"]["labels"] == scaler_selector("multi")
    assert aggregator["spec"]["replicas"] == 1
    aggregator_pod = aggregator["spec"]["template"]["spec"]
    assert aggregator_pod["terminationGracePeriodSeconds"] == 30
    assert aggregator_pod["automountServiceAccountToken"] is False
    assert "serviceAccountName" not in aggregator_pod  # it reads no pod to scale on queue depth
    assert aggregator_pod["securityContext"] == POD_SECURITY
    assert aggregator_pod["volumes"] == [demand_volume]
    [scaler] = aggregator_pod["containers"]
    assert scaler["name"] == "scaler"
    assert scaler["image"] == GATEWAY_IMAGE
    assert scaler["args"] == ["--mode=aggregator"]
    assert scaler["securityContext"] == CONTAINER_SECURITY
    assert scaler["resources"] == {}
    assert scaler["env"] == [
        env("NOCTAYA_AGGREGATOR_LISTEN_ADDR", ":9091"),
        env("NOCTAYA_SCALER_LISTEN_ADDR", ":9090"),
        env("NOCTAYA_MAX_GATEWAY_MEMBERS", "16"),
        env("NOCTAYA_MAX_GATEWAY_DEMAND", "100"),
        env("NOCTAYA_DEMAND_AUTH_TOKEN_FILE", "/var/run/noctaya/demand-auth/token"),
    ]
    assert scaler["ports"] == [
        {"name": "grpc", "containerPort": 9090, "protocol": "TCP"},
        {"name": "http", "containerPort": 9091, "protocol": "TCP"},
    ]
    for probe in (scaler["readinessProbe"], scaler["livenessProbe"]):
        assert probe["httpGet"] == {"path": "/readyz", "port": 9091, "scheme": "HTTP"}
    assert scaler["volumeMounts"] == [demand_mount]

    # Scaler Service now selects the aggregator and also exposes its report port.
    assert scaler_service["spec"]["selector"] == scaler_selector("multi")
    assert scaler_service["spec"]["ports"] == [
        {"name": "grpc", "port": 9090, "targetPort": 9090, "protocol": "TCP"},
        {"name": "http", "port": 9091, "targetPort": 9091, "protocol": "TCP"},
    ]

    # Demand Secret: 32 random bytes as unpadded base64url, 43 characters.
    assert secret["type"] == "Opaque"
    assert secret["metadata"]["labels"] == selector_labels("multi")
    token = base64.b64decode(secret["data"]["token"]).decode()
    assert len(token) == 43
    assert len(base64.urlsafe_b64decode(token + "=")) == 32


def test_reconciling_an_unchanged_service_again_writes_nothing(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    make_reconciler: Callable[..., LLMServiceReconciler],
) -> None:
    resources.create(inference_runtime(runtime_name))
    changes = {"runtime": {"name": runtime_name}, "cache": {"prewarm": True}}
    resources.create(llmservice("idle", changes), namespace)
    several = make_reconciler(gateway_replicas=2)
    several.reconcile((namespace, "idle"))

    def versions() -> dict[str, str]:
        objects = [
            *everything_in(api_client, namespace),
            resources.get("LLMService", "idle", namespace),
        ]
        return {
            f"{o['kind']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
            for o in objects
        }

    before = versions()
    several.reconcile((namespace, "idle"))
    make_reconciler(gateway_replicas=2).reconcile((namespace, "idle"))

    assert len(before) == 12
    assert versions() == before
