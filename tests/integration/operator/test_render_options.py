"""The options of a service and its runtime, as they land in the rendered objects.

Cache strategies and model sources (cache volume, PVC, prewarm and OCI staging Job), runtime
scheduling and vendor mounts (backend Deployment), gateway authentication and scaler TLS
(gateway, aggregate scaler, ScaledObject).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s_client
from noctaya.core.errors import NoctayaError
from noctaya.k8s.reconciler import LLMServiceReconciler
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice

from .cluster import ENDPOINT_READER_MOUNT, ENDPOINT_READER_VOLUME, endpoint_reader_env, read
from .conftest import GATEWAY_IMAGE

pytestmark = pytest.mark.integration

DIGEST = "0123456789abcdef" * 4
OCI_URI = f"oci://registry.example.com/models/qwen3@sha256:{DIGEST}"
OCI_MARKER = f"/cache/oci/sha256-{DIGEST}/.noctaya-ready"
SECRET_MODE = 0o440
SCRATCH_VOLUME = {"name": "scratch", "emptyDir": {}}
CACHE_ENV = [
    {"name": "HF_HOME", "value": "/cache/hf"},
    {"name": "MODELSCOPE_CACHE", "value": "/cache/modelscope"},
]


def wait_for_marker(marker: str, image: str = "vllm/vllm-openai:v0.10.0") -> Manifest:
    """The `wait-for-prewarm` init container that holds serving until the cache is filled."""
    program = f'import os,time\nwhile not os.path.isfile("{marker}"): time.sleep(2)'
    return {
        "name": "wait-for-prewarm",
        "image": image,
        "command": ["python3", "-c", program],
        "volumeMounts": [{"name": "model-cache", "mountPath": "/cache", "readOnly": True}],
    }


def strip_defaults(container: Manifest) -> Manifest:
    """A container as the operator wrote it: without the fields the API server defaults."""
    defaulted = ("terminationMessagePath", "terminationMessagePolicy", "imagePullPolicy")
    return {k: v for k, v in container.items() if k not in defaulted and v != {}}


class Rendered:
    """Reconcile one service and read what it became."""

    def __init__(
        self,
        api_client: k8s_client.ApiClient,
        resources: CustomResources,
        namespace: str,
        runtime_name: str,
        make_reconciler: Callable[..., LLMServiceReconciler],
    ) -> None:
        self.api_client, self.resources, self.namespace = api_client, resources, namespace
        self.runtime_name, self._make = runtime_name, make_reconciler

    def runtime(self, changes: Manifest | None = None) -> None:
        self.resources.create(inference_runtime(self.runtime_name, changes))

    def service(self, name: str, changes: Manifest, gateway_replicas: int = 1) -> None:
        spec = {"runtime": {"name": self.runtime_name}, **changes}
        self.resources.create(llmservice(name, spec), self.namespace)
        self._make(gateway_replicas=gateway_replicas).reconcile((self.namespace, name))

    def failure(self, name: str, changes: Manifest) -> NoctayaError:
        with pytest.raises(NoctayaError) as failure:
            self.service(name, changes)
        return failure.value

    def get(self, api_version: str, kind: str, name: str) -> Any:
        found = read(self.api_client, api_version, kind, self.namespace, name)
        assert found is not None, f"{kind} {name} was not created"
        return found

    def backend_pod(self, name: str) -> Manifest:
        return dict(self.get("apps/v1", "Deployment", name)["spec"]["template"]["spec"])

    def job_pod(self, name: str) -> Manifest:
        return dict(self.get("batch/v1", "Job", f"{name}-prewarm")["spec"]["template"]["spec"])


@pytest.fixture
def rendered(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    make_reconciler: Callable[..., LLMServiceReconciler],
) -> Rendered:
    return Rendered(api_client, resources, namespace, runtime_name, make_reconciler)


def test_shared_pvc_prewarm_serves_read_only_after_the_ready_marker(rendered: Rendered) -> None:
    rendered.runtime()
    rendered.service("shared", {"cache": {"strategy": "SharedPVC", "prewarm": True}})

    pvc = rendered.get("v1", "PersistentVolumeClaim", "shared-cache")
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pvc["spec"]["resources"]["requests"]["storage"] == "50Gi"
    pod = rendered.backend_pod("shared")
    assert pod["volumes"][-1] == {
        "name": "model-cache",
        "persistentVolumeClaim": {"claimName": "shared-cache", "readOnly": True},
    }
    [serving] = pod["containers"]
    assert serving["volumeMounts"][-1] == {
        "name": "model-cache",
        "mountPath": "/cache",
        "readOnly": True,
    }
    [init] = pod["initContainers"]
    assert strip_defaults(init) == wait_for_marker("/cache/.noctaya-ready")
    job = rendered.job_pod("shared")
    assert job["volumes"] == [
        {"name": "model-cache", "persistentVolumeClaim": {"claimName": "shared-cache"}},
        SCRATCH_VOLUME,
    ]
    [prewarm] = job["containers"]
    assert prewarm["command"] == [
        "noctaya-fetch",
        "hf://Qwen/Qwen3-8B",
        "--cache",
        "/cache",
        "--ready-marker",
        "/cache/.noctaya-ready",
    ]


def test_shared_pvc_without_prewarm_is_written_by_the_server_itself(rendered: Rendered) -> None:
    rendered.runtime()
    rendered.service("sharedrw", {"cache": {"strategy": "SharedPVC"}})

    pod = rendered.backend_pod("sharedrw")
    assert "initContainers" not in pod
    assert pod["volumes"][-1] == {
        "name": "model-cache",
        "persistentVolumeClaim": {"claimName": "sharedrw-cache"},
    }
    assert pod["containers"][0]["volumeMounts"][-1] == {
        "name": "model-cache",
        "mountPath": "/cache",
    }
    assert (
        read(rendered.api_client, "batch/v1", "Job", rendered.namespace, "sharedrw-prewarm") is None
    )


def test_oci_model_is_staged_by_the_job_and_by_each_backend_pod_on_a_host_path_cache(
    rendered: Rendered,
) -> None:
    """A host folder is each node's own: the Job fills the folder of its node, and each backend
    pod runs the same fetcher first (`fetch-model`) instead of waiting for a marker the Job may
    have written on another node; serving reads the cache read-only."""
    rendered.runtime()
    source = {"uri": OCI_URI, "secretRef": {"name": "registry-creds"}}
    rendered.service("oci", {"model": {"source": source}, "cache": {"strategy": "HostPath"}})

    host_cache = {
        "name": "model-cache",
        "hostPath": {
            "path": f"/var/lib/noctaya/cache/{rendered.namespace}-oci",
            "type": "DirectoryOrCreate",
        },
    }
    registry_auth = {
        "name": "oci-registry-auth",
        "secret": {
            "secretName": "registry-creds",
            "defaultMode": 0o400,
            "items": [{"key": ".dockerconfigjson", "path": "config.json"}],
        },
    }
    pod = rendered.backend_pod("oci")
    dshm = {"name": "dshm", "emptyDir": {"medium": "Memory"}}
    assert pod["volumes"] == [dshm, host_cache, SCRATCH_VOLUME, registry_auth]
    [serving] = pod["containers"]
    assert serving["volumeMounts"][-1] == {
        "name": "model-cache",
        "mountPath": "/cache",
        "readOnly": True,
    }, "an OCI model is served from a read-only cache"
    assert (
        read(rendered.api_client, "v1", "PersistentVolumeClaim", rendered.namespace, "oci-cache")
        is None
    )

    job = rendered.job_pod("oci")
    assert job["volumes"] == [host_cache, SCRATCH_VOLUME, registry_auth]
    [fetch] = pod["initContainers"]
    [prewarm] = job["containers"]
    assert fetch["name"] == "fetch-model"
    for field in ("image", "command", "env", "volumeMounts"):
        assert fetch.get(field) == prewarm.get(field), field
    assert fetch["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "runAsUser": 0,
        "runAsGroup": 0,
        "runAsNonRoot": False,
        "seccompProfile": {"type": "RuntimeDefault"},
    }, "the Job's identity on a host folder, on the container itself"
    assert "initContainers" not in job, "noctaya-fetch verifies and promotes in one container"
    assert job["securityContext"] == {
        "runAsUser": 0,
        "runAsGroup": 0,
        "seccompProfile": {"type": "RuntimeDefault"},
    }, "a root-owned host folder is written as root: fsGroup does not apply to hostPath"
    assert job["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }, "root, but with no capability and no way to gain one"
    [prewarm] = job["containers"]
    assert prewarm["image"] == GATEWAY_IMAGE
    assert prewarm["command"] == [
        "noctaya-fetch",
        f"oci://registry.example.com/models/qwen3@sha256:{DIGEST}",
        "--cache",
        "/cache",
        "--registry-config",
        "/var/run/noctaya/registry-auth/config.json",
    ]
    assert prewarm["volumeMounts"] == [
        {"name": "model-cache", "mountPath": "/cache"},
        {"name": "scratch", "mountPath": "/tmp"},
        {
            "name": "oci-registry-auth",
            "mountPath": "/var/run/noctaya/registry-auth",
            "readOnly": True,
        },
    ]


def test_oci_model_on_a_pvc_cache_mounts_the_claim_read_only(rendered: Rendered) -> None:
    rendered.runtime()
    rendered.service("ocipvc", {"model": {"source": {"uri": OCI_URI}}})

    pod = rendered.backend_pod("ocipvc")
    assert pod["volumes"][-1] == {
        "name": "model-cache",
        "persistentVolumeClaim": {"claimName": "ocipvc-cache", "readOnly": True},
    }
    assert pod["containers"][0]["volumeMounts"][-1]["readOnly"] is True
    job = rendered.job_pod("ocipvc")
    assert job["volumes"][0] == {
        "name": "model-cache",
        "persistentVolumeClaim": {"claimName": "ocipvc-cache"},
    }
    assert job["volumes"][1:] == [SCRATCH_VOLUME], "no registry credentials without a secretRef"
    assert job["containers"][0]["command"] == [
        "noctaya-fetch",
        f"oci://registry.example.com/models/qwen3@sha256:{DIGEST}",
        "--cache",
        "/cache",
    ]


def test_oci_model_without_a_persistent_cache_fails_with_prewarm(rendered: Rendered) -> None:
    rendered.runtime()
    changes = {"model": {"source": {"uri": OCI_URI}}, "cache": {"strategy": "None"}}

    error = rendered.failure("ocinone", changes)

    assert (error.reason, error.message) == (
        "Prewarm",
        "oci:// model sources require a persistent cache strategy",
    )


def test_pvc_model_source_is_mounted_read_only_and_never_prewarmed(rendered: Rendered) -> None:
    rendered.runtime({"container": {"args": ["--model={{ .Model.Path }}"]}})
    changes = {
        "model": {"source": {"uri": "pvc://weights/qwen3/8b"}},
        "cache": {"strategy": "None", "prewarm": True},
    }
    rendered.service("mounted", changes)

    pod = rendered.backend_pod("mounted")
    assert pod["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
        {
            "name": "model-store",
            "persistentVolumeClaim": {"claimName": "weights", "readOnly": True},
        },
    ]
    [serving] = pod["containers"]
    assert serving["args"] == ["--model=/models/qwen3/8b"]
    assert serving["volumeMounts"] == [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "model-store", "mountPath": "/models", "readOnly": True},
    ]
    assert "env" not in serving, "no cache, no cache env"
    assert (
        read(rendered.api_client, "batch/v1", "Job", rendered.namespace, "mounted-prewarm") is None
    )


def test_runtime_scheduling_and_service_resources_reach_backend_and_prewarm_pods(
    rendered: Rendered,
) -> None:
    toleration = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ready_probe = {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 5}
    rendered.runtime(
        {
            "accelerator": {
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100"},
                "tolerations": [toleration],
                "scheduler": {"name": "volcano", "queue": "llm"},
            },
            "health": {"readiness": ready_probe, "liveness": ready_probe},
            "lifecycle": {"terminationGracePeriodSeconds": 60},
        }
    )
    rendered.service(
        "placed",
        {
            "resources": {"cpu": "4", "memory": "32Gi", "accelerators": 2},
            "imagePullSecrets": [{"name": "regcred"}],
            "cache": {"prewarm": True},
            "scaling": {"drainTimeout": "1500ms"},
        },
    )

    backend = rendered.get("apps/v1", "Deployment", "placed")
    template = backend["spec"]["template"]
    assert template["metadata"]["annotations"] == {"scheduling.volcano.sh/queue-name": "llm"}
    pod = template["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100"}
    assert pod["tolerations"] == [toleration]
    assert pod["schedulerName"] == "volcano"
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["terminationGracePeriodSeconds"] == 60, "no drain without preStopDrain"
    [serving] = pod["containers"]
    assert "lifecycle" not in serving
    assert serving["resources"] == {
        "requests": {"cpu": "4", "memory": "32Gi"},
        "limits": {"memory": "32Gi", "nvidia.com/gpu": "2"},
    }
    assert serving["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert serving["readinessProbe"]["periodSeconds"] == 5
    assert serving["livenessProbe"]["httpGet"]["path"] == "/ready"

    job = rendered.get("batch/v1", "Job", "placed-prewarm")["spec"]["template"]
    assert job["metadata"]["annotations"] == {"scheduling.volcano.sh/queue-name": "llm"}
    job_pod = job["spec"]
    assert job_pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100"}
    assert job_pod["tolerations"] == [toleration]
    assert job_pod["schedulerName"] == "volcano"
    assert job_pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert job_pod["containers"][0]["resources"] == {}, "prewarm asks for no accelerator"


def test_drain_widens_the_grace_period_past_the_sleep(rendered: Rendered) -> None:
    rendered.runtime({"lifecycle": {"preStopDrain": True, "terminationGracePeriodSeconds": 5}})
    rendered.service("drained", {"scaling": {"drainTimeout": "1500ms"}})

    pod = rendered.backend_pod("drained")
    assert pod["containers"][0]["lifecycle"] == {
        "preStop": {"exec": {"command": ["/bin/sh", "-c", "sleep 2"]}}
    }
    assert pod["terminationGracePeriodSeconds"] == 12


def test_ascend_runtime_adds_its_read_only_host_mounts_in_order(rendered: Rendered) -> None:
    rendered.runtime({"vendor": "ascend", "accelerator": {"resourceName": "huawei.com/Ascend910"}})
    rendered.service("npu", {"model": {"source": {"uri": "pvc://weights"}}})

    pod = rendered.backend_pod("npu")
    host = [
        ("ascend-driver", "/usr/local/Ascend/driver"),
        ("npu-smi", "/usr/local/bin/npu-smi"),
        ("dcmi", "/usr/local/dcmi"),
        ("ascend-install-info", "/etc/ascend_install.info"),
    ]
    assert [v["name"] for v in pod["volumes"]] == [
        "dshm",
        "model-store",
        *(name for name, _ in host),
        "model-cache",
    ]
    # The operator sets no hostPath type; "" is the API server's default for it.
    assert pod["volumes"][2:6] == [
        {"name": n, "hostPath": {"path": p, "type": ""}} for n, p in host
    ]
    [serving] = pod["containers"]
    assert serving["volumeMounts"] == [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "model-store", "mountPath": "/models", "readOnly": True},
        *({"name": n, "mountPath": p, "readOnly": True} for n, p in host),
        {"name": "model-cache", "mountPath": "/cache"},
    ]
    assert serving["resources"] == {"limits": {"huawei.com/Ascend910": "1"}}
    assert serving["env"] == CACHE_ENV
    assert not pod.get("securityContext")


AUTH = {"authentication": {"secretRef": {"name": "api-keys", "key": "key"}}}
ENDPOINT = {
    **AUTH,
    "maxQueue": 7,
    "coldStart": {"mode": "reject", "heartbeatInterval": "2s"},
    "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "256Mi"}},
}
TLS = {
    "externalScaler": {
        "tls": {"serverSecretName": "scaler-tls", "authenticationRef": {"name": "keda-client"}}
    }
}
CLIENT_AUTH_VOLUME = {
    "name": "client-auth",
    "secret": {
        "secretName": "api-keys",
        "defaultMode": SECRET_MODE,
        "items": [{"key": "key", "path": "api-key"}],
    },
}
TLS_VOLUME = {
    "name": "external-scaler-tls",
    "secret": {"secretName": "scaler-tls", "defaultMode": SECRET_MODE},
}
DEMAND_VOLUME = {
    "name": "demand-auth",
    "secret": {"secretName": "guarded-demand-auth", "defaultMode": SECRET_MODE},
}
CLIENT_AUTH_MOUNT = {
    "name": "client-auth",
    "mountPath": "/var/run/noctaya/client-auth",
    "readOnly": True,
}
TLS_MOUNT = {
    "name": "external-scaler-tls",
    "mountPath": "/var/run/noctaya/scaler-tls",
    "readOnly": True,
}
DEMAND_MOUNT = {
    "name": "demand-auth",
    "mountPath": "/var/run/noctaya/demand-auth",
    "readOnly": True,
}
TLS_ENV = [
    ("NOCTAYA_SCALER_TLS_CERT_FILE", "/var/run/noctaya/scaler-tls/tls.crt"),
    ("NOCTAYA_SCALER_TLS_KEY_FILE", "/var/run/noctaya/scaler-tls/tls.key"),
    ("NOCTAYA_SCALER_TLS_CLIENT_CA_FILE", "/var/run/noctaya/scaler-tls/ca.crt"),
]


def env_pairs(container: Manifest) -> list[tuple[str, str | None]]:
    return [(e["name"], e.get("value")) for e in container["env"]]


def test_single_gateway_mounts_the_client_keys_and_serves_scaler_tls_itself(
    rendered: Rendered,
) -> None:
    rendered.runtime()
    changes = {
        "endpoint": ENDPOINT,
        "scaling": {**TLS, "activationTimeout": "2m"},
        "imagePullSecrets": [{"name": "regcred"}],
        "cache": {"strategy": "None"},
    }
    rendered.service("guarded", changes)

    ns = rendered.namespace
    pod = rendered.get("apps/v1", "Deployment", "guarded-gateway")["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["volumes"] == [CLIENT_AUTH_VOLUME, TLS_VOLUME, ENDPOINT_READER_VOLUME]
    [gateway] = pod["containers"]
    assert env_pairs(gateway) == [
        ("NOCTAYA_BACKEND_URL", f"http://guarded-backend.{ns}.svc:80"),
        *endpoint_reader_env(ns, "guarded"),
        ("NOCTAYA_LISTEN_ADDR", ":8080"),
        ("NOCTAYA_MAX_QUEUE", "7"),
        ("NOCTAYA_SCALER_LISTEN_ADDR", ":9090"),
        ("NOCTAYA_ACTIVATION_TIMEOUT", "2m0s"),
        ("NOCTAYA_COLDSTART_MODE", "reject"),
        ("NOCTAYA_HEARTBEAT_INTERVAL", "2s"),
        ("NOCTAYA_SERVED_MODELS", '["Qwen/Qwen3-8B"]'),
        ("NOCTAYA_CLIENT_API_KEY_FILE", "/var/run/noctaya/client-auth/api-key"),
        *TLS_ENV,
    ]
    assert gateway["volumeMounts"] == [CLIENT_AUTH_MOUNT, TLS_MOUNT, ENDPOINT_READER_MOUNT]
    assert gateway["resources"] == {"requests": {"cpu": "100m"}, "limits": {"memory": "256Mi"}}
    scaled = rendered.get("keda.sh/v1alpha1", "ScaledObject", "guarded")
    assert scaled["spec"]["triggers"][0]["authenticationRef"] == {
        "name": "keda-client",
        "kind": "TriggerAuthentication",
    }
    assert rendered.backend_pod("guarded")["imagePullSecrets"] == [{"name": "regcred"}]


def test_several_gateways_leave_scaler_tls_to_the_aggregator(rendered: Rendered) -> None:
    rendered.runtime()
    changes = {
        "endpoint": ENDPOINT,
        "scaling": TLS,
        "imagePullSecrets": [{"name": "regcred"}],
        "cache": {"strategy": "None"},
    }
    rendered.service("guarded", changes, gateway_replicas=5)

    ns = rendered.namespace
    pod = rendered.get("apps/v1", "Deployment", "guarded-gateway")["spec"]["template"]["spec"]
    assert pod["volumes"] == [CLIENT_AUTH_VOLUME, DEMAND_VOLUME, ENDPOINT_READER_VOLUME]
    [gateway] = pod["containers"]
    assert env_pairs(gateway) == [
        ("NOCTAYA_BACKEND_URL", f"http://guarded-backend.{ns}.svc:80"),
        *endpoint_reader_env(ns, "guarded"),
        ("NOCTAYA_LISTEN_ADDR", ":8080"),
        ("NOCTAYA_MAX_QUEUE", "7"),
        ("NOCTAYA_DEMAND_AGGREGATOR_URL", f"http://guarded-scaler.{ns}.svc:9091/v1/demand"),
        ("NOCTAYA_GATEWAY_ID", None),
        ("NOCTAYA_ACTIVATION_TIMEOUT", "5m0s"),
        ("NOCTAYA_COLDSTART_MODE", "reject"),
        ("NOCTAYA_HEARTBEAT_INTERVAL", "2s"),
        ("NOCTAYA_SERVED_MODELS", '["Qwen/Qwen3-8B"]'),
        ("NOCTAYA_CLIENT_API_KEY_FILE", "/var/run/noctaya/client-auth/api-key"),
        ("NOCTAYA_DEMAND_AUTH_TOKEN_FILE", "/var/run/noctaya/demand-auth/token"),
    ]
    assert gateway["volumeMounts"] == [CLIENT_AUTH_MOUNT, DEMAND_MOUNT, ENDPOINT_READER_MOUNT]

    aggregator = rendered.get("apps/v1", "Deployment", "guarded-scaler")["spec"]["template"]
    aggregator_pod = aggregator["spec"]
    assert aggregator_pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert aggregator_pod["volumes"] == [DEMAND_VOLUME, TLS_VOLUME]
    [scaler] = aggregator_pod["containers"]
    assert env_pairs(scaler) == [
        ("NOCTAYA_AGGREGATOR_LISTEN_ADDR", ":9091"),
        ("NOCTAYA_SCALER_LISTEN_ADDR", ":9090"),
        ("NOCTAYA_MAX_GATEWAY_MEMBERS", "20"),
        ("NOCTAYA_MAX_GATEWAY_DEMAND", "7"),
        ("NOCTAYA_DEMAND_AUTH_TOKEN_FILE", "/var/run/noctaya/demand-auth/token"),
        *TLS_ENV,
    ]
    assert scaler["volumeMounts"] == [DEMAND_MOUNT, TLS_MOUNT]
    assert "resources" not in scaler or scaler["resources"] == {}
