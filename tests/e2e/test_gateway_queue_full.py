"""Two gateway replicas on two nodes, one of them with its admission queue full
(`endpoint.maxQueue` requests in flight): that one answers 429 with `Retry-After` at once while
the other still admits and serves, and the full one admits again once its requests are
answered. Cache `None`.

What a user relies on: `maxQueue` bounds each replica on its own, so one busy replica refuses
what it cannot hold with an answer a client may retry, without refusing for the other replicas
and without dropping what it already admitted.
"""

from __future__ import annotations

import pytest
from kubernetes import client as k8s_client
from support.custom_resources import CustomResources

from .pods import SERVICE_NAME, one_ready_backend, settled_gateways
from .serving import Exchange, diagnosed, example, gateway_metric, start_chat, status
from .test_availability import two_gateways  # noqa: F401  (the module's two gateways)
from .workloads import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
MAX_QUEUE = 2
STREAM_TOKENS = 200
"""At the stub's 100 ms a token, streams of 20 s: the queue stays full while the test looks."""
REFUSED_WITHIN = 5.0
"""Seconds a refusal may take on a busy box: the gateway refuses without waiting for a slot."""
PENDING = "noctaya_gateway_pending"
QUEUE_FULL = 'noctaya_gateway_rejections_total{reason="queue_full"}'


def test_a_full_gateway_answers_429_with_retry_after_while_the_other_gateway_admits(
    api_client: k8s_client.ApiClient,
    namespace: str,
    two_gateways: None,  # noqa: F811
    gpus: None,
) -> None:
    _, service = example(endpoint={"maxQueue": MAX_QUEUE}, scaling={"min": 1, "max": 1})
    with diagnosed(api_client, namespace):
        CustomResources(api_client).create(service, namespace)
        gateways = settled_gateways(api_client, namespace, 2)
        assert len({gateway.spec.node_name for gateway in gateways}) == 2, "spread on two nodes"
        full, other = (str(gateway.metadata.name) for gateway in gateways)
        one_ready_backend(api_client, namespace)

        def pending(pod: str) -> float | None:
            return gateway_metric(api_client, namespace, pod, PENDING)

        held = [
            start_chat(api_client, namespace, SERVICE_NAME, pod=full, tokens=STREAM_TOKENS)
            for _ in range(MAX_QUEUE)
        ]
        wait_for(
            f"{full} streaming its {MAX_QUEUE} admitted requests, its queue full",
            lambda: all(e.tokens > 0 for e in held) and pending(full) == MAX_QUEUE,
        )

        refused = [
            start_chat(api_client, namespace, SERVICE_NAME, pod=full, stream=s)
            for s in (True, False)
        ]
        wait_for(
            f"{full} refusing at once",
            lambda: all(e.over.is_set() for e in refused),
            timeout=REFUSED_WITHIN,
        )
        for exchange in refused:
            _assert_queue_full(exchange)
        admitted = start_chat(api_client, namespace, SERVICE_NAME, pod=other, tokens=STREAM_TOKENS)
        wait_for(
            f"{other} streaming a request", lambda: admitted.tokens > 0 and pending(other) == 1
        )

        # All of it at once: the refusals and the other gateway's stream came while the full
        # gateway's streams were still under way, and what each gateway says is what it does.
        assert not any(e.over.is_set() for e in held), [e.describe() for e in held]
        assert pending(full) == MAX_QUEUE
        assert gateway_metric(api_client, namespace, full, QUEUE_FULL) == len(refused)
        found = status(api_client, namespace, SERVICE_NAME)
        assert (found.get("phase"), found.get("replicas")) == ("Ready", 1), found

        exchanges = [*held, admitted]
        wait_for(
            "every admitted request answered",
            lambda: all(e.over.is_set() for e in exchanges),
            timeout=3 * STREAM_TOKENS / 10,
        )
        for exchange in exchanges:
            assert exchange.completed, exchange.describe()
            assert exchange.tokens == STREAM_TOKENS, exchange.describe()

        wait_for(f"{full} with its queue empty", lambda: pending(full) == 0)
        again = start_chat(api_client, namespace, SERVICE_NAME, pod=full)
        wait_for(f"{full} answering again", again.over.is_set)
        assert again.completed, again.describe()


def _assert_queue_full(exchange: Exchange) -> None:
    """Refused as the contract has it: 429, `Retry-After: 5`, the OpenAI error `queue_full`,
    within `REFUSED_WITHIN` of being sent."""
    assert exchange.status == 429, exchange.describe()
    assert exchange.retry_after == "5", exchange.describe()
    assert any(b'"code":"queue_full"' in line for line in exchange.lines), exchange.describe()
    assert exchange.ended - exchange.started <= REFUSED_WITHIN, exchange.describe()
