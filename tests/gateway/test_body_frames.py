"""HTTP/1.1 body chunks the gateway frames itself (`patches.body_frames`) are the bytes h11 would
have written, and every body h11 must count or frame otherwise still goes through h11."""

from __future__ import annotations

import h11
import pytest
from hypercorn.asyncio.worker_context import WorkerContext
from hypercorn.config import Config
from hypercorn.events import Event, RawData
from hypercorn.protocol.events import Body, EndBody, Response
from hypercorn.protocol.h11 import H11Protocol
from noctaya.gateway.server.patches.body_frames import BodyFramesH11Protocol

TOKENS = [b'data: {"delta":"tok%d "}\n\n' % index for index in range(5)] + [b"", b"x" * 70_000]


async def _answer(
    protocol_class: type[H11Protocol],
    request: bytes,
    headers: list[tuple[bytes, bytes]],
    through_h11: list[type[h11.Event]] | None = None,
) -> bytes:
    """What `protocol_class` writes for a response with `headers` and the TOKENS as its body;
    the types of the events h11 was given go to `through_h11`."""
    written: list[bytes] = []

    async def send(event: Event) -> None:
        if isinstance(event, RawData):
            written.append(event.data)

    config = Config()
    config.include_server_header = False
    config.include_date_header = False
    context = WorkerContext(None)
    protocol = protocol_class(None, config, context, None, None, False, None, None, send)  # type: ignore[arg-type]
    protocol.connection.receive_data(request)
    connection = protocol.connection
    assert isinstance(connection, h11.Connection)
    assert isinstance(connection.next_event(), h11.Request)
    if through_h11 is not None:
        h11_send = connection.send

        def counted(event: h11.Event) -> bytes | None:
            through_h11.append(type(event))
            return h11_send(event)

        connection.send = counted  # type: ignore[method-assign, assignment]
    await protocol.stream_send(Response(stream_id=1, headers=headers, status_code=200))
    for token in TOKENS:
        await protocol.stream_send(Body(stream_id=1, data=token))
    await protocol.stream_send(EndBody(stream_id=1))
    return b"".join(written)


SSE = [(b"content-type", b"text/event-stream")]
HTTP11 = b"POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\ncontent-length: 0\r\n\r\n"
HTTP10 = b"POST /v1/chat/completions HTTP/1.0\r\ncontent-length: 0\r\n\r\n"


@pytest.mark.parametrize(
    ("request_head", "headers"),
    [
        (HTTP11, SSE),
        (HTTP11, [*SSE, (b"content-length", b"%d" % sum(map(len, TOKENS)))]),
        (HTTP10, SSE),
    ],
    ids=["chunked", "content-length", "http1.0"],
)
async def test_a_streamed_body_leaves_as_the_bytes_h11_writes(
    request_head: bytes, headers: list[tuple[bytes, bytes]]
) -> None:
    through_h11: list[type[h11.Event]] = []
    ours = await _answer(BodyFramesH11Protocol, request_head, headers, through_h11)
    assert ours == await _answer(H11Protocol, request_head, headers)
    chunked = request_head is HTTP11 and len(headers) == 1
    if chunked:
        assert b"Transfer-Encoding: chunked" in ours
        assert b"%x\r\n%s\r\n" % (len(TOKENS[0]), TOKENS[0]) in ours
    # A chunked body's chunks are framed here; any other body's go through h11.
    assert (h11.Data in through_h11) is not chunked
    assert through_h11[0] is h11.Response
    assert through_h11[-1] is h11.EndOfMessage


async def test_a_body_longer_than_its_content_length_is_still_refused_by_h11() -> None:
    """h11 counts a Content-Length body; the gateway's framing never takes such a body."""
    with pytest.raises(h11.LocalProtocolError):
        await _answer(BodyFramesH11Protocol, HTTP11, [(b"content-length", b"3")])
