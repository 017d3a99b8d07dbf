"""Create-once identity is a stable hash; an object hashed otherwise is compared by its spec (a
prewarm Job by its source and cache); reuse is refused with the exact messages."""

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from noctaya.core.errors import NoctayaError
from noctaya.k8s.create_once import (
    CREATE_ONCE_HASH_ANNOTATION,
    NO_SERVER_DEFAULTS,
    ServerDefaults,
    check_existing,
    create_once_hash,
    drift_error,
    not_controlled_error,
    pvc_server_defaults,
    same_request,
)
from noctaya.k8s.prewarm_identity import same_prewarm

PVC_SPEC = {
    "accessModes": ["ReadWriteOnce"],
    "resources": {"requests": {"storage": "50Gi"}},
    "storageClassName": "local-path",
}

keys = st.text(max_size=8)
json_data = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=8,
)


def test_annotation_key_matches_the_reference() -> None:
    assert CREATE_ONCE_HASH_ANNOTATION == "serving.noctaya.io/create-once-hash"


def test_hash_is_sha256_of_sorted_compact_utf8_json() -> None:
    spec = {"b": [1, "é"], "a": {"y": True, "x": None}}
    canonical = '{"a":{"x":null,"y":true},"b":[1,"é"]}'.encode()
    assert create_once_hash(spec) == hashlib.sha256(canonical).hexdigest()


def test_hash_is_64_lowercase_hex_characters() -> None:
    digest = create_once_hash(PVC_SPEC)
    assert len(digest) == 64
    assert set(digest) <= set("0123456789abcdef")


@given(st.dictionaries(keys, json_data, max_size=6))
def test_hash_does_not_depend_on_key_order(spec: dict[str, object]) -> None:
    reordered = dict(reversed(list(spec.items())))
    assert create_once_hash(reordered) == create_once_hash(spec)


def test_any_change_to_the_spec_changes_the_hash() -> None:
    resized = {**PVC_SPEC, "resources": {"requests": {"storage": "60Gi"}}}
    assert create_once_hash(resized) != create_once_hash(PVC_SPEC)


def test_list_order_is_part_of_the_identity() -> None:
    assert create_once_hash({"args": ["a", "b"]}) != create_once_hash({"args": ["b", "a"]})


def test_non_json_values_are_refused_rather_than_hashed_loosely() -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        create_once_hash({"size": float("nan")})
    with pytest.raises(TypeError):
        create_once_hash({"size": object()})


def test_not_controlled_message() -> None:
    error = not_controlled_error("ApplyCachePVC", "team-a", "qwen-cache", "qwen")
    assert error.reason == "ApplyCachePVC"
    assert error.message == (
        "resource team-a/qwen-cache already exists and is not controlled by LLMService qwen"
    )


def test_drift_message() -> None:
    error = drift_error("ApplyPrewarmJob", "team-a", "qwen-prewarm")
    assert error.reason == "ApplyPrewarmJob"
    assert error.message == (
        "immutable resource team-a/qwen-prewarm differs from the requested cache configuration; "
        "delete it explicitly before reconciling the change"
    )


def existing(
    controlled: bool,
    desired: str | None,
    live: str | None,
    live_spec: Mapping[str, object] | None = None,
) -> bool:
    return check_existing(
        reason="ApplyCachePVC",
        namespace="team-a",
        name="qwen-cache",
        service="qwen",
        controlled=controlled,
        desired_hash=desired,
        live_hash=live,
        requested_spec=PVC_SPEC,
        live_spec=live_spec,
    )


def test_owned_object_with_the_same_hash_is_reused_as_it_is() -> None:
    assert existing(controlled=True, desired="abc", live="abc") is False


def test_owned_object_without_a_desired_hash_is_reused_like_the_demand_secret() -> None:
    assert existing(controlled=True, desired=None, live="anything") is False


def test_foreign_object_is_refused_before_its_hash_is_looked_at() -> None:
    with pytest.raises(NoctayaError, match="is not controlled by LLMService qwen"):
        existing(controlled=False, desired="abc", live="abc")


@pytest.mark.parametrize("live", ["def", None])
def test_owned_object_with_another_or_no_hash_and_the_same_spec_is_adopted(
    live: str | None,
) -> None:
    assert existing(controlled=True, desired="abc", live=live, live_spec=PVC_SPEC) is True


@pytest.mark.parametrize("live", ["def", None])
def test_owned_object_with_another_or_no_hash_and_another_spec_is_drift(live: str | None) -> None:
    resized = {**PVC_SPEC, "resources": {"requests": {"storage": "60Gi"}}}
    with pytest.raises(NoctayaError) as caught:
        existing(controlled=True, desired="abc", live=live, live_spec=resized)
    assert caught.value.reason == "ApplyCachePVC"
    assert caught.value.message.startswith("immutable resource team-a/qwen-cache differs")


def test_another_hash_without_a_live_spec_to_compare_is_drift() -> None:
    with pytest.raises(NoctayaError, match="differs from the requested cache configuration"):
        existing(controlled=True, desired="abc", live="def", live_spec=None)


# A PVC as the API server stores it: defaults beside the requested fields, the size respelled.
STORED_PVC = {
    "accessModes": ["ReadWriteOnce"],
    "resources": {"requests": {"storage": "53687091200"}},
    "storageClassName": "local-path",
    "volumeMode": "Filesystem",
    "volumeName": "pvc-0b5e",
}
NO_DEFAULT_CLASS = pvc_server_defaults([])
WITHOUT_CLASS = {k: v for k, v in PVC_SPEC.items() if k != "storageClassName"}


def test_a_stored_pvc_with_server_defaults_and_respelled_size_is_the_same_request() -> None:
    assert same_request(STORED_PVC, PVC_SPEC, NO_DEFAULT_CLASS)


@pytest.mark.parametrize("defaults", [["local-path"], ["standard", "local-path"]])
def test_the_cluster_default_storage_class_is_the_same_request_as_none(
    defaults: list[str],
) -> None:
    assert same_request(STORED_PVC, WITHOUT_CLASS, pvc_server_defaults(defaults))


@pytest.mark.parametrize("defaults", [[], ["standard"]], ids=["no-default", "another-default"])
def test_a_storage_class_dropped_from_the_request_is_a_changed_storage_class(
    defaults: list[str],
) -> None:
    """fast-ssd → unset: the live class was requested by name, the server did not choose it."""
    live = {**STORED_PVC, "storageClassName": "fast-ssd"}
    assert not same_request(live, WITHOUT_CLASS, pvc_server_defaults(defaults))


@pytest.mark.parametrize(
    "change",
    [
        {"resources": {"requests": {"storage": "60Gi"}}},
        {"storageClassName": "fast-ssd"},
        {"accessModes": ["ReadWriteMany"]},
    ],
    ids=["size", "storage-class", "strategy-access-mode"],
)
def test_a_changed_size_storage_class_or_access_is_another_request(
    change: dict[str, object],
) -> None:
    assert not same_request(STORED_PVC, {**PVC_SPEC, **change}, NO_DEFAULT_CLASS)


@pytest.mark.parametrize(
    ("field", "value"),
    [("volumeMode", "Block"), ("dataSource", {"kind": "PersistentVolumeClaim", "name": "old"})],
)
def test_a_live_only_pvc_field_the_server_does_not_fill_in_is_another_request(
    field: str, value: object
) -> None:
    assert not same_request({**STORED_PVC, field: value}, PVC_SPEC, NO_DEFAULT_CLASS)


def stored_job(spec: dict[str, object]) -> dict[str, Any]:
    """The Job as the API server keeps what another implementation sent: its Go encoding
    omitted empty values, the server and the Job controller filled in everything else."""
    stored: dict[str, Any] = json.loads(json.dumps(spec))
    uid = "06ef327e-73cb-4b2f-b521-13a4a00d52ed"
    stored.update(
        selector={"matchLabels": {"batch.kubernetes.io/controller-uid": uid}},
        manualSelector=False,
        parallelism=1,
        completions=1,
        completionMode="NonIndexed",
        suspend=False,
        podReplacementPolicy="TerminatingOrFailed",
    )
    template = stored["template"]
    template["metadata"]["labels"].update(
        {
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": "q-prewarm",
            "controller-uid": uid,
            "job-name": "q-prewarm",
        }
    )
    template["spec"].update(
        terminationGracePeriodSeconds=30,
        dnsPolicy="ClusterFirst",
        securityContext={},
        schedulerName="default-scheduler",
    )
    (container,) = template["spec"]["containers"]
    container.update(
        resources={},
        terminationMessagePath="/dev/termination-log",
        terminationMessagePolicy="File",
        imagePullPolicy="IfNotPresent",
    )
    return stored


@pytest.mark.parametrize("defaults", [NO_SERVER_DEFAULTS, NO_DEFAULT_CLASS])
def test_equal_specs_are_the_same_request_whatever_the_server_fills_in(
    defaults: ServerDefaults,
) -> None:
    assert same_request(PVC_SPEC, PVC_SPEC, defaults)


def test_server_defaults_are_looked_up_only_when_the_hashes_differ() -> None:
    asked: list[str] = []

    def defaults() -> ServerDefaults:
        asked.append("storage classes")
        return NO_DEFAULT_CLASS

    def check(live_hash: str) -> bool:
        return check_existing(
            reason="ApplyCachePVC",
            namespace="team-a",
            name="qwen-cache",
            service="qwen",
            controlled=True,
            desired_hash="abc",
            live_hash=live_hash,
            requested_spec=WITHOUT_CLASS,
            live_spec=STORED_PVC,
            server_defaults=defaults,
        )

    assert check("abc") is False
    assert asked == []
    with pytest.raises(NoctayaError, match="differs from the requested cache configuration"):
        check("def")
    assert asked == ["storage classes"]


# A prewarm Job is compared by the contract's terms only: its source and the cache it fills.
OCI_REFERENCE = f"registry.example.com/models/qwen3@sha256:{'0123456789abcdef' * 4}"
SHARED_MARKER = "/cache/.noctaya-ready"


def job_spec(
    *containers: Mapping[str, object], init: list[Mapping[str, object]] | None = None
) -> Any:
    volumes = [{"name": "model-cache", "persistentVolumeClaim": {"claimName": "q-cache"}}]
    pod: dict[str, object] = {"containers": list(containers), "volumes": volumes}
    if init:
        pod["initContainers"] = init
    return {"template": {"metadata": {"labels": {"app": "q"}}, "spec": pod}}


def fetch_job(uri: str, *extra: str, image: str = "ghcr.io/noctaya/noctaya:v0.4.0") -> Any:
    command = ["noctaya-fetch", uri, "--cache", "/cache", *extra]
    return job_spec({"name": "prewarm", "image": image, "command": command})


def reference_hub_job(path: str, hub: str = "huggingface_hub", shared: bool = True) -> Any:
    program = f'from {hub} import snapshot_download; snapshot_download("{path}")'
    if shared:
        program += f'; from pathlib import Path; Path("{SHARED_MARKER}").touch()'
    container = {
        "name": "prewarm",
        "image": "vllm/vllm-openai:v0.11.0",
        "command": ["python3", "-c", program],
        "env": [{"name": "HF_HOME", "value": "/cache/hf"}],
    }
    return stored_job(job_spec(container) | {"backoffLimit": 4})


def reference_oci_job(reference: str) -> Any:
    pull = {
        "name": "pull-oci-model",
        "image": "ghcr.io/oras-project/oras:v1.3.0",
        "args": ["pull", reference, "--output", "/staging/model", "--no-tty"],
    }
    promote = {"name": "prewarm", "image": "vllm/vllm-openai:v0.11.0", "command": ["python3"]}
    return job_spec(promote, init=[pull])


def prewarm_existing(live_spec: Any, requested_spec: Any) -> bool:
    return check_existing(
        reason="ApplyPrewarmJob",
        namespace="team-a",
        name="q-prewarm",
        service="q",
        controlled=True,
        desired_hash="ours",
        live_hash="theirs",
        requested_spec=requested_spec,
        live_spec=live_spec,
        same=same_prewarm,
    )


SHARED_HF = fetch_job("hf://Qwen/Qwen3-8B", "--ready-marker", SHARED_MARKER)


@pytest.mark.parametrize(
    ("live", "requested"),
    [
        (reference_hub_job("Qwen/Qwen3-8B"), SHARED_HF),
        (reference_hub_job("org/m", "modelscope", shared=False), fetch_job("modelscope://org/m")),
        (reference_oci_job(OCI_REFERENCE), fetch_job(f"oci://{OCI_REFERENCE}")),
        (
            fetch_job("hf://Qwen/Qwen3-8B", image="ghcr.io/noctaya/noctaya:v0.1.0"),
            fetch_job("hf://Qwen/Qwen3-8B"),
        ),
    ],
    ids=["reference-hf-shared", "reference-modelscope", "reference-oci", "older-noctaya"],
)
def test_a_prewarm_job_filling_the_same_cache_with_the_same_model_is_adopted(
    live: Any, requested: Any
) -> None:
    assert prewarm_existing(live, requested) is True


@pytest.mark.parametrize(
    ("live", "requested"),
    [
        (reference_hub_job("Qwen/Qwen3-4B"), SHARED_HF),
        (reference_hub_job("Qwen/Qwen3-8B", "modelscope"), SHARED_HF),
        (reference_hub_job("Qwen/Qwen3-8B", shared=False), SHARED_HF),
        (reference_oci_job(OCI_REFERENCE[:-1] + "0"), fetch_job(f"oci://{OCI_REFERENCE}")),
        (
            fetch_job("hf://Qwen/Qwen3-8B") | {"template": {"spec": {}}},
            fetch_job("hf://Qwen/Qwen3-8B"),
        ),
        (job_spec({"name": "prewarm", "command": ["sh", "-c", "true"]}), SHARED_HF),
    ],
    ids=["other-model", "other-hub", "no-ready-marker", "other-digest", "no-cache", "unknown"],
)
def test_a_prewarm_job_with_another_or_unknown_source_or_cache_is_drift(
    live: Any, requested: Any
) -> None:
    with pytest.raises(NoctayaError, match="differs from the requested cache configuration"):
        prewarm_existing(live, requested)


def test_a_prewarm_job_writing_another_claim_is_drift() -> None:
    live = fetch_job("hf://Qwen/Qwen3-8B")
    live["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] = "other"
    assert not same_prewarm(live, fetch_job("hf://Qwen/Qwen3-8B"))


def on_host_path(spec: Any, path: str) -> Any:
    spec["template"]["spec"]["volumes"] = [{"name": "model-cache", "hostPath": {"path": path}}]
    return spec


def test_a_prewarm_job_on_a_host_path_is_compared_by_its_path() -> None:
    folder = "/var/lib/noctaya/cache/a/q"
    requested = on_host_path(fetch_job("hf://Qwen/Qwen3-8B"), folder)
    live = on_host_path(reference_hub_job("Qwen/Qwen3-8B", shared=False), folder)
    assert same_prewarm(live, requested)
    assert not same_prewarm(on_host_path(live, "/var/lib/noctaya/cache/b/q"), requested)


def test_a_reference_oci_pull_with_registry_credentials_names_the_same_artifact() -> None:
    live = reference_oci_job(OCI_REFERENCE)
    live["template"]["spec"]["initContainers"][0]["args"] += [
        "--registry-config",
        "/var/run/noctaya/registry-auth/config.json",
    ]
    requested = fetch_job(
        f"oci://{OCI_REFERENCE}", "--registry-config", "/var/run/noctaya/registry-auth/config.json"
    )
    assert same_prewarm(live, requested)
