"""The gateway sees its backend's pods: its own list-and-watch of the backend Service's
EndpointSlices against a real kube-apiserver, with a ServiceAccount token and the CA in files,
falling back to the Service URL where RBAC refuses it; and real HTTP through a real gateway to
engine stubs standing for the pods, on this machine's address (`host_address`), one port and
one EndpointSlice each."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from kubernetes import client as k8s_client
from noctaya.gateway.backend.endpoints import Endpoint, EndpointWatch, WatchState
from noctaya.gateway.backend.kube_api import KubeApi
from support.envtest import ControlPlane

from .conftest import StartGateway
from .kube_access import (
    NOT_READY,
    READY,
    TERMINATING,
    KubeAccess,
    Relay,
    host_address,
    kube_access,
)
from .support import Engine, Gateway, eventually, metric, start_engine

pytestmark = pytest.mark.integration

NOWHERE = "http://127.0.0.1:9"
"""The Service URL of tests where only pod addresses may be used: nothing listens there."""
STREAM = {"model": "m", "messages": [], "stream": True}


@pytest.fixture
async def access(
    control_plane: ControlPlane, api_client: k8s_client.ApiClient, namespace: str, tmp_path: Path
) -> KubeAccess:
    ca = control_plane.workdir / "pki" / "ca.crt"
    return await kube_access(api_client, namespace, control_plane.host, ca, tmp_path)


@pytest.fixture
async def pods() -> AsyncIterator[tuple[Engine, Engine]]:
    """Two engines on this machine's address; their streams last about 2 s."""
    host = host_address()
    started = [await start_engine(host, token_count=40, token_delay=0.05) for _ in range(2)]
    yield started[0], started[1]
    for engine in started:
        engine.server.close()


def port_of(engine: Engine) -> int:
    return int(engine.url.rsplit(":", 1)[1])


async def put_pod(access: KubeAccess, engine: Engine, conditions: dict[str, bool]) -> None:
    """The slice named after the engine's port, naming its address with `conditions`."""
    address = engine.url.split("//", 1)[1].rsplit(":", 1)[0]
    await access.put_slice(f"pod-{port_of(engine)}", [(address, conditions)], port_of(engine))


def routed_ports(gateway: Gateway) -> list[int]:
    app = gateway.server.app
    assert app is not None
    return sorted(replica.endpoint.port for replica in app.replicas._routable)


@contextlib.asynccontextmanager
async def watching(access: KubeAccess, api_url: str | None = None) -> AsyncIterator[EndpointWatch]:
    wanted = access.endpoints(api_url)
    assert wanted.api_url is not None
    api = KubeApi(wanted.api_url, wanted.token_file, wanted.ca_file, read_timeout=60.0)
    watch = EndpointWatch(api, wanted.namespace, wanted.service, retry=0.2)
    watch.start()
    try:
        yield watch
    finally:
        await watch.close()


def watch_of(gateway: Gateway) -> EndpointWatch:
    app = gateway.server.app
    assert app is not None
    assert app.endpoints is not None
    return app.endpoints


async def started_watching(gateway: Gateway) -> None:
    watch = watch_of(gateway)
    await eventually(lambda: watch.state is WatchState.WATCHING, what="the watch to work")


async def test_the_watch_follows_adds_ready_flips_terminating_and_deletes(
    access: KubeAccess,
) -> None:
    await access.bind()
    async with watching(access) as watch:
        await eventually(lambda: watch.state is WatchState.WATCHING, what="the first list")
        assert watch.endpoints() == ()
        told: list[tuple[Endpoint, ...]] = []
        watch.on_change(lambda: told.append(watch.endpoints()))

        await access.put_slice("a", [("10.0.0.1", NOT_READY)], 8000)
        starting = (Endpoint("10.0.0.1", 8000, ready=False, serving=False, terminating=False),)
        await eventually(lambda: watch.endpoints() == starting, what="the added pod")
        assert told[-1] == starting

        await access.put_slice("a", [("10.0.0.1", READY), ("10.0.0.2", READY)], 8000)
        both = {
            Endpoint("10.0.0.1", 8000, ready=True, serving=True, terminating=False),
            Endpoint("10.0.0.2", 8000, ready=True, serving=True, terminating=False),
        }
        await eventually(lambda: set(watch.endpoints()) == both, what="the ready flip")

        await access.put_slice("a", [("10.0.0.1", TERMINATING), ("10.0.0.2", READY)], 8000)
        going = Endpoint("10.0.0.1", 8000, ready=False, serving=True, terminating=True)
        await eventually(lambda: going in watch.endpoints(), what="the terminating pod")

        await access.put_slice("b", [("10.0.0.3", READY)], 9000)
        await eventually(lambda: len(watch.endpoints()) == 3, what="a second slice")
        await access.delete_slice("a")
        only_b = (Endpoint("10.0.0.3", 9000, ready=True, serving=True, terminating=False),)
        await eventually(lambda: watch.endpoints() == only_b, what="the deleted slice gone")
        assert watch.state is WatchState.WATCHING


async def test_only_ip_addresses_of_the_slice_s_family_are_kept(access: KubeAccess) -> None:
    await access.bind()
    async with watching(access) as watch:
        await eventually(lambda: watch.state is WatchState.WATCHING, what="the first list")
        await access.put_slice("names", [("pod.example.com", READY)], 8000, address_type="FQDN")
        await access.put_slice("v6", [("fd00::1", READY)], 8000, address_type="IPv6")
        v6 = Endpoint("fd00::1", 8000, ready=True, serving=True, terminating=False)
        await eventually(lambda: watch.endpoints() == (v6,), what="the IPv6 pod")
        await asyncio.sleep(0.3)
        assert watch.endpoints() == (v6,)  # the FQDN slice named no pod


async def test_the_watch_lists_again_after_its_connection_breaks(
    access: KubeAccess, control_plane: ControlPlane
) -> None:
    await access.bind()
    relay = Relay(("127.0.0.1", control_plane.secure_port))
    await relay.start()
    try:
        async with watching(access, relay.url) as watch:
            await access.put_slice("a", [("10.0.0.1", READY)], 8000)
            await eventually(lambda: len(watch.endpoints()) == 1, what="the first pod")
            connections = relay.connections
            relay.cut()
            await access.delete_slice("a")
            await access.put_slice("b", [("10.0.0.2", READY)], 8000)
            later = (Endpoint("10.0.0.2", 8000, ready=True, serving=True, terminating=False),)
            await eventually(lambda: watch.endpoints() == later, what="what changed meanwhile")
            assert relay.connections > connections
            assert watch.state is WatchState.WATCHING
    finally:
        await relay.close()


async def test_refused_by_rbac_the_gateway_uses_the_service_then_the_pods_once_bound(
    access: KubeAccess,
    engine: Engine,
    pods: tuple[Engine, Engine],
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No RoleBinding: 403, so the Service URL (the `engine`), said once in the log and in the
    gauge; the binding appears and the next retry follows the pods."""
    pod, _ = pods
    await put_pod(access, pod, READY)
    caplog.set_level(logging.WARNING, logger="noctaya.gateway")
    gateway = await start_gateway(
        engine.url, backend_endpoints=access.endpoints(), endpoints_retry_interval=0.1
    )
    watch = watch_of(gateway)
    await eventually(lambda: "403" in watch.reason, what="the refusal")
    await asyncio.sleep(0.5)  # several retries, each refused
    refusals = [r for r in caplog.records if "cannot follow the pods" in r.getMessage()]
    assert len(refusals) == 1, [r.getMessage() for r in refusals]
    text = await gateway.metrics(http)
    assert metric(text, "noctaya_gateway_endpoints_watch", {"state": "fallback"}) == 1
    assert metric(text, "noctaya_gateway_endpoints_watch", {"state": "watching"}) == 0
    async with http.post(f"{gateway.url}/v1/completions", json={}) as response:
        assert response.status == 200
    assert len(engine.requests) == 1
    assert not pod.requests

    await access.bind()
    await started_watching(gateway)
    text = await gateway.metrics(http)
    assert metric(text, "noctaya_gateway_endpoints_watch", {"state": "watching"}) == 1
    async with http.post(f"{gateway.url}/v1/completions", json={}) as response:
        assert response.status == 200
    assert len(pod.requests) == 1
    assert len(engine.requests) == 1


async def test_without_its_token_file_the_gateway_uses_the_service_until_it_appears(
    access: KubeAccess, engine: Engine, start_gateway: StartGateway
) -> None:
    await access.bind()
    token = access.token_file.read_bytes()
    access.token_file.unlink()
    gateway = await start_gateway(
        engine.url, backend_endpoints=access.endpoints(), endpoints_retry_interval=0.1
    )
    watch = watch_of(gateway)
    await eventually(lambda: "token file" in watch.reason, what="the missing token")
    assert watch.state is WatchState.FALLBACK
    assert token.decode() not in watch.reason
    access.token_file.write_bytes(token)
    await started_watching(gateway)


async def test_each_request_goes_to_the_replica_with_the_fewest_in_flight(
    access: KubeAccess,
    pods: tuple[Engine, Engine],
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
) -> None:
    """Two streams on the first pod alone; the second turns ready, and the next two streams
    both go to it, where turn-taking would send one of them to the busy pod."""
    first, second = pods
    await access.bind()
    await put_pod(access, first, READY)
    await put_pod(access, second, NOT_READY)
    gateway = await start_gateway(NOWHERE, backend_endpoints=access.endpoints())
    await started_watching(gateway)
    await eventually(lambda: routed_ports(gateway) == [port_of(first)], what="the first pod")
    url = f"{gateway.url}/v1/chat/completions"
    streams = [asyncio.ensure_future(_stream(http, url)) for _ in range(2)]
    await eventually(lambda: first.active_streams == 2, what="two streams on the first pod")
    await put_pod(access, second, READY)
    await eventually(lambda: len(routed_ports(gateway)) == 2, what="the second pod ready")
    for expected in (1, 2):
        streams.append(asyncio.ensure_future(_stream(http, url)))
        await eventually(lambda n=expected: second.active_streams == n, what="the idle pod")
    assert first.active_streams == 2
    assert await asyncio.gather(*streams) == [200] * 4


async def test_a_terminating_replica_gets_no_new_request_while_its_stream_finishes(
    access: KubeAccess,
    pods: tuple[Engine, Engine],
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
) -> None:
    first, second = pods
    await access.bind()
    await put_pod(access, first, READY)
    gateway = await start_gateway(NOWHERE, backend_endpoints=access.endpoints())
    await started_watching(gateway)
    await eventually(lambda: routed_ports(gateway) == [port_of(first)], what="the first pod")
    streaming = asyncio.ensure_future(_stream(http, f"{gateway.url}/v1/chat/completions"))
    await eventually(lambda: first.active_streams == 1, what="a stream on the first pod")
    await put_pod(access, first, TERMINATING)
    await put_pod(access, second, READY)
    await eventually(lambda: routed_ports(gateway) == [port_of(second)], what="the handover")
    assert first.active_streams == 1
    for _ in range(4):
        async with http.post(f"{gateway.url}/v1/completions", json={}) as response:
            assert response.status == 200
    assert len(second.requests) == 4
    assert len(first.requests) == 1
    assert await streaming == 200  # the terminating pod's stream ran to its end
    assert first.active_streams == 0


async def test_a_replica_that_refuses_connections_is_skipped_and_the_request_retried(
    access: KubeAccess,
    pods: tuple[Engine, Engine],
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
) -> None:
    first, second = pods
    second.server.close()  # its address now refuses connections
    await second.server.wait_closed()
    await access.bind()
    await put_pod(access, first, READY)
    await put_pod(access, second, READY)
    gateway = await start_gateway(NOWHERE, backend_endpoints=access.endpoints())
    await started_watching(gateway)
    await eventually(lambda: len(routed_ports(gateway)) == 2, what="both pods routable")
    # Two streams at once: whichever pod the first goes to, one of the two tries the refusing
    # pod (the other is then the one with fewer in flight), so it is set aside for certain.
    url = f"{gateway.url}/v1/chat/completions"
    assert await asyncio.gather(_stream(http, url), _stream(http, url)) == [200, 200]
    assert len(first.requests) == 2
    assert routed_ports(gateway) == [port_of(first)]  # the refusing pod was set aside
    # It listens again, its slice unchanged: the gateway's own probe takes it back. While a
    # stream is held on one pod, the next request can only go to the other (between idle
    # pods the choice is random), so the taken-back pod gets exactly one of the two.
    host = second.url.split("//", 1)[1].rsplit(":", 1)[0]
    back = await start_engine(host, port_of(second), token_count=40, token_delay=0.05)
    try:
        await eventually(lambda: len(routed_ports(gateway)) == 2, what="the pod taken back")
        streaming = asyncio.ensure_future(_stream(http, url))
        await eventually(
            lambda: first.active_streams + back.active_streams == 1, what="a stream held"
        )
        async with http.post(f"{gateway.url}/v1/completions", json={}) as response:
            assert response.status == 200
        assert len(back.requests) == 1, "no request reached the pod taken back"
        assert len(first.requests) == 3
        assert await streaming == 200
    finally:
        back.server.close()


async def test_a_held_request_goes_to_a_pod_its_probe_found_ready_before_its_slice_did(
    access: KubeAccess,
    pods: tuple[Engine, Engine],
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
) -> None:
    first, _ = pods
    first.make_unready()
    await access.bind()
    await put_pod(access, first, NOT_READY)
    gateway = await start_gateway(NOWHERE, backend_endpoints=access.endpoints())
    await started_watching(gateway)
    watch = watch_of(gateway)
    await eventually(lambda: len(watch.endpoints()) == 1, what="the pod listed")
    held = asyncio.ensure_future(http.post(f"{gateway.url}/v1/completions", json={}))
    await eventually(lambda: first.health_probes >= 2, what="the pod probed while held")
    assert not held.done()
    first.make_ready()
    response = await asyncio.wait_for(held, 5)
    assert response.status == 200
    response.release()
    assert len(first.requests) == 1
    assert watch.endpoints()[0].ready is False  # the slice still says not ready


async def _stream(http: aiohttp.ClientSession, url: str) -> int:
    async with http.post(url, json=STREAM) as response:
        await response.read()
        return response.status
