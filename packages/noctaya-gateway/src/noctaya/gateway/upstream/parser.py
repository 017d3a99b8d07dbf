"""Incremental HTTP/1.1 response parsing, without I/O: bytes in, head / body pieces / end out.

Only what a reverse proxy meets from a backend: a status line and headers (at most five interim
1xx answers skipped, so a backend cannot hold the exchange on interim answers), then a body
framed by Content-Length, chunked transfer coding or the connection close (RFC 9112 §6). The
grammar is h11's, so the two agree on every response (tests/gateway/test_upstream_parser_h11.py
checks that): lines may end in a bare LF, obsolete line folding becomes a space. Header values
are held to RFC 9110's grammar, stricter than h11's: no control characters but tab, which
downstream parsers may choke on. Anything else is a ProtocolError, which the proxy reports as
a 502; nothing else is raised.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

MAX_HEAD = 64 * 1024
MAX_CHUNK_LINE = 4096
MAX_INTERIM = 5
MAX_LENGTH_DIGITS = 20
_HEAD_END = re.compile(rb"\n\r?\n")
_STATUS_LINE = re.compile(rb"HTTP/([0-9])\.([0-9]) ([0-9]{3})(?: [^\x00\n\r\x0b\x0c]*)?")
_HEADER = re.compile(
    rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*"
    rb"((?:[\x21-\x7e\x80-\xff]+(?:[ \t]+[\x21-\x7e\x80-\xff]+)*)?)[ \t]*"
)
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,20})(?:;.*)?[ \t]*")
_DIGITS = re.compile(rb"[0-9]+")


class ProtocolError(Exception):
    """The backend's bytes are not an HTTP/1.1 response we can relay."""


@dataclass(frozen=True, slots=True)
class Head:
    status: int
    headers: list[tuple[bytes, bytes]]
    """Names lowercased, in order, repeats kept; one Content-Length at most, none when the
    body is framed by a transfer coding."""


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


_SIZE, _DATA, _DATA_END, _TRAILER = _Chunk.SIZE, _Chunk.DATA, _Chunk.DATA_END, _Chunk.TRAILER

END = object()
"""Event: the response body is complete."""
NEED_DATA = object()
"""Event: feed more bytes (or `eof()`)."""


class ResponseParser:
    __slots__ = (
        "_buffer",
        "_chunk",
        "_eof",
        "_framing",
        "_head",
        "_head_request",
        "_interim",
        "_remaining",
        "_scanned",
        "complete",
        "keep_alive",
    )

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._scanned = 0  # where the search for the end of the head resumes
        self._head: Head | None = None
        self._head_request = False
        self._interim = 0
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
        self._interim = 0
        self._scanned = 0
        self._framing = _Framing.NONE
        self._chunk = _Chunk.SIZE
        self.complete = False

    def feed(self, data: bytes) -> None:
        self._buffer += data

    @property
    def reusable(self) -> bool:
        """The response ended cleanly and the connection may carry another request."""
        return self.complete and self.keep_alive and not self._buffer and not self._eof

    @property
    def in_head(self) -> bool:
        """Part of a response head has arrived, not all of it."""
        return self._head is None and bool(self._buffer)

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
            lines = self._lines(MAX_HEAD, "response head")
            if lines is None:
                if self._eof:
                    raise ProtocolError("connection closed before the response head")
                return NEED_DATA
            if not lines:
                raise ProtocolError("empty line instead of a status line")
            match = _STATUS_LINE.fullmatch(lines[0])
            if match is None:
                raise ProtocolError(f"malformed status line {lines[0][:80]!r}")
            version = (int(match.group(1)), int(match.group(2)))
            status = int(match.group(3))
            headers = _headers(lines[1:])
            if status < 100:
                raise ProtocolError(f"invalid status {status:03d}")
            if status < 200:
                if status == 101:
                    raise ProtocolError("unexpected protocol switch")
                self._interim += 1
                if self._interim > MAX_INTERIM:
                    raise ProtocolError("too many informational responses")
                continue  # interim answer (100 Continue, 103 Early Hints): the real one follows
            self._head = Head(status, self._frame(version, status, headers))
            return self._head

    def _lines(self, limit: int, what: str) -> list[bytes] | None:
        """The lines up to the next empty one (consumed; bare LF ends a line too), or None."""
        buffer = self._buffer
        if buffer[:1] == b"\n" or buffer[:2] == b"\r\n":
            del buffer[: 1 if buffer[:1] == b"\n" else 2]
            return []
        match = _HEAD_END.search(buffer, max(0, self._scanned - 2))
        if match is None:
            self._scanned = len(buffer)
            if len(buffer) > limit:
                raise ProtocolError(f"{what} too large")
            return None
        self._scanned = 0
        if match.end() > limit:
            raise ProtocolError(f"{what} too large")
        lines = bytes(buffer[: match.start()]).split(b"\n")
        del buffer[: match.end()]
        return [line[:-1] if line.endswith(b"\r") else line for line in lines]

    def _frame(
        self, version: tuple[int, int], status: int, headers: list[tuple[bytes, bytes]]
    ) -> list[tuple[bytes, bytes]]:
        """Decide how the body ends (RFC 9112 §6.3); the headers to relay."""
        connection = _tokens(headers, b"connection")
        if version >= (1, 1):
            self.keep_alive = b"close" not in connection
        else:
            self.keep_alive = b"keep-alive" in connection and b"close" not in connection
        chunked = _transfer_coding_is_chunked(headers)
        length = _content_length(headers)
        if chunked and length is not None:
            # Both: the transfer coding frames the body; the length is dropped, never relayed,
            # and the connection is not trusted with another request (response splitting).
            headers = [(n, v) for n, v in headers if n != b"content-length"]
            self.keep_alive = False
        if self._head_request or status in (204, 304):
            self._framing = _Framing.NONE
            self.complete = True
        elif chunked:
            self._framing = _Framing.CHUNKED
        elif length is not None:
            self._remaining = length
            self._framing = _Framing.LENGTH
            self.complete = length == 0
        else:
            self._framing, self.keep_alive = _Framing.UNTIL_CLOSE, False
        return headers

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
        """The data of every chunk the buffer holds, as one piece (a stream's tokens that
        arrived together leave together), END, or NEED_DATA; the buffer is consumed once, at
        the end. A fault after good data is raised on the next call, once that data is out.
        Called for every token of a stream, so the common case, whole chunks, is one step each."""
        buffer = self._buffer
        if not buffer:
            return self._need_more()
        pieces: list[bytes] = []
        at = 0
        size = len(buffer)
        state = self._chunk
        try:
            while True:
                if state is _SIZE:
                    line_end = buffer.find(b"\r\n", at)
                    if line_end < 0:
                        if size - at > MAX_CHUNK_LINE:
                            raise ProtocolError("chunk line too long")
                        break
                    if line_end - at > MAX_CHUNK_LINE:
                        raise ProtocolError("chunk line too long")
                    match = _CHUNK_SIZE.fullmatch(buffer, at, line_end)
                    if match is None:
                        raise ProtocolError("malformed chunk size")
                    at = line_end + 2
                    remaining = int(match.group(1), 16)
                    if not remaining:
                        state = _TRAILER
                        continue
                    data_end = at + remaining
                    if data_end + 2 <= size and buffer[data_end : data_end + 2] == b"\r\n":
                        pieces.append(bytes(buffer[at:data_end]))  # the chunk whole
                        at = data_end + 2
                        continue
                    self._remaining = remaining
                    state = _DATA
                elif state is _DATA:
                    if at == size:
                        break
                    end = min(size, at + self._remaining)
                    pieces.append(bytes(buffer[at:end]))
                    self._remaining -= end - at
                    at = end
                    if self._remaining == 0:
                        state = _DATA_END
                elif state is _DATA_END:
                    crlf = bytes(buffer[at : at + 2])
                    if crlf != b"\r\n"[: len(crlf)]:
                        raise ProtocolError("chunk data longer than its size")
                    if len(crlf) < 2:
                        break
                    at += 2
                    state = _SIZE
                else:  # the trailer section, read as a head is
                    if pieces:
                        break  # the data first; the trailer on the next call
                    del buffer[:at]
                    at = 0
                    trailer = self._lines(MAX_HEAD, "trailer section")
                    if trailer is None:
                        return self._need_more()
                    _headers(trailer)  # checked like any header section, then dropped
                    self.complete = True
                    return END
        except ProtocolError:
            if not pieces:
                raise
            # The fault stays in the buffer, where the next call meets it again.
        finally:
            self._chunk = state
            del buffer[:at]
        if pieces:
            return pieces[0] if len(pieces) == 1 else b"".join(pieces)
        return self._need_more()

    def _need_more(self) -> object:
        if self._eof:
            raise ProtocolError("connection closed before the response body ended")
        return NEED_DATA


def _headers(lines: list[bytes]) -> list[tuple[bytes, bytes]]:
    """Header lines (obsolete folds joined with a space) as checked (name, value) pairs."""
    headers: list[tuple[bytes, bytes]] = []
    for line in _unfold(lines):
        match = _HEADER.fullmatch(line)
        if match is None:
            raise ProtocolError(f"malformed header line {line[:80]!r}")
        headers.append((match.group(1).lower(), match.group(2)))
    return headers


def _unfold(lines: list[bytes]) -> list[bytes]:
    if not any(line[:1] in (b" ", b"\t") for line in lines):
        return lines
    unfolded: list[bytes] = []
    for line in lines:
        if line[:1] in (b" ", b"\t"):
            if not unfolded:
                raise ProtocolError("continuation line at the start of the headers")
            unfolded[-1] += b" " + line.lstrip(b" \t")
        else:
            unfolded.append(line)
    return unfolded


def _content_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    """The one length all Content-Length fields agree on; repeats of it are merged into the
    first field, in place, so the relayed head carries a single well-formed value."""
    fields = [i for i, (name, _) in enumerate(headers) if name == b"content-length"]
    if not fields:
        return None
    values = {v.strip() for i in fields for v in headers[i][1].split(b",")}
    if len(values) != 1:
        raise ProtocolError("conflicting Content-Length values")
    value = values.pop()
    if not _DIGITS.fullmatch(value) or len(value) > MAX_LENGTH_DIGITS:
        raise ProtocolError("invalid Content-Length")
    if len(fields) > 1 or headers[fields[0]][1] != value:
        headers[fields[0]] = (b"content-length", value)
        for i in reversed(fields[1:]):
            del headers[i]
    return int(value)


def _transfer_coding_is_chunked(headers: list[tuple[bytes, bytes]]) -> bool:
    codings = [v.lower() for n, v in headers if n == b"transfer-encoding"]
    if not codings:
        return False
    if codings != [b"chunked"]:
        # Any other coding is a body we cannot frame for the client (h11 refuses it too).
        raise ProtocolError("unsupported Transfer-Encoding")
    return True


def _tokens(headers: list[tuple[bytes, bytes]], name: bytes) -> list[bytes]:
    return [t.strip().lower() for n, v in headers if n == name for t in v.split(b",")]
