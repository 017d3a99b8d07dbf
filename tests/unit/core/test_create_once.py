"""§1.7: create-once identity is a stable hash, and reuse is refused with the exact messages."""

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from noctaya.core.create_once import (
    CREATE_ONCE_HASH_ANNOTATION,
    check_existing,
    create_once_hash,
    drift_error,
    not_controlled_error,
)
from noctaya.core.errors import NoctayaError

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
    assert digest == digest.lower()
    int(digest, 16)


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


def existing(controlled: bool, desired: str | None, live: str | None) -> None:
    check_existing(
        reason="ApplyCachePVC",
        namespace="team-a",
        name="qwen-cache",
        service="qwen",
        controlled=controlled,
        desired_hash=desired,
        live_hash=live,
    )


def test_owned_object_with_the_same_hash_is_reused() -> None:
    existing(controlled=True, desired="abc", live="abc")


def test_owned_object_without_a_desired_hash_is_reused_like_the_demand_secret() -> None:
    existing(controlled=True, desired=None, live=None)


def test_foreign_object_is_refused_before_its_hash_is_looked_at() -> None:
    with pytest.raises(NoctayaError, match="is not controlled by LLMService qwen"):
        existing(controlled=False, desired="abc", live="abc")


@pytest.mark.parametrize("live", ["def", None])
def test_owned_object_with_another_or_no_hash_is_drift(live: str | None) -> None:
    with pytest.raises(NoctayaError) as caught:
        existing(controlled=True, desired="abc", live=live)
    assert caught.value.reason == "ApplyCachePVC"
    assert caught.value.message.startswith("immutable resource team-a/qwen-cache differs")
