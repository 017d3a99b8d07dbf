"""The core's typed container values render to exactly what the API server keeps of the runtime's
own declaration: its wire form with empty strings and lists left out and zero probe timings
dropped, so the operator's writes compare equal to the stored objects."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from noctaya.core.api import Probe, Toleration
from noctaya.core.api.kubernetes import EnvVar
from noctaya.core.plan.container import Env, health_check, toleration
from noctaya.k8s.render.container import env_var, probe, server_form
from noctaya.k8s.render.container import toleration as toleration_wire

TIMINGS = (
    "initialDelaySeconds",
    "timeoutSeconds",
    "periodSeconds",
    "successThreshold",
    "failureThreshold",
)
WORDS = st.sampled_from(["", "x", "/health", "http", "HTTPS"])
SECONDS = st.integers(-(2**63), 2**63 - 1)
PORTS = st.one_of(st.integers(1, 65535), st.sampled_from(["http", "api"]))


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


def fields(**parts: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A dict of those of `parts` that are drawn as set."""
    return st.fixed_dictionaries({}, optional=parts).map(
        lambda drawn: {key: value for key, value in drawn.items() if value is not None}
    )


HEADERS = st.lists(fields(name=WORDS, value=WORDS).filter(lambda h: len(h) == 2), max_size=2)
PROBES = fields(
    exec=fields(command=st.lists(WORDS, max_size=2)),
    httpGet=fields(
        path=WORDS, port=PORTS, host=WORDS, scheme=WORDS, httpHeaders=maybe(HEADERS)
    ).filter(lambda action: "port" in action),
    tcpSocket=fields(port=PORTS, host=WORDS).filter(lambda action: "port" in action),
    grpc=fields(port=st.integers(1, 65535), service=WORDS).filter(lambda a: "port" in a),
    terminationGracePeriodSeconds=st.integers(1, 30),
    **{timing: st.integers(0, 3) for timing in TIMINGS},
)


def stored_probe(declared: Probe) -> dict[str, Any]:
    """What the API server keeps of a probe copied into a Pod unchanged."""
    wire: dict[str, Any] = server_form(declared.to_wire())
    return {k: v for k, v in wire.items() if not (k in TIMINGS and v == 0)}


@given(PROBES)
def test_a_runtime_probe_renders_as_the_server_stores_it(document: dict[str, Any]) -> None:
    declared = Probe.model_validate(document)
    assert probe(health_check(declared)) == stored_probe(declared)


@given(fields(key=WORDS, operator=WORDS, value=WORDS, effect=WORDS, tolerationSeconds=SECONDS))
def test_a_toleration_renders_as_the_server_stores_it(document: dict[str, Any]) -> None:
    declared = Toleration.model_validate(document)
    assert toleration_wire(toleration(declared)) == server_form(declared.to_wire())


SOURCES = st.sampled_from(
    [
        {"secretKeyRef": {"name": "s", "key": "k", "optional": True}},
        {"configMapKeyRef": {"name": "", "key": "k"}},
        {"fieldRef": {"fieldPath": "metadata.uid"}},
        {"resourceFieldRef": {"resource": "limits.cpu", "containerName": "", "divisor": "1m"}},
        {"fileKeyRef": {"path": "p", "volumeName": "v", "key": "k"}},
    ]
)


@given(fields(value=WORDS, valueFrom=SOURCES))
def test_an_env_var_renders_as_the_server_stores_it(declared: dict[str, Any]) -> None:
    entry = EnvVar.model_validate({"name": "A", **declared})
    wire = env_var(Env(entry.name, entry.value, entry.value_from))
    assert wire == server_form(entry.to_wire())
