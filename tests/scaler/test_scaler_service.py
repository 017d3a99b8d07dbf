"""The ExternalScaler as KEDA sees it, over real gRPC, with demand published by the test."""

from __future__ import annotations

import asyncio
import socket

import grpc
import h2.config
import h2.connection
import h2.events
import pytest
from gateway.support import eventually
from noctaya.gateway.demand.feed import DemandFeed
from noctaya.gateway.scaler.messages import ScaledObjectRef
from noctaya.gateway.scaler.service import MAX_ACTIVE_STREAMS, ExternalScalerService
from noctaya.local.externalscaler import externalscaler_pb2 as pb

from .conftest import Scaler, streams_gauge
from .keda import STEP_TIMEOUT, ActiveStream, Keda, ref


async def test_is_active_and_metrics_follow_the_demand(scaler: Scaler, keda: Keda) -> None:
    assert await keda.is_active() is False
    assert await keda.metric() == 0
    scaler.feed.publish(7)
    assert await keda.is_active() is True
    assert await keda.metric() == 7


async def test_metric_spec_is_pending_with_the_target_value(keda: Keda) -> None:
    reply = await keda.stub.GetMetricSpec(ref({"targetValue": "2.5"}))
    (spec,) = reply.metricSpecs
    assert spec.metricName == "pending"
    assert spec.targetSizeFloat == 2.5


async def test_stream_sends_the_current_state_at_once_then_only_transitions(
    scaler: Scaler, keda: Keda
) -> None:
    stream = keda.stream()
    assert await stream.next() is False
    for demand in (1, 2, 3, 0):  # three active values, then inactive
        scaler.feed.publish(demand)
        assert await keda.metric() == demand  # a round trip lets the stream see each value
    assert await stream.next() is True
    assert await stream.next() is False, "a repeated True would have arrived first"
    scaler.feed.publish(4)
    assert await stream.next() is True
    stream.cancel()


async def test_every_connected_stream_sees_each_transition(scaler: Scaler, keda: Keda) -> None:
    streams = [keda.stream() for _ in range(5)]
    assert [await s.next() for s in streams] == [False] * 5
    await eventually(lambda: scaler.streams() == 5)
    scaler.feed.publish(1)
    assert [await s.next() for s in streams] == [True] * 5
    scaler.feed.publish(0)
    assert [await s.next() for s in streams] == [False] * 5
    for stream in streams:
        stream.cancel()


async def test_a_reconnecting_stream_gets_the_current_state_immediately(
    scaler: Scaler, keda: Keda
) -> None:
    first = keda.stream()
    assert await first.next() is False
    scaler.feed.publish(3)
    assert await first.next() is True
    first.cancel()
    again = keda.stream()
    assert await again.next() is True
    again.cancel()


async def test_streams_gauge_counts_open_streams_and_drops_when_keda_leaves(
    scaler: Scaler, keda: Keda
) -> None:
    assert scaler.streams() == 0
    streams = [keda.stream() for _ in range(3)]
    for stream in streams:
        await stream.next()
    await eventually(lambda: scaler.streams() == 3)
    streams[0].cancel()
    await eventually(lambda: scaler.streams() == 2)
    await keda.close()  # the connection goes away with the other two
    await eventually(lambda: scaler.streams() == 0)


async def test_stopping_the_server_ends_streams_cleanly_without_waiting_for_grace(
    scaler: Scaler, keda: Keda
) -> None:
    stream = keda.stream()
    assert await stream.next() is False
    loop = asyncio.get_running_loop()
    started = loop.time()
    await scaler.server.stop(30)
    assert loop.time() - started < 5, "stop waited for the stream's grace period"
    assert await stream.ended()
    assert await stream.call.code() == grpc.StatusCode.OK
    assert scaler.streams() == 0


async def test_stream_metric_spec_is_answered_unimplemented(keda: Keda) -> None:
    call = keda.channel.unary_stream(
        "/externalscaler.ExternalScaler/StreamMetricSpec",
        request_serializer=pb.ScaledObjectRef.SerializeToString,
        response_deserializer=pb.GetMetricSpecResponse.FromString,
    )(ref())
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call.read()
    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_oversized_request_is_refused_and_the_scaler_keeps_serving(
    scaler: Scaler, keda: Keda
) -> None:
    scaler.feed.publish(2)
    huge = {"targetValue": "1", "padding": "x" * (128 * 1024)}
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await keda.is_active(huge)
    assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert await keda.is_active() is True


FLOOD_TIMEOUT = 60.0
"""A thousand streams take seconds on a busy two-core machine; generous, never waited out."""


async def test_a_flood_of_streams_never_locks_keda_out(scaler: Scaler, keda: Keda) -> None:
    """More streams than the server's concurrent-RPC limit (1024): the oldest are ended (and
    reconnect), so unary calls still find room and a fresh stream gets the state at once.
    Which streams are oldest is the order they reached the server, not the order they were
    made in, so any of the flood may be among those ended."""
    scaler.feed.publish(3)
    channels = [
        grpc.aio.insecure_channel(
            f"127.0.0.1:{scaler.server.port}", options=[("grpc.use_local_subchannel_pool", 1)]
        )
        for _ in range(9)
    ]
    flood = [Keda(channel).stream() for channel in channels for _ in range(120)]  # 1080 RPCs
    try:
        outcomes = await asyncio.gather(*(_first_outcome(stream) for stream in flood))
        assert "RESOURCE_EXHAUSTED" not in outcomes
        assert outcomes.count("message") > 1000
        await eventually(lambda: scaler.streams() == MAX_ACTIVE_STREAMS, within=FLOOD_TIMEOUT)
        over = len(flood) - MAX_ACTIVE_STREAMS
        await eventually(
            lambda: sum(stream.call.done() for stream in flood) >= over, within=FLOOD_TIMEOUT
        )
        ended = [stream for stream in flood if stream.call.done()]
        assert [await stream.call.code() for stream in ended] == [grpc.StatusCode.OK] * len(ended)
        assert await keda.is_active() is True
        assert await keda.metric() == 3
        fresh = keda.stream()
        assert await fresh.next() is True
        fresh.cancel()
    finally:
        for stream in flood:
            stream.cancel()
        for channel in channels:
            await channel.close()


async def _first_outcome(stream: ActiveStream) -> str:
    """The first outcome: "message" (one arrived), "EOF", or the status code it failed with."""
    try:
        return "EOF" if await stream.ended(within=FLOOD_TIMEOUT) else "message"
    except grpc.aio.AioRpcError as error:
        return error.code().name


async def test_a_compressed_request_is_bounded_by_its_decompressed_size(
    scaler: Scaler, keda: Keda
) -> None:
    """50 MB of zeros gzip to a few KiB: the 64 KiB limit must hold after decompression."""
    bomb = ref({"targetValue": "1", "padding": "0" * 50_000_000})
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await keda.stub.IsActive(bomb, timeout=30, compression=grpc.Compression.Gzip)
    assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    scaler.feed.publish(1)
    assert await keda.is_active() is True


async def test_thousands_of_metadata_entries_and_empty_names_are_served(
    scaler: Scaler, keda: Keda
) -> None:
    """KEDA passes the trigger metadata through: what fits the 64 KiB limit is simply served."""
    metadata = {f"k{n}": "" for n in range(5000)} | {"": "", "targetValue": "1"}
    request = pb.ScaledObjectRef(name="", namespace="", scalerMetadata=metadata)
    assert request.ByteSize() < 64 * 1024
    scaler.feed.publish(2)
    assert (await keda.stub.IsActive(request, timeout=10)).result is True


async def test_a_flip_reaches_the_stream_in_the_event_loops_next_turn() -> None:
    """Under load one turn of the loop lasts milliseconds, so the push may cost only one: the
    call's task itself waits for the change (driven here as the scaler's app drives it)."""
    feed = DemandFeed(0)
    service = ExternalScalerService(feed, streams_gauge()[0])
    stream = service.open_stream(ScaledObjectRef(scaler_metadata={"targetValue": "1"}))
    messages = aiter(stream)
    assert pb.IsActiveResponse.FromString(await anext(messages)).result is False
    flip = asyncio.ensure_future(anext(messages))
    await asyncio.sleep(0)  # the call's task now waits for a change
    feed.publish(1)
    await asyncio.sleep(0)  # one turn
    assert flip.done(), "the flip took more than one turn of the event loop"
    assert pb.IsActiveResponse.FromString(flip.result()).result is True
    stream.close()


async def test_a_flip_is_on_the_wire_in_the_event_loops_next_turn(scaler: Scaler) -> None:
    """The same bound through the server: the stream's task writes the message itself, in the
    turn it wakes (hypercorn would leave the write to its HTTP/2 send task, a turn later)."""
    loop = asyncio.get_running_loop()
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    client.initiate_connection()
    client.send_headers(
        1,
        [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/externalscaler.ExternalScaler/StreamIsActive"),
            (":authority", "127.0.0.1"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ],
    )
    message = ref().SerializeToString()
    client.send_data(1, b"\x00" + len(message).to_bytes(4, "big") + message, end_stream=True)
    with socket.create_connection(("127.0.0.1", scaler.server.port)) as sock:
        sock.setblocking(False)
        await loop.sock_sendall(sock, client.data_to_send())
        received: list[h2.events.Event] = []
        async with asyncio.timeout(STEP_TIMEOUT):
            while not any(isinstance(event, h2.events.DataReceived) for event in received):
                received += client.receive_data(await loop.sock_recv(sock, 65536))
        await loop.sock_sendall(sock, client.data_to_send())  # settings and window acks
        await eventually(lambda: scaler.streams() == 1)
        scaler.feed.publish(1)
        await asyncio.sleep(0)  # one turn: the stream's task wakes and writes
        flip = client.receive_data(sock.recv(65536))
    (data,) = [event for event in flip if isinstance(event, h2.events.DataReceived)]
    assert pb.IsActiveResponse.FromString(data.data[5:]).result is True
