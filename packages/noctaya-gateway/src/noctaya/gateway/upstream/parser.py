"""Incremental HTTP/1.1 response parsing, without I/O: bytes in, head / body pieces / end out.

Only what a reverse proxy meets from a backend: a status line and headers (interim 1xx answers
skipped), then a body framed by Content-Length, chunked transfer coding or the connection close
(RFC 9112 §6). Anything else is a ProtocolError, which the proxy reports as a 502.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

MAX_HEAD = 64 * 1024
MAX_CHUNK_LINE = 4096
_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) (\d{3})(?: .*)?")
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


class ProtocolError(Exception):
    """The backend's bytes are not an HTTP/1.1 response we can relay."""


@dataclass(frozen=True)
class Head:
    status: int
    headers: list[tuple[bytes, bytes]]
    """Names lowercased, in order, repeats kept."""


class _Framing(enum.Enum):
    NONE = "none"
    LENGTH = "length"
    CHUNKED = "chunked"
    UNTIL_CLOSE = "until close"


class _Chunk(enum.Enum):
    SIZE = "size"
    DATA = "data"
    DATA_END = "data end"
    TRAILER = "trailer"


END = object()
"""Event: the response body is complete."""
NEED_DATA = object()
"""Event: feed more bytes (or `eof()`)."""


class ResponseParser:
    def __init__(self) -> None:
        self._buffer = bytearray()
        self._head: Head | None = None
        self._head_request = False
        self._framing = _Framing.NONE
        self._remaining = 0
        self._chunk = _Chunk.SIZE
        self._eof = False
        self.keep_alive = False
        self.complete = False

    def start(self, head_request: bool) -> None:
        """Expect the response to a new request (HEAD responses carry no body)."""
        self._head = None
        self._head_request = head_request
        self._framing = _Framing.NONE
        self._chunk = _Chunk.SIZE
        self.complete = False

    def feed(self, data: bytes) -> None:
        self._buffer += data

    @property
    def reusable(self) -> bool:
        """The response ended cleanly and the connection may carry another request."""
        return self.complete and self.keep_alive and not self._buffer and not self._eof

    def eof(self) -> None:
        self._eof = True

    def next_event(self) -> Head | bytes | object:
        """The next Head, body bytes, END or NEED_DATA; raises ProtocolError."""
        if self.complete:
            return END
        if self._head is None:
            return self._parse_head()
        if self._framing is _Framing.LENGTH:
            return self._length_body()
        if self._framing is _Framing.CHUNKED:
            return self._chunked_body()
        return self._until_close_body()

    def _parse_head(self) -> Head | object:
        while True:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buffer) > MAX_HEAD:
                    raise ProtocolError("response head too large")
                if self._eof:
                    raise ProtocolError("connection closed before the response head")
                return NEED_DATA
            lines = bytes(self._buffer[:end]).split(b"\r\n")
            del self._buffer[: end + 4]
            match = _STATUS_LINE.fullmatch(lines[0])
            if match is None:
                raise ProtocolError(f"malformed status line {lines[0][:80]!r}")
            minor, status = int(match.group(1)), int(match.group(2))
            headers = [_header(line) for line in lines[1:]]
            if 100 <= status < 200:
                if status == 101:
                    raise ProtocolError("unexpected protocol switch")
                continue  # interim answer (100 Continue, 103 Early Hints): the real one follows
            self._head = Head(status, headers)
            self._frame(minor, status, headers)
            return self._head

    def _frame(self, minor: int, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        connection = set(_tokens(headers, b"connection"))
        self.keep_alive = b"close" not in connection if minor == 1 else b"keep-alive" in connection
        codings = _tokens(headers, b"transfer-encoding")
        lengths = {v.strip() for n, v in headers if n == b"content-length"}
        if self._head_request or status in (204, 304):
            self._framing = _Framing.NONE
            self.complete = True
        elif codings:
            if codings[-1] == b"chunked":
                self._framing = _Framing.CHUNKED
            else:
                self._framing, self.keep_alive = _Framing.UNTIL_CLOSE, False
        elif lengths:
            if len(lengths) != 1 or not next(iter(lengths)).isdigit():
                raise ProtocolError("invalid Content-Length")
            self._remaining = int(next(iter(lengths)))
            self._framing = _Framing.LENGTH
            self.complete = self._remaining == 0
        else:
            self._framing, self.keep_alive = _Framing.UNTIL_CLOSE, False

    def _length_body(self) -> bytes | object:
        if not self._buffer:
            if self._eof:
                raise ProtocolError("connection closed before the response body ended")
            return NEED_DATA
        piece = bytes(self._buffer[: self._remaining])
        del self._buffer[: len(piece)]
        self._remaining -= len(piece)
        self.complete = self._remaining == 0
        return piece

    def _until_close_body(self) -> bytes | object:
        if self._buffer:
            piece = bytes(self._buffer)
            self._buffer.clear()
            return piece
        if self._eof:
            self.complete = True
            return END
        return NEED_DATA

    def _chunked_body(self) -> bytes | object:
        while True:
            if self._chunk is _Chunk.DATA:
                if not self._buffer:
                    return self._need_more()
                piece = bytes(self._buffer[: self._remaining])
                del self._buffer[: len(piece)]
                self._remaining -= len(piece)
                if self._remaining == 0:
                    self._chunk = _Chunk.DATA_END
                return piece
            line = self._line()
            if line is None:
                return self._need_more()
            if self._chunk is _Chunk.DATA_END:
                if line:
                    raise ProtocolError("chunk data longer than its size")
                self._chunk = _Chunk.SIZE
            elif self._chunk is _Chunk.SIZE:
                size_text = line.split(b";", 1)[0].strip()
                if not size_text or not all(c in b"0123456789abcdefABCDEF" for c in size_text):
                    raise ProtocolError("malformed chunk size")
                self._remaining = int(size_text, 16)
                self._chunk = _Chunk.DATA if self._remaining else _Chunk.TRAILER
            elif not line:  # the empty line after the trailer fields
                self.complete = True
                return END

    def _line(self) -> bytes | None:
        end = self._buffer.find(b"\r\n")
        if end < 0:
            if len(self._buffer) > MAX_CHUNK_LINE:
                raise ProtocolError("chunk line too long")
            return None
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 2]
        return line

    def _need_more(self) -> object:
        if self._eof:
            raise ProtocolError("connection closed before the response body ended")
        return NEED_DATA


def _header(line: bytes) -> tuple[bytes, bytes]:
    name, sep, value = line.partition(b":")
    if not sep or not _TOKEN.fullmatch(name):
        raise ProtocolError(f"malformed header line {line[:80]!r}")
    return name.lower(), value.strip(b" \t")


def _tokens(headers: list[tuple[bytes, bytes]], name: bytes) -> list[bytes]:
    return [t.strip().lower() for n, v in headers if n == name for t in v.split(b",")]
