"""Property: whatever document arrives, decoding returns a model or raises `InvalidResource`.

Documents are generated two ways: random JSON-ish trees (with the values YAML and careless
clients produce: huge integers, lone surrogates, NaN, bytes, non-string keys, deep nesting), and
valid manifests with one node, at any depth, replaced by such a tree.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from noctaya.core.api import (
    InvalidResource,
    parse_inferenceruntime,
    parse_llmservice,
    read_inferenceruntime,
    read_llmservice,
    read_llmservice_status,
)
from support.manifests import inference_runtime, llmservice

DECODERS: list[Callable[[Any], object]] = [
    parse_llmservice,
    parse_inferenceruntime,
    read_llmservice,
    read_inferenceruntime,
    read_llmservice_status,
]
WIRE_KEYS = [
    "apiVersion", "kind", "metadata", "spec", "status", "model", "source", "uri", "runtime",
    "name", "selector", "vendor", "resources", "cpu", "memory", "scaling", "min", "max",
    "cache", "size", "endpoint", "health", "startup", "httpGet", "port", "container", "env",
    "valueFrom", "conditions", "generation", "labels",
]  # fmt: skip
SURROGATES = st.sampled_from(["\ud800", "\udfff", "1\udc80", "Gi\ud83d"])
TEXT = st.one_of(st.text(max_size=12), st.sampled_from(WIRE_KEYS), SURROGATES)
HUGE_INTEGERS = st.integers(4_290, 6_000).map(lambda digits: 10**digits)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    HUGE_INTEGERS,
    HUGE_INTEGERS.map(lambda n: -n),
    st.floats(allow_nan=True, allow_infinity=True),
    TEXT,
    st.binary(max_size=4),
)
KEYS = st.one_of(TEXT, st.integers(), HUGE_INTEGERS, st.none(), st.tuples(st.integers()))


def _deep(depth: int) -> Any:
    node: Any = "leaf"
    for level in range(depth):
        node = {"a": node} if level % 2 else [node]
    return node


TREES = st.recursive(
    st.one_of(SCALARS, st.integers(900, 25_000).map(_deep)),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children),
        st.dictionaries(KEYS, children, max_size=4),
    ),
    max_leaves=12,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a manifest a value can be replaced, the root excluded."""
    found: list[tuple[Any, ...]] = []
    children = node.items() if isinstance(node, dict) else enumerate(node)
    for key, child in children:
        found.append((*prefix, key))
        if isinstance(child, dict | list):
            found += _paths(child, (*prefix, key))
    return found


VALID = [
    llmservice(
        "svc",
        {
            "resources": {"cpu": "1", "memory": "1Gi"},
            "cache": {"size": "10Gi"},
            "endpoint": {"resources": {"requests": {"cpu": "100m"}}},
            "imagePullSecrets": [{"name": "pull"}],
        },
    ),
    inference_runtime(
        "rt",
        {
            "container": {"env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]},
            "health": {"startup": {"httpGet": {"path": "/health", "port": "http"}}},
        },
    ),
]


@st.composite
def mutated_manifests(draw: st.DrawFn) -> Any:
    manifest = copy.deepcopy(draw(st.sampled_from(VALID)))
    path = draw(st.sampled_from(_paths(manifest)))
    parent = manifest
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = draw(TREES)
    return manifest


def _decodes_or_names_the_problem(document: Any) -> None:
    for decode in DECODERS:
        try:
            decode(document)
        except InvalidResource as error:
            problems, message = error.problems, error.message
        else:
            continue
        assert problems, "an invalid document names at least one problem"
        message.encode("utf-8")  # printable and storable: no lone surrogates


SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(TREES)
def test_any_json_ish_tree_decodes_or_raises_invalid_resource(document: Any) -> None:
    _decodes_or_names_the_problem(document)


@SETTINGS
@given(st.dictionaries(st.sampled_from(WIRE_KEYS), TREES, max_size=6))
def test_any_mapping_of_wire_keys_decodes_or_raises_invalid_resource(document: Any) -> None:
    _decodes_or_names_the_problem(document)


@SETTINGS
@given(mutated_manifests())
def test_a_valid_manifest_with_any_node_replaced_decodes_or_raises_invalid_resource(
    document: Any,
) -> None:
    _decodes_or_names_the_problem(document)
