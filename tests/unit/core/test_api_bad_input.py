"""Hostile or nonsensical manifests get an `InvalidResource` naming the field, never a traceback.

Each case is one way a YAML or JSON document can go wrong beyond a wrong value: numbers Python
refuses to print, text that cannot be encoded, nesting that exhausts the stack, headers of the
wrong type; and the bounds Kubernetes itself enforces on quantities, probes and ports.
"""

from __future__ import annotations

from typing import Any

import pytest
from noctaya.core.api import InvalidResource, parse_inferenceruntime, parse_llmservice
from support.manifests import inference_runtime, llmservice

HUGE = 10**5000
"""More than the 4,300 digits Python converts to text by default."""


def _nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {}
    for _ in range(depth):
        node = {"a": node}
    return node


def _problems(parse: Any, manifest: Any) -> list[str]:
    with pytest.raises(InvalidResource) as caught:
        parse(manifest)
    message = caught.value.message
    message.encode("utf-8")  # printable and storable: no lone surrogates
    assert len(message) < 2000, "a message quotes bounded excerpts, not whole values"
    return caught.value.problems


def _service(**fields: Any) -> list[str]:
    """The problems of a service whose spec has `fields` set (not merged: nothing is copied)."""
    manifest = llmservice("bad")
    manifest["spec"].update(fields)
    return _problems(parse_llmservice, manifest)


def _runtime(**fields: Any) -> list[str]:
    manifest = inference_runtime("bad")
    manifest["spec"].update(fields)
    return _problems(parse_inferenceruntime, manifest)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        pytest.param(
            {"scaling": {"max": HUGE}},
            "spec.scaling.max: Invalid value 1000",
            id="huge-int",
        ),
        pytest.param(
            {"resources": {"cpu": -HUGE}},
            "spec.resources.cpu: Invalid value -1000",
            id="huge-negative-quantity",
        ),
        pytest.param(
            {"resources": {"cpu": "1\ud800"}},
            "spec.resources.cpu: must be valid UTF-8 text",
            id="lone-surrogate-in-quantity",
        ),
        pytest.param(
            {"model": {"source": {"uri": "hf://\udc80/x"}}},
            "spec.model.source.uri: must be valid UTF-8 text",
            id="lone-surrogate-in-string",
        ),
        pytest.param(
            {"scaling": {"metric": "queueDepth\ud800"}},
            "spec.scaling.metric: must be valid UTF-8 text",
            id="lone-surrogate-in-enum",
        ),
        pytest.param(
            {"scaling": _nested(20_000)},
            "spec.scaling.a.a.a",
            id="deep-nesting",
        ),
        pytest.param(
            {"resources": {"cpu": _nested(20_000)}},
            "spec.resources.cpu",
            id="deep-nesting-in-a-scalar-field",
        ),
        pytest.param(
            {"scaling": {"max": b"2"}},
            "spec.scaling.max: must be a JSON value",
            id="bytes",
        ),
        pytest.param(
            {"scaling": {3: "three"}},
            "spec.scaling: keys must be strings",
            id="integer-key",
        ),
        pytest.param(
            {"runtime": {"name": "r", "argsOverride": [HUGE]}},
            "spec.runtime.argsOverride[0]: Invalid value 1000",
            id="huge-int-in-a-string-list",
        ),
    ],
)
def test_hostile_service_input_is_an_invalid_resource_naming_the_field(
    fields: dict[str, Any], expected: str
) -> None:
    problems = _service(**fields)
    assert any(problem.startswith(expected) for problem in problems), problems


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ({"apiVersion": 5}, 'apiVersion: must be "serving.noctaya.io/v1alpha1", got 5'),
        ({"apiVersion": ["v1"]}, 'apiVersion: must be "serving.noctaya.io/v1alpha1", got ["v1"]'),
        ({"kind": {"a": 1}}, 'kind: must be "LLMService", got {"a": 1}'),
        ({"kind": None}, 'kind: must be "LLMService", got null'),
        ({"kind": "LLM\ud800"}, 'kind: must be "LLMService", got "LLM\\ud800"'),
        ({"apiVersion": HUGE}, 'apiVersion: must be "serving.noctaya.io/v1alpha1", got 1000'),
    ],
)
def test_header_of_the_wrong_type_is_named_not_raised(
    header: dict[str, Any], expected: str
) -> None:
    problems = _problems(parse_llmservice, {**llmservice("bad"), **header})
    assert any(problem.startswith(expected) for problem in problems), problems


def test_metadata_generation_must_be_a_non_negative_int64() -> None:
    manifest = {**llmservice("bad"), "metadata": {"name": "x", "generation": -1}}
    assert _problems(parse_llmservice, manifest) == [
        "metadata.generation: Invalid value -1: must be greater than or equal to 0"
    ]


NEGATIVE = "must be greater than or equal to 0"


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"resources": {"cpu": "-500m"}}, "spec.resources.cpu"),
        ({"resources": {"memory": -1}}, "spec.resources.memory"),
        ({"resources": {"fraction": {"memory": "-1Gi"}}}, "spec.resources.fraction.memory"),
        ({"cache": {"size": "-50Gi"}}, "spec.cache.size"),
        (
            {"endpoint": {"resources": {"requests": {"cpu": "-1"}}}},
            "spec.endpoint.resources.requests.cpu",
        ),
        (
            {"endpoint": {"resources": {"limits": {"memory": "-1e3"}}}},
            "spec.endpoint.resources.limits.memory",
        ),
    ],
)
def test_negative_quantities_are_rejected_naming_the_field(
    fields: dict[str, Any], path: str
) -> None:
    assert _service(**fields) == [f"{path}: {NEGATIVE}"]


def test_zero_quantities_are_allowed() -> None:
    changes = {"resources": {"cpu": 0, "memory": "0"}, "cache": {"size": "-0"}}
    spec = parse_llmservice(llmservice("zero", changes)).spec
    assert str(spec.resources.cpu) == str(spec.cache.size) == "0"


@pytest.mark.parametrize(
    ("probe", "problem"),
    [
        (
            {"periodSeconds": -10},
            "spec.health.startup.periodSeconds: Invalid value -10: " + NEGATIVE,
        ),
        (
            {"failureThreshold": -1},
            "spec.health.startup.failureThreshold: Invalid value -1: " + NEGATIVE,
        ),
        (
            {"initialDelaySeconds": -1},
            "spec.health.startup.initialDelaySeconds: Invalid value -1: " + NEGATIVE,
        ),
        (
            {"terminationGracePeriodSeconds": 0},
            "spec.health.startup.terminationGracePeriodSeconds: Invalid value 0: "
            "must be greater than or equal to 1",
        ),
        (
            {"httpGet": {"port": 0}},
            "spec.health.startup.httpGet.port: must be a port number from 1 to 65535 or a name",
        ),
        (
            {"tcpSocket": {"port": 65536}},
            "spec.health.startup.tcpSocket.port: must be a port number from 1 to 65535 or a name",
        ),
        (
            {"tcpSocket": {"port": ""}},
            "spec.health.startup.tcpSocket.port: must be a port number from 1 to 65535 or a name",
        ),
        (
            {"grpc": {"port": -1}},
            "spec.health.startup.grpc.port: Invalid value -1: must be greater than or equal to 1",
        ),
        (
            {"grpc": {"port": 70000}},
            "spec.health.startup.grpc.port: Invalid value 70000: "
            "must be less than or equal to 65535",
        ),
    ],
)
def test_probe_bounds_follow_kubernetes(probe: dict[str, Any], problem: str) -> None:
    assert _runtime(health={"startup": probe}) == [problem]


def test_probe_ports_by_number_and_by_name_are_allowed() -> None:
    health = {
        "readiness": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 0},
        "startup": {"tcpSocket": {"port": 65535}, "failureThreshold": 60},
        "liveness": {"grpc": {"port": 1}},
    }
    runtime = parse_inferenceruntime(inference_runtime("ports", {"health": health}))
    assert runtime.spec.to_wire()["health"] == health


def test_a_huge_value_is_quoted_as_a_short_excerpt() -> None:
    (problem,) = _service(scaling={"metric": "q" * 100_000})
    assert problem.startswith('spec.scaling.metric: Invalid value "qqqq')
    assert len(problem) < 300


def test_a_flood_of_problems_is_summarised_after_the_first_twenty() -> None:
    manifest = llmservice("bad")
    manifest["spec"]["imagePullSecrets"] = ["not an object"] * 30
    with pytest.raises(InvalidResource) as caught:
        parse_llmservice(manifest)
    assert len(caught.value.problems) == 30
    assert caught.value.message.endswith("; and 10 more")
