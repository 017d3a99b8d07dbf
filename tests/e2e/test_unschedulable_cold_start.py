"""A cold request to a backend that can never be scheduled (it asks for more accelerators than
any node advertises): `reject` mode answers 503 with `Retry-After` at once, `keepalive` mode
answers when the service's `activationTimeout` runs out (a stream with heartbeats until then),
and meanwhile the service says its backend is unschedulable, as its pod is. Cache `None`.

What a user relies on: a model that cannot start never holds a client longer than the
activation timeout, and the status says why it does not start.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s_client
from support.custom_resources import CustomResources

from .conftest import GPUS
from .pods import BACKEND_PODS, SERVICE_NAME, live_pods
from .serving import Exchange, diagnosed, example, start_chat, status, wait_idle
from .workloads import GPU, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
ACCELERATORS = 2 * int(GPUS)
"""Per backend replica: twice what the `gpus` fixture advertises on one node."""
ACTIVATION_SECONDS = 20
AT_ONCE = 5.0
"""Seconds a `reject` answer may take on a busy box."""
LATE = 5.0
"""Seconds past `activationTimeout` a `keepalive` answer may take: the gateway checks every half
second."""
HEARTBEATS = ACTIVATION_SECONDS // 2
"""At least this many heartbeats on a held stream: one a second is asked for, half is enough to
tell heartbeats kept coming from one or two sent at the start."""
UNSCHEDULABLE = "SchedulingDelayed"


def test_reject_mode_answers_503_at_once_while_the_service_says_its_backend_is_unschedulable(
    api_client: k8s_client.ApiClient, namespace: str, installed: None, gpus: None
) -> None:
    _, service = example(
        resources={"accelerators": ACCELERATORS},
        scaling={"activationTimeout": f"{ACTIVATION_SECONDS}s"},
        endpoint={"coldStart": {"mode": "reject"}},
    )
    with diagnosed(api_client, namespace):
        _assert_no_node_fits(api_client)
        CustomResources(api_client).create(service, namespace)
        wait_idle(api_client, namespace)

        first = _refused_at_once(api_client, namespace, [True])
        wait_for(
            "the service saying its backend is unschedulable",
            lambda: _says_unschedulable(api_client, namespace),
            timeout=120,
        )
        # Retried while the service says so: refused at once again, and the status still says
        # why, since the backend still cannot be placed.
        retried = _refused_at_once(api_client, namespace, [True, False])
        assert _says_unschedulable(api_client, namespace), status(
            api_client, namespace, SERVICE_NAME
        )
        for exchange in [*first, *retried]:
            assert exchange.retry_after == "10", exchange.describe()
            assert any(b'"code":"cold_start"' in line for line in exchange.lines), (
                exchange.describe()
            )

        # The activation the refusals asked for ends with its lease: the backend is scaled back
        # to zero rather than waited for forever, and the status says so.
        wait_idle(api_client, namespace)


def test_keepalive_answers_within_the_activation_timeout_while_the_service_says_why(
    api_client: k8s_client.ApiClient, namespace: str, installed: None, gpus: None
) -> None:
    _, service = example(  # keepalive, heartbeats every second
        resources={"accelerators": ACCELERATORS},
        scaling={"activationTimeout": f"{ACTIVATION_SECONDS}s"},
    )
    with diagnosed(api_client, namespace):
        _assert_no_node_fits(api_client)
        CustomResources(api_client).create(service, namespace)
        wait_idle(api_client, namespace)

        held = [start_chat(api_client, namespace, SERVICE_NAME, stream=s) for s in (True, False)]
        wait_for(
            "the service saying its backend is unschedulable",
            lambda: _says_unschedulable(api_client, namespace),
            timeout=ACTIVATION_SECONDS,
        )
        assert not any(e.over.is_set() for e in held), [e.describe() for e in held]
        wait_for(
            "every held request answered",
            lambda: all(e.over.is_set() for e in held),
            timeout=ACTIVATION_SECONDS + LATE,
        )
        stream, whole = held
        for exchange in held:
            waited = exchange.ended - exchange.started
            assert ACTIVATION_SECONDS <= waited <= ACTIVATION_SECONDS + LATE, (
                f"answered after {waited:.1f}s: {exchange.describe()}"
            )
            assert any(b'"code":"activation_timeout"' in line for line in exchange.lines), (
                exchange.describe()
            )
        assert stream.status == 200, stream.describe()
        assert stream.heartbeats >= HEARTBEATS, f"{stream.heartbeats} heartbeats"
        assert b"event: error" in stream.lines, stream.describe()
        assert stream.tokens == 0, stream.describe()
        assert b"data: [DONE]" not in stream.lines, stream.describe()
        assert whole.status == 503, whole.describe()
        assert whole.retry_after == "10", whole.describe()


def _assert_no_node_fits(api_client: k8s_client.ApiClient) -> None:
    """The premise: no node advertises the accelerators one backend asks for."""
    nodes = k8s_client.CoreV1Api(api_client).list_node().items
    advertised = {n.metadata.name: int((n.status.allocatable or {}).get(GPU, 0)) for n in nodes}
    assert max(advertised.values()) < ACCELERATORS, advertised


def _refused_at_once(
    api_client: k8s_client.ApiClient, namespace: str, streams: list[bool]
) -> list[Exchange]:
    """Cold requests (streaming or not, as `streams` says), each answered 503 within
    `AT_ONCE`."""
    sent = [start_chat(api_client, namespace, SERVICE_NAME, stream=s) for s in streams]
    wait_for("the cold requests answered", lambda: all(e.over.is_set() for e in sent), AT_ONCE)
    for exchange in sent:
        assert exchange.status == 503, exchange.describe()
        assert exchange.ended - exchange.started <= AT_ONCE, exchange.describe()
    return sent


def _says_unschedulable(api_client: k8s_client.ApiClient, namespace: str) -> dict[str, Any] | None:
    """The service's status once it says its backend is unschedulable (Loading, Ready=False
    `SchedulingDelayed` naming the pod, not Degraded) and a backend pod is indeed
    unschedulable for want of accelerators; None until both hold."""
    pods = live_pods(api_client, namespace, BACKEND_PODS)
    unplaced = [str(pod.metadata.name) for pod in pods if _insufficient_gpus(pod)]
    found = status(api_client, namespace, SERVICE_NAME)
    conditions = {c["type"]: c for c in found.get("conditions") or []}
    ready, degraded = conditions.get("Ready", {}), conditions.get("Degraded", {})
    says = (
        found.get("phase") == "Loading"
        and (ready.get("status"), ready.get("reason")) == ("False", UNSCHEDULABLE)
        and any(f'"{pod}" is unschedulable' in ready.get("message", "") for pod in unplaced)
        and degraded.get("status") == "False"
    )
    return found if says else None


def _insufficient_gpus(pod: k8s_client.V1Pod) -> bool:
    """The scheduler's own word on the pod: not scheduled, for want of accelerators."""
    for found in pod.status.conditions or []:
        if found.type == "PodScheduled" and found.status == "False":
            return found.reason == "Unschedulable" and f"Insufficient {GPU}" in (
                found.message or ""
            )
    return False
