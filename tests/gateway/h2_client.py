"""A hand-driven HTTP/2 client over a real socket, for the frames and the misbehaviour (windows
never opened, malformed heads, floods) no library client produces."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.events
import h2.settings


def request_headers(
    path: str, method: str = "POST", *extra: tuple[str, str]
) -> list[tuple[str, str]]:
    return [
        (":method", method),
        (":path", path),
        (":scheme", "http"),
        (":authority", "127.0.0.1"),
        ("content-type", "application/json"),
        *extra,
    ]


@dataclass
class Reply:
    status: bytes = b""
    body: bytes = b""
    ended: bool = False
    reset: int | None = None
    """The RST_STREAM error code, if the server reset the stream."""


@dataclass
class RawH2:
    connection: h2.connection.H2Connection
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    replies: dict[int, Reply] = field(default_factory=dict)
    goaway: int | None = None
    """The GOAWAY error code, once the server sent one."""
    closed: bool = False
    acknowledge: bool = True
    """Open the window for what arrives; False models a client that never reads."""
    pings_acked: int = 0

    @classmethod
    async def open(cls, port: int, *, window: int | None = None, validate: bool = True) -> RawH2:
        config = h2.config.H2Configuration(
            client_side=True,
            validate_outbound_headers=validate,
            normalize_outbound_headers=validate,
        )
        connection = h2.connection.H2Connection(config)
        connection.initiate_connection()
        if window is not None:
            connection.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        client = cls(connection, reader, writer, acknowledge=window is None)
        client.flush()
        return client

    def flush(self) -> None:
        data = self.connection.data_to_send()
        if data and not self.writer.is_closing():
            self.writer.write(data)

    def request(
        self,
        stream_id: int,
        headers: list[tuple[str, str]] | list[tuple[bytes, bytes]],
        body: bytes | None = None,
    ) -> None:
        self.connection.send_headers(stream_id, headers, end_stream=body is None)
        if body is not None:
            self.connection.send_data(stream_id, body, end_stream=True)
        self.flush()

    async def read(self) -> bool:
        """Take in one read's worth of frames; False once the server closed the connection."""
        try:
            data = await self.reader.read(65536)
        except ConnectionError:
            data = b""
        if not data:
            self.closed = True
            return False
        for event in self.connection.receive_data(data):
            self._record(event)
        self.flush()
        return True

    def _record(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.ConnectionTerminated):
            self.goaway = event.error_code
            return
        if isinstance(event, h2.events.PingAckReceived):
            self.pings_acked += 1
            return
        stream_id = getattr(event, "stream_id", None)
        if not stream_id:
            return
        reply = self.replies.setdefault(stream_id, Reply())
        if isinstance(event, h2.events.ResponseReceived):
            reply.status = dict(event.headers)[b":status"]
        elif isinstance(event, h2.events.DataReceived):
            reply.body += event.data
            if self.acknowledge:
                self.connection.acknowledge_received_data(event.flow_controlled_length, stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            reply.ended = True
        elif isinstance(event, h2.events.StreamReset):
            reply.reset = event.error_code

    async def until(self, done: object, within: float = 10.0) -> None:
        """Read until `done()` holds; fail if the connection closes first or time runs out."""
        assert callable(done)
        async with asyncio.timeout(within):
            while not done():
                if not await self.read():
                    assert done(), "the server closed the connection"
                    return

    async def barrier(self) -> None:
        """Return once the server has handled every frame sent so far: it answers a PING only
        after the frames before it, and the app tasks they started have run by the time the
        answer is read (one event loop)."""
        acked = self.pings_acked
        self.connection.ping(acked.to_bytes(8, "big"))
        self.flush()

        def answered() -> bool:
            return self.pings_acked > acked

        await self.until(answered)

    async def response(self, stream_id: int, within: float = 10.0) -> Reply:
        def finished() -> bool:
            reply = self.replies.get(stream_id)
            return reply is not None and (reply.ended or reply.reset is not None)

        await self.until(finished, within)
        return self.replies[stream_id]

    async def read_for(self, seconds: float) -> None:
        """Keep reading the socket (not the window) for `seconds`, or until it closes."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                while await self.read():
                    pass

    async def until_closed(self, within: float = 10.0) -> None:
        async with asyncio.timeout(within):
            while await self.read():
                pass

    def close(self) -> None:
        self.writer.close()
