"""The EndpointSlice watch against an API server that misbehaves on purpose: a real HTTPS server on
loopback (certificates from the test PKI) that answers 410 Gone, ends watches, streams endless
or deeply nested lines, slips in slices of another Service, and checks the bearer token as it
rotates. What a real kube-apiserver does is proven in test_endpoints_watch."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import uvloop
from aiohttp import web
from noctaya.gateway.backend import endpoints
from noctaya.gateway.backend.endpoints import MAX_EVENT, Endpoint, EndpointWatch, WatchState
from noctaya.gateway.backend.kube_api import KubeApi
from support.envtest.pki import write_pki

from .support import eventually

Behaviour = Callable[[web.Request], Awaitable[web.StreamResponse]]
SERVICE = "backend"


def slice_document(name: str, address: str, *, service: str = SERVICE, rv: str = "1") -> Any:
    return {
        "metadata": {
            "name": name,
            "resourceVersion": rv,
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8000, "protocol": "TCP"}],
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
    }


def event(kind: str, document: Any) -> bytes:
    return json.dumps({"type": kind, "object": document}).encode() + b"\n"


class FakeApi:
    """Lists `items`; each watch takes the next behaviour of `watches`, else stays open."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.lists: list[dict[str, str]] = []
        self.watch_queries: list[dict[str, str]] = []
        self.watches: list[Behaviour] = []
        self.tokens: list[str] = []
        self.then: Behaviour = stay_open()
        """What each watch does once `watches` is used up."""
        self.sent = 0
        self.sent_at_list: list[int] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.tokens.append(request.headers.get("Authorization", ""))
        if request.query.get("watch") == "1":
            self.watch_queries.append(dict(request.query))
            behaviour = self.watches.pop(0) if self.watches else self.then
            return await behaviour(request)
        self.lists.append(dict(request.query))
        self.sent_at_list.append(self.sent)
        version = str(100 * len(self.lists))
        return web.json_response({"metadata": {"resourceVersion": version}, "items": self.items})


def answer(status: int) -> Behaviour:
    async def respond(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status)

    return respond


def stream(*parts: bytes, then_stay_open: bool = False) -> Behaviour:
    async def respond(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        for part in parts:
            await response.write(part)
        if then_stay_open:
            await asyncio.Event().wait()
        return response

    return respond


def _closing(request: web.Request) -> bool:
    return request.transport is None or request.transport.is_closing()


def stay_open() -> Behaviour:
    return stream(then_stay_open=True)


@contextlib.asynccontextmanager
async def fake_api(folder: Path, **names: Any) -> AsyncIterator[tuple[FakeApi, str, Path]]:
    """The fake API server on 127.0.0.1, its certificate from a new test PKI naming what
    `names` say (`write_pki`'s serving_ips and serving_names); its URL and CA file."""
    pki = await asyncio.to_thread(write_pki, folder, **names)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    await asyncio.to_thread(context.load_cert_chain, pki.serving_cert, pki.serving_key)
    fake = FakeApi()
    app = web.Application()
    app.router.add_get("/{tail:.*}", fake.handle)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield fake, f"https://127.0.0.1:{port}", pki.ca_cert
    finally:
        await runner.cleanup()


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[tuple[FakeApi, str, Path]]:
    """The fake API server, its URL and its CA file."""
    async with fake_api(tmp_path / "pki") as served:
        yield served


@pytest.fixture
async def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    await asyncio.to_thread(path.write_text, "first-token\n")
    return path


async def started(url: str, token_file: Path, ca_file: Path) -> EndpointWatch:
    api = KubeApi(url, str(token_file), str(ca_file), read_timeout=30.0)
    watch = EndpointWatch(api, "ns", SERVICE, retry=0.1)
    watch.start()
    return watch


def addresses(watch: EndpointWatch) -> list[str]:
    return sorted(endpoint.address for endpoint in watch.endpoints())


async def test_a_gone_watch_lists_again_and_sees_the_new_list(
    api: tuple[FakeApi, str, Path], token_file: Path
) -> None:
    fake, url, ca = api
    fake.items = [slice_document("a", "10.0.0.1")]
    fake.watches = [answer(410)]
    watch = await started(url, token_file, ca)
    try:
        await eventually(lambda: addresses(watch) == ["10.0.0.1"], what="the first list")
        fake.items = [slice_document("b", "10.0.0.2")]
        await eventually(lambda: len(fake.lists) == 2, what="a second list after 410")
        await eventually(lambda: addresses(watch) == ["10.0.0.2"], what="the second list")
        assert watch.state is WatchState.WATCHING
        assert fake.watch_queries[0]["resourceVersion"] == "100"
        assert fake.watch_queries[0]["allowWatchBookmarks"] == "true"
    finally:
        await watch.close()


async def test_an_error_event_saying_gone_lists_again(
    api: tuple[FakeApi, str, Path], token_file: Path
) -> None:
    fake, url, ca = api
    gone = {"kind": "Status", "code": 410, "reason": "Expired"}
    fake.watches = [stream(event("ERROR", gone), then_stay_open=True)]
    watch = await started(url, token_file, ca)
    try:
        await eventually(lambda: len(fake.lists) == 2, what="a second list")
    finally:
        await watch.close()


async def test_a_watch_the_server_ends_resumes_from_the_last_bookmark(
    api: tuple[FakeApi, str, Path], token_file: Path
) -> None:
    fake, url, ca = api
    bookmark = {"kind": "EndpointSlice", "metadata": {"resourceVersion": "4242"}}
    added = slice_document("a", "10.0.0.1", rv="4241")
    fake.watches = [stream(event("ADDED", added), event("BOOKMARK", bookmark))]
    watch = await started(url, token_file, ca)
    try:
        await eventually(lambda: len(fake.watch_queries) == 2, what="the watch resumed")
        assert fake.watch_queries[1]["resourceVersion"] == "4242"
        assert len(fake.lists) == 1  # resumed, not listed again
        assert addresses(watch) == ["10.0.0.1"]
    finally:
        await watch.close()


async def test_events_split_across_writes_and_blank_lines_are_read_whole(
    api: tuple[FakeApi, str, Path], token_file: Path
) -> None:
    fake, url, ca = api
    line = event("ADDED", slice_document("a", "10.0.0.1", rv="7"))
    fake.watches = [
        stream(b"\n", line[:5], line[5:40], line[40:] + b"\n", then_stay_open=True),
    ]
    watch = await started(url, token_file, ca)
    try:
        await eventually(lambda: addresses(watch) == ["10.0.0.1"], what="the split event")
        assert len(fake.lists) == 1
    finally:
        await watch.close()


async def test_an_endless_line_breaks_the_watch_before_it_is_all_held(
    api: tuple[FakeApi, str, Path], token_file: Path
) -> None:
    fake, url, ca = api
    piece = b"x" * 65536
    endless = MAX_EVENT * 16

    async def flood(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        try:
            while fake.sent < endless and not _closing(request):
                await response.write(piece)
                fake.sent += len(piece)
                # A write to a connection the peer reset returns at once, without a pause for
                # the loop to see the reset and close the transport: let it run.
                await asyncio.sleep(0)
        except (ConnectionError, RuntimeError):
            pass
        return response

    fake.watches = [flood]
    watch = await started(url, token_file, ca)
    try:
        await eventually(lambda: len(fake.lists) == 2, what="a second list", within=20)
        # the gateway dropped the connection soon after the bound, long before the flood's end
        assert fake.sent_at_list[1] < endless / 2
        assert watch.state is WatchState.WATCHING
    finally:
        await watch.close()


async def test_deeply_nested_or_malformed_events_break_only_the_watch(
    api: tuple[FakeApi, str, Path], token_file: Path
) -> None:
    fake, url, ca = api
    fake.watches = [
        stream(b"[" * 200_000 + b"]" * 200_000 + b"\n", then_stay_open=True),
        stream(b"{not json\n", then_stay_open=True),
        stream(b'"a string"\n' + event("ADDED", slice_document("a", "10.0.0.1"))),
    ]
    watch = await started(url, token_file, ca)
    try:
        await eventually(lambda: len(fake.lists) == 3, what="a list after each bad event")
        await eventually(lambda: addresses(watch) == ["10.0.0.1"], what="the good event")
    finally:
        await watch.close()


async def test_slices_of_another_service_are_ignored_even_when_served(
    api: tuple[FakeApi, str, Path], token_file: Path
) -> None:
    fake, url, ca = api
    fake.items = [slice_document("other", "10.0.0.9", service="other")]
    fake.watches = [
        stream(
            event("ADDED", slice_document("x", "10.0.0.8", service="other")),
            event("ADDED", slice_document("a", "10.0.0.1")),
            then_stay_open=True,
        )
    ]
    watch = await started(url, token_file, ca)
    try:
        await eventually(lambda: addresses(watch) == ["10.0.0.1"], what="this Service's pod")
    finally:
        await watch.close()


async def test_each_request_presents_the_token_the_file_holds_then(
    api: tuple[FakeApi, str, Path], token_file: Path
) -> None:
    fake, url, ca = api
    fake.then = stream()  # every watch ends at once: the gateway asks again
    watch = await started(url, token_file, ca)
    try:
        await eventually(lambda: len(fake.tokens) >= 2, what="the list and a watch")
        await asyncio.to_thread(token_file.write_text, "second-token")
        await eventually(lambda: fake.tokens[-1] == "Bearer second-token", what="the new token")
        assert fake.tokens[0] == "Bearer first-token"
        assert len(fake.watch_queries) < 12  # watches ended at once are not asked in a hot loop
    finally:
        await watch.close()


async def test_401_falls_back_and_a_later_list_that_works_recovers(
    api: tuple[FakeApi, str, Path], token_file: Path
) -> None:
    fake, url, ca = api
    fake.watches = [answer(401)]
    api_client = KubeApi(url, str(token_file), str(ca), read_timeout=30.0)
    watch = EndpointWatch(api_client, "ns", SERVICE, retry=0.1)
    seen: list[tuple[WatchState, str]] = []
    watch.on_change(lambda: seen.append((watch.state, watch.reason)))
    watch.start()
    try:
        await eventually(lambda: len(fake.lists) == 2, what="the retry after 401")
        await eventually(lambda: watch.state is WatchState.WATCHING, what="the recovery")
        refused = [reason for state, reason in seen if state is WatchState.FALLBACK]
        assert len(refused) == 1
        assert "401" in refused[0]
        assert "first-token" not in refused[0]
    finally:
        await watch.close()


async def test_a_server_the_ca_does_not_sign_is_never_trusted(
    api: tuple[FakeApi, str, Path], token_file: Path, tmp_path: Path
) -> None:
    fake, url, _ = api
    other = await asyncio.to_thread(write_pki, tmp_path / "other")
    watch = await started(url, token_file, other.ca_cert)
    try:
        await eventually(lambda: "cannot list" in watch.reason, what="the refused handshake")
        assert watch.state is WatchState.FALLBACK
        assert fake.tokens == []  # the token never left the gateway
        assert watch.endpoints() == ()
    finally:
        await watch.close()


@pytest.mark.parametrize(
    "names",
    [
        {"serving_ips": ("127.0.0.2",)},
        {"serving_ips": ("10.0.0.1",), "serving_names": ("127.0.0.1",)},
    ],
    ids=["another-address", "the-address-as-a-name"],
)
async def test_a_certificate_the_ca_signs_for_another_address_is_never_trusted(
    names: dict[str, Any], token_file: Path, tmp_path: Path
) -> None:
    """The server is reached at an IP address, so only an IP address entry of its certificate
    may match it (the gateway checks that itself, RFC 6125 §6.2.1)."""
    async with fake_api(tmp_path / "pki", **names) as (fake, url, ca_file):
        watch = await started(url, token_file, ca_file)
        try:
            await eventually(lambda: "not valid for" in watch.reason, what="the refusal")
            assert watch.state is WatchState.FALLBACK
            assert fake.tokens == []  # the token never left the gateway
        finally:
            await watch.close()


async def test_the_watch_works_on_uvloop_as_the_gateway_runs_it(
    api: tuple[FakeApi, str, Path], token_file: Path
) -> None:
    """The gateway process runs uvloop, whose TLS takes only `str` server names."""
    fake, url, ca_file = api
    fake.items = [slice_document("a", "10.1.2.3")]

    async def listed() -> list[str]:
        watch = await started(url, token_file, ca_file)
        try:
            await eventually(lambda: watch.state is WatchState.WATCHING, what="the list")
            return addresses(watch)
        finally:
            await watch.close()

    assert await asyncio.to_thread(uvloop.run, listed()) == ["10.1.2.3"]


async def test_an_oversized_token_file_is_refused_unread(
    api: tuple[FakeApi, str, Path], token_file: Path
) -> None:
    fake, url, ca = api
    await asyncio.to_thread(token_file.write_bytes, b"t" * (1024 * 1024))
    watch = await started(url, token_file, ca)
    try:
        await eventually(lambda: "larger than" in watch.reason, what="the refusal")
        assert fake.tokens == []
        assert watch.endpoints() == ()
        assert watch.state is WatchState.FALLBACK
    finally:
        await watch.close()


@pytest.mark.parametrize("which", ["token", "ca"])
async def test_a_fifo_in_place_of_the_token_or_ca_file_is_refused_not_waited_on(
    api: tuple[FakeApi, str, Path], token_file: Path, tmp_path: Path, which: str
) -> None:
    """Nothing writes the FIFO: a read of it would block its thread, and the watch, for good."""
    fake, url, ca = api
    fifo = tmp_path / f"{which}-fifo"
    os.mkfifo(fifo)
    watch = await started(
        url, fifo if which == "token" else token_file, fifo if which == "ca" else ca
    )
    try:
        await eventually(lambda: "not a regular file" in watch.reason, what="the refusal")
        assert fake.tokens == []
        assert watch.state is WatchState.FALLBACK
    finally:
        await watch.close()


def test_a_pod_listed_by_two_slices_is_one_endpoint_ready_if_either_says_so() -> None:
    watch = EndpointWatch(None, "ns", SERVICE, retry=1.0)
    not_ready = slice_document("a", "10.0.0.1")
    not_ready["endpoints"][0]["conditions"] = {"ready": False}
    watch._apply({"type": "ADDED", "object": not_ready}, "1")
    watch._apply({"type": "ADDED", "object": slice_document("b", "10.0.0.1")}, "2")
    assert watch.endpoints() == (
        Endpoint("10.0.0.1", 8000, ready=True, serving=True, terminating=False),
    )


@pytest.mark.parametrize("content", [b"not a certificate", b"\xff" * 16, b"-" * (2 * 1024 * 1024)])
async def test_a_ca_file_that_is_no_bundle_is_refused(
    api: tuple[FakeApi, str, Path], token_file: Path, tmp_path: Path, content: bytes
) -> None:
    fake, url, _ = api
    ca = tmp_path / "bad-ca.crt"
    await asyncio.to_thread(ca.write_bytes, content)
    watch = await started(url, token_file, ca)
    try:
        await eventually(lambda: "cannot load the CA file" in watch.reason, what="the refusal")
        assert watch.state is WatchState.FALLBACK
        assert fake.tokens == []
    finally:
        await watch.close()


async def test_an_unexpected_error_in_the_watch_falls_back_logged_and_lists_again(
    api: tuple[FakeApi, str, Path],
    token_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Whatever fails in the watch task, the gateway says so and keeps trying: a task that
    died silently would leave it on the Service for good."""
    fake, url, ca = api
    fake.items = [slice_document("a", "10.0.0.1")]
    real = endpoints.slice_endpoints
    failures = [KeyError("a defect")]

    def failing_once(item: Any, service: str) -> Any:
        if failures:
            raise failures.pop()
        return real(item, service)

    monkeypatch.setattr(endpoints, "slice_endpoints", failing_once)
    watch = await started(url, token_file, ca)
    try:
        await eventually(lambda: addresses(watch) == ["10.0.0.1"], what="the list after it")
        assert watch.state is WatchState.WATCHING
        assert len(fake.lists) == 2
        assert "EndpointSlice watch failed" in caplog.text
    finally:
        await watch.close()
