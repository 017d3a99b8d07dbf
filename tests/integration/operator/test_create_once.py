"""Create-once objects: a changed cache request or a stranger's object fails loudly, an unchanged
one hashed by another implementation is adopted, and a failed prewarm Job stops the service.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from kubernetes import client as k8s_client
from noctaya.k8s.apply import DEFAULT_CLASS_ANNOTATIONS
from noctaya.k8s.create_once import CREATE_ONCE_HASH_ANNOTATION, create_once_hash
from noctaya.k8s.reconciler import LLMServiceReconciler
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice

from .cluster import condition_values, create, events, patch, read, replace_status
from .failures import after_autoscaling, fail_prewarm_job, reconcile_failure

pytestmark = pytest.mark.integration

LLMSERVICES = "serving.noctaya.io/v1alpha1"
PVC = ("v1", "PersistentVolumeClaim")
JOB = ("batch/v1", "Job")
# What the operator a cluster switches from stamps: a hash of its own encoding of the same spec.
FOREIGN_HASH = create_once_hash({"encoded": "by another implementation"})
HASHED_BY = pytest.mark.parametrize("foreign", [False, True], ids=["noctaya", "another-operator"])


def edit_spec(api_client: k8s_client.ApiClient, namespace: str, name: str, spec: Manifest) -> int:
    """Merge-patch the service's spec as a user would; returns the new generation."""
    patched = patch(api_client, LLMSERVICES, "LLMService", namespace, name, {"spec": spec})
    return int(patched["metadata"]["generation"])


def hashed_by_another_operator(
    api_client: k8s_client.ApiClient, namespace: str, *objects: tuple[str, str, str]
) -> None:
    """Stamp the foreign hash on create-once objects, as if another operator had created them."""
    annotations = {"annotations": {CREATE_ONCE_HASH_ANNOTATION: FOREIGN_HASH}}
    for api_version, kind, name in objects:
        patch(api_client, api_version, kind, namespace, name, {"metadata": annotations})


def create_once_hash_of(
    api_client: k8s_client.ApiClient, obj: tuple[str, str, str], ns: str
) -> str:
    live = read(api_client, *obj[:2], ns, obj[2])
    return str(live["metadata"]["annotations"][CREATE_ONCE_HASH_ANNOTATION])


@pytest.fixture
def default_storage_class(api_client: k8s_client.ApiClient, namespace: str) -> Iterator[str]:
    """A StorageClass marked as the cluster's default while the test runs: the API server's
    admission gives it to every claim that names no class."""
    name = f"default-{namespace}"
    default = {DEFAULT_CLASS_ANNOTATIONS[0]: "true"}
    storage_class = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name, "annotations": default},
        "provisioner": "example.com/never-provisions",
    }
    create(api_client, None, storage_class)
    yield name
    k8s_client.StorageV1Api(api_client).delete_storage_class(name)


OCI_SOURCE = {
    "uri": f"oci://registry.example.com/models/qwen3@sha256:{'0123456789abcdef' * 4}",
    "secretRef": {"name": "registry-creds"},
}


@pytest.mark.parametrize(
    "changes",
    [
        {"cache": {"size": "1.5Gi", "prewarm": True}},
        {"model": {"source": OCI_SOURCE}, "cache": {"strategy": "SharedPVC", "prewarm": True}},
    ],
    ids=["prewarm", "oci-staging"],
)
def test_unchanged_cache_objects_hashed_by_another_operator_are_adopted(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
    changes: Manifest,
) -> None:
    """Taking over from another operator: the PVC and Job it created for the same request keep
    serving, carry our hash from then on, and the rest of the stack is applied again."""
    resources.create(inference_runtime(runtime_name))
    resources.create(llmservice("moved", {"runtime": {"name": runtime_name}, **changes}), namespace)
    reconciler.reconcile((namespace, "moved"))
    cache_objects = [(*PVC, "moved-cache"), (*JOB, "moved-prewarm")]
    ours = {obj: create_once_hash_of(api_client, obj, namespace) for obj in cache_objects}
    hashed_by_another_operator(api_client, namespace, *cache_objects)
    k8s_client.AppsV1Api(api_client).delete_namespaced_deployment("moved", namespace)

    reconciler.reconcile((namespace, "moved"))

    assert {obj: create_once_hash_of(api_client, obj, namespace) for obj in cache_objects} == ours
    status = status_of("moved", namespace)
    assert condition_values(status)["Degraded"][:2] == ("False", "Inactive")
    assert read(api_client, "apps/v1", "Deployment", namespace, "moved") is not None


@HASHED_BY
def test_changed_cache_size_fails_on_the_immutable_pvc_until_it_is_deleted(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
    foreign: bool,
) -> None:
    resources.create(inference_runtime(runtime_name))
    changes = {"runtime": {"name": runtime_name}, "cache": {"size": "20Gi"}}
    resources.create(llmservice("cached", changes), namespace)
    reconciler.reconcile((namespace, "cached"))
    if foreign:
        hashed_by_another_operator(api_client, namespace, (*PVC, "cached-cache"))
    generation = edit_spec(api_client, namespace, "cached", {"cache": {"size": "30Gi"}})

    status = drift_reported(
        reconciler, status_of, namespace, "cached", "ApplyCachePVC", "cached-cache"
    )
    assert status["phase"] == "Degraded"
    assert all(c["observedGeneration"] == generation for c in status["conditions"])
    pvc = read(api_client, "v1", "PersistentVolumeClaim", namespace, "cached-cache")
    assert pvc["spec"]["resources"]["requests"]["storage"] == "20Gi"
    assert events(api_client, namespace) == [], "the failure path records no events"

    core = k8s_client.CoreV1Api(api_client)
    core.delete_namespaced_persistent_volume_claim("cached-cache", namespace)
    # No controller-manager: play the pvc-protection controller that lets the claim go.
    core.patch_namespaced_persistent_volume_claim(
        "cached-cache", namespace, {"metadata": {"finalizers": None}}
    )
    reconciler.reconcile((namespace, "cached"))

    pvc = read(api_client, "v1", "PersistentVolumeClaim", namespace, "cached-cache")
    assert pvc["spec"]["resources"]["requests"]["storage"] == "30Gi"
    assert condition_values(status_of("cached", namespace))["Degraded"][:2] == ("False", "Inactive")


def drift_reported(
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
    namespace: str,
    service: str,
    reason: str,
    immutable: str,
) -> Manifest:
    """Reconciles `service` and checks the create-once drift error on the object `immutable`,
    both as the reconcile's failure and in the service's conditions; the service's status."""
    error = reconcile_failure(reconciler, namespace, service)
    message = (
        f"immutable resource {namespace}/{immutable} differs from the requested cache "
        "configuration; delete it explicitly before reconciling the change"
    )
    assert (error.reason, error.message) == (reason, message)
    status = status_of(service, namespace)
    assert condition_values(status) == after_autoscaling(reason, message)
    return status


def test_a_claim_given_the_cluster_default_class_hashed_by_another_operator_is_adopted(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    default_storage_class: str,
    operator_reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
) -> None:
    """No class requested, the server filled in the default: the same request, decided with
    the operator's own RBAC (it lists StorageClasses to know the default)."""
    resources.create(inference_runtime(runtime_name))
    resources.create(llmservice("defaulted", {"runtime": {"name": runtime_name}}), namespace)
    operator_reconciler.reconcile((namespace, "defaulted"))
    claim = (*PVC, "defaulted-cache")
    assert read(api_client, *claim[:2], namespace, claim[2])["spec"]["storageClassName"] == (
        default_storage_class
    )
    ours = create_once_hash_of(api_client, claim, namespace)
    hashed_by_another_operator(api_client, namespace, claim)

    operator_reconciler.reconcile((namespace, "defaulted"))

    assert create_once_hash_of(api_client, claim, namespace) == ours
    assert condition_values(status_of("defaulted", namespace))["Degraded"][:2] == (
        "False",
        "Inactive",
    )


@HASHED_BY
def test_a_storage_class_dropped_from_the_request_fails_on_the_immutable_pvc(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    default_storage_class: str,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
    foreign: bool,
) -> None:
    """fast-ssd → unset is a changed StorageClass: the live class is not the cluster default
    the server would have filled in."""
    resources.create(inference_runtime(runtime_name))
    changes = {"runtime": {"name": runtime_name}, "cache": {"storageClassName": "fast-ssd"}}
    resources.create(llmservice("classy", changes), namespace)
    reconciler.reconcile((namespace, "classy"))
    if foreign:
        hashed_by_another_operator(api_client, namespace, (*PVC, "classy-cache"))
    edit_spec(api_client, namespace, "classy", {"cache": {"storageClassName": None}})

    drift_reported(reconciler, status_of, namespace, "classy", "ApplyCachePVC", "classy-cache")
    pvc = read(api_client, "v1", "PersistentVolumeClaim", namespace, "classy-cache")
    assert pvc["spec"]["storageClassName"] == "fast-ssd"


@HASHED_BY
def test_scheduling_dropped_from_the_runtime_keeps_the_prewarm_job(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
    foreign: bool,
) -> None:
    """Where the prewarm pod ran is not a contract term: the Job filled the same cache with the
    same model, so it is kept as it is and stamped with the new request's hash."""
    placed = {"accelerator": {"nodeSelector": {"accelerator": "a10"}}}
    resources.create(inference_runtime(runtime_name, placed))
    changes = {"runtime": {"name": runtime_name}, "cache": {"prewarm": True}}
    resources.create(llmservice("placed", changes), namespace)
    reconciler.reconcile((namespace, "placed"))
    job = (*JOB, "placed-prewarm")
    before = create_once_hash_of(api_client, job, namespace)
    if foreign:
        hashed_by_another_operator(api_client, namespace, job)
    patch(
        api_client,
        LLMSERVICES,
        "InferenceRuntime",
        None,
        runtime_name,
        {"spec": {"accelerator": {"nodeSelector": None}}},
    )

    reconciler.reconcile((namespace, "placed"))

    assert create_once_hash_of(api_client, job, namespace) not in (before, FOREIGN_HASH)
    live = read(api_client, *JOB, namespace, "placed-prewarm")
    assert live["spec"]["template"]["spec"]["nodeSelector"] == {"accelerator": "a10"}
    assert condition_values(status_of("placed", namespace))["Degraded"][:2] == (
        "False",
        "Inactive",
    )


SHARED_PREWARM = {"cache": {"strategy": "SharedPVC", "prewarm": True}}


def reference_prewarm_job(service: Manifest, path: str) -> Manifest:
    """The prewarm Job the reference operator leaves behind for an hf source on a SharedPVC
    cache: the runtime image downloads with `python3 -c`, then writes the shared ready marker."""
    name = service["metadata"]["name"]
    program = (
        f'from huggingface_hub import snapshot_download; snapshot_download("{path}")'
        '; from pathlib import Path; Path("/cache/.noctaya-ready").touch()'
    )
    owner = {
        "apiVersion": LLMSERVICES,
        "kind": "LLMService",
        "name": name,
        "uid": service["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    container = {
        "name": "prewarm",
        "image": "vllm/vllm-openai:v0.10.0",
        "command": ["python3", "-c", program],
        "env": [{"name": "HF_HOME", "value": "/cache/hf"}],
        "volumeMounts": [{"name": "model-cache", "mountPath": "/cache"}],
    }
    cache = {"name": "model-cache", "persistentVolumeClaim": {"claimName": f"{name}-cache"}}
    pod = {"restartPolicy": "OnFailure", "containers": [container], "volumes": [cache]}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{name}-prewarm",
            "ownerReferences": [owner],
            "annotations": {CREATE_ONCE_HASH_ANNOTATION: FOREIGN_HASH},
        },
        "spec": {"backoffLimit": 4, "template": {"spec": pod}},
    }


def test_the_reference_operators_prewarm_job_for_the_same_model_is_adopted(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
) -> None:
    """Another image and program, the same model into the same claim: the switched service
    serves on, and the Job carries our hash from then on."""
    resources.create(inference_runtime(runtime_name))
    changes = {"runtime": {"name": runtime_name}, **SHARED_PREWARM}
    service = resources.create(llmservice("switched", changes), namespace)
    create(api_client, namespace, reference_prewarm_job(service, "Qwen/Qwen3-8B"))

    reconciler.reconcile((namespace, "switched"))

    job = (*JOB, "switched-prewarm")
    assert create_once_hash_of(api_client, job, namespace) not in (FOREIGN_HASH, None)
    live = read(api_client, *JOB, namespace, "switched-prewarm")
    assert live["spec"]["template"]["spec"]["containers"][0]["command"][0] == "python3"
    status = status_of("switched", namespace)
    assert condition_values(status)["Degraded"][:2] == ("False", "Inactive")
    assert read(api_client, "apps/v1", "Deployment", namespace, "switched") is not None


def test_the_reference_operators_prewarm_job_for_another_model_is_drift(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
) -> None:
    resources.create(inference_runtime(runtime_name))
    changes = {"runtime": {"name": runtime_name}, **SHARED_PREWARM}
    service = resources.create(llmservice("switched", changes), namespace)
    create(api_client, namespace, reference_prewarm_job(service, "Qwen/Qwen3-4B"))

    drift_reported(
        reconciler, status_of, namespace, "switched", "ApplyPrewarmJob", "switched-prewarm"
    )
    assert create_once_hash_of(api_client, (*JOB, "switched-prewarm"), namespace) == FOREIGN_HASH


@HASHED_BY
def test_changed_model_fails_on_the_immutable_prewarm_job(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
    foreign: bool,
) -> None:
    resources.create(inference_runtime(runtime_name))
    changes = {"runtime": {"name": runtime_name}, "cache": {"prewarm": True}}
    resources.create(llmservice("warm", changes), namespace)
    reconciler.reconcile((namespace, "warm"))
    if foreign:
        hashed_by_another_operator(api_client, namespace, (*JOB, "warm-prewarm"))
    edit_spec(api_client, namespace, "warm", {"model": {"source": {"uri": "hf://Qwen/Qwen3-4B"}}})

    drift_reported(reconciler, status_of, namespace, "warm", "ApplyPrewarmJob", "warm-prewarm")


def test_cache_pvc_of_the_same_name_not_controlled_by_the_service_is_never_adopted(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
) -> None:
    create(
        api_client,
        namespace,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "taken-cache"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )
    resources.create(inference_runtime(runtime_name))
    resources.create(llmservice("taken", {"runtime": {"name": runtime_name}}), namespace)

    error = reconcile_failure(reconciler, namespace, "taken")

    message = (
        f"resource {namespace}/taken-cache already exists and is not controlled by LLMService taken"
    )
    assert (error.reason, error.message) == ("ApplyCachePVC", message)
    assert condition_values(status_of("taken", namespace)) == after_autoscaling(
        "ApplyCachePVC", message
    )
    pvc = read(api_client, "v1", "PersistentVolumeClaim", namespace, "taken-cache")
    assert "ownerReferences" not in pvc["metadata"]
    assert pvc["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert read(api_client, "apps/v1", "Deployment", namespace, "taken") is None


def test_failed_prewarm_job_stops_the_service_with_prewarm_failed(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
) -> None:
    resources.create(inference_runtime(runtime_name))
    changes = {"runtime": {"name": runtime_name}, "cache": {"prewarm": True}}
    resources.create(llmservice("doomed", changes), namespace)
    reconciler.reconcile((namespace, "doomed"))
    now = "2025-01-01T00:00:00Z"
    reason = {"reason": "BackoffLimitExceeded", "lastProbeTime": now, "lastTransitionTime": now}
    message = "Job has reached the specified backoff limit"
    failed = {
        "startTime": now,
        "failed": 5,
        "conditions": [
            {"type": "FailureTarget", "status": "True", "message": message, **reason},
            {"type": "Failed", "status": "True", "message": message, **reason},
        ],
    }
    replace_status(api_client, "batch/v1", "Job", namespace, "doomed-prewarm", failed)

    error = reconcile_failure(reconciler, namespace, "doomed")

    message = "prewarm Job doomed-prewarm failed: Job has reached the specified backoff limit"
    assert (error.reason, error.message) == ("PrewarmFailed", message)
    status = status_of("doomed", namespace)
    assert status["phase"] == "Degraded"
    assert condition_values(status) == after_autoscaling("PrewarmFailed", message)


def test_a_failed_prewarm_job_quotes_what_its_fetcher_said_when_it_ended(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    status_of: Callable[[str, str], Manifest],
) -> None:
    """The Job's own condition only says a rule matched; the fetcher's termination message (its
    failure line) says what was refused. The newest pod's is quoted."""
    resources.create(inference_runtime(runtime_name))
    changes = {"runtime": {"name": runtime_name}, "cache": {"prewarm": True}}
    resources.create(llmservice("refused", changes), namespace)
    reconciler.reconcile((namespace, "refused"))
    said = {
        "refused-prewarm-new": (
            "2025-01-01T00:01:30Z",
            "noctaya-fetch: hf://x: entry '../e' leaves",
        ),
        "refused-prewarm-old": ("2025-01-01T00:00:30Z", "noctaya-fetch: the older attempt"),
    }
    rule = "Container prewarm for pod x failed with exit code 2 matching FailJob rule at index 0"
    pods = {
        name: {"exitCode": 2, "message": line, "finishedAt": ended}
        for name, (ended, line) in said.items()
    }
    fail_prewarm_job(
        api_client,
        namespace,
        "refused-prewarm",
        pods,
        failed=1,
        reason="PodFailurePolicy",
        message=rule,
    )

    error = reconcile_failure(reconciler, namespace, "refused")

    assert error.reason == "PrewarmFailed"
    assert error.message == (
        f"prewarm Job refused-prewarm failed: {rule}; noctaya-fetch: hf://x: entry '../e' leaves"
    )
    assert condition_values(status_of("refused", namespace))["Degraded"][2] == error.message
