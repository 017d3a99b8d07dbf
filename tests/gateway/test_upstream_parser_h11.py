"""The response parser against h11 as a client-side parser: on generated responses, hostile ones
included, split at random, both reach the same status, headers, body and framing, or both
refuse. Where the gateway is deliberately stricter or keeps more, the oracle says so:

- more than five interim responses are refused (Go's client's bound; h11 has none);
- a head over 64 KiB is refused even when it arrives whole (h11 bounds only incomplete data);
- Content-Length beside Transfer-Encoding is dropped and the connection not reused;
- a header value holding a control character other than tab is refused (RFC 9110 calls them
  invalid; h11 lets all but NUL, CR and LF through);
- HTTP/1.0 `Connection: keep-alive` is honoured (h11 closes), so reuse is compared from 1.1 on.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import h11
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from noctaya.gateway.upstream.parser import (
    END,
    MAX_HEAD,
    MAX_INTERIM,
    NEED_DATA,
    Head,
    ProtocolError,
    ResponseParser,
)

_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class Outcome:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes
    ended_before_eof: bool
    keep_alive: bool


@dataclass(frozen=True)
class Case:
    data: bytes
    head_request: bool
    cuts: list[int]
    reuse_comparable: bool  # HTTP/1.1 or later on the final status line
    oversized: bool


def _pieces(case: Case) -> list[bytes]:
    cuts = sorted({c for c in case.cuts if 0 < c < len(case.data)})
    bounds = [0, *cuts, len(case.data)]
    return [case.data[a:b] for a, b in itertools.pairwise(bounds)]


def _ours(case: Case) -> Outcome | None:
    parser = ResponseParser()
    parser.start(head_request=case.head_request)
    head: Head | None = None
    body = bytearray()
    try:
        for piece in [*_pieces(case), None]:
            if piece is None:
                parser.eof()
            else:
                parser.feed(piece)
            while (event := parser.next_event()) is not NEED_DATA:
                if event is END:
                    assert head is not None
                    return Outcome(
                        head.status,
                        head.headers,
                        bytes(body),
                        piece is not None,
                        parser.keep_alive,
                    )
                if isinstance(event, Head):
                    head = event
                else:
                    assert isinstance(event, bytes)
                    body += event
    except ProtocolError:
        return None
    raise AssertionError("no end of the response after the connection closed")


def _h11(case: Case) -> Outcome | None:
    """h11's reading, with the gateway's deliberate differences applied."""
    connection = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
    method = b"HEAD" if case.head_request else b"GET"
    connection.send(h11.Request(method=method, target=b"/", headers=[(b"host", b"backend")]))
    connection.send(h11.EndOfMessage())
    interim = 0
    response: h11.Response | None = None
    body = bytearray()
    values: list[bytes] = []
    try:
        for piece in [*_pieces(case), b""]:
            connection.receive_data(piece)
            while (event := connection.next_event()) is not h11.NEED_DATA:
                if isinstance(event, h11.InformationalResponse | h11.Response):
                    values.extend(value for _, value in event.headers)
                if isinstance(event, h11.InformationalResponse):
                    interim += 1
                elif isinstance(event, h11.Response):
                    response = event
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    assert response is not None
                    if any(_CONTROL.search(v) for v in [*values, *(v for _, v in event.headers)]):
                        return None
                    keep_alive = connection.their_state is h11.DONE
                    return _adjusted(response, bytes(body), piece != b"", keep_alive, interim)
                else:
                    raise AssertionError(f"unexpected h11 event {event!r}")
    except h11.ProtocolError:
        return None
    raise AssertionError("h11 saw no end of the response")


def _adjusted(
    response: h11.Response, body: bytes, ended_before_eof: bool, keep_alive: bool, interim: int
) -> Outcome | None:
    if interim > MAX_INTERIM:
        return None
    headers = [(name.lower(), value) for name, value in response.headers.raw_items()]
    if any(n == b"transfer-encoding" for n, _ in headers) and any(
        n == b"content-length" for n, _ in headers
    ):
        headers = [(n, v) for n, v in headers if n != b"content-length"]
        keep_alive = False
    return Outcome(response.status_code, headers, body, ended_before_eof, keep_alive)


def _comparable(outcome: Outcome | None, case: Case) -> Outcome | None:
    if outcome is None:
        return None
    headers = [(n, v.lower() if n == b"transfer-encoding" else v) for n, v in outcome.headers]
    reusable = case.reuse_comparable and outcome.ended_before_eof  # else closed anyway
    keep_alive = outcome.keep_alive if reusable else False
    return Outcome(outcome.status, headers, outcome.body, outcome.ended_before_eof, keep_alive)


def _check(case: Case) -> None:
    expected = None if case.oversized else _h11(case)
    assert _comparable(_ours(case), case) == _comparable(expected, case)


# Generated responses: every part is sometimes well-formed, sometimes hostile.

Bytes = st.SearchStrategy[bytes]


def _mostly(good: Bytes, hostile: Bytes) -> Bytes:
    """Well-formed most of the time, so that a response is often accepted whole."""
    return st.integers(0, 15).flatmap(lambda n: hostile if n == 0 else good)


_EOL = _mostly(st.just(b"\r\n"), st.just(b"\n"))
_VALUE = _mostly(
    st.lists(st.sampled_from([b"a", b"Z", b"9", b" ", b"\t", b",", b";", b"\x80"]), max_size=6),
    st.lists(st.sampled_from([b"a", b"\r", b"\x00", b"\x7f", b"\x01", b"\xff"]), max_size=4),
).map(b"".join)
_NAME = _mostly(
    st.sampled_from([b"Content-Type", b"X-A", b"x-a", b"Keep-Alive", b"Link"]),
    st.sampled_from([b"X Bad", b"", b"X\x00", b"X:Y"]),
)
_CONNECTION = st.sampled_from([b"close", b"keep-alive", b"Keep-Alive, x-a", b"upgrade"])
_LENGTH_VALUE = st.one_of(
    st.integers(0, 40).map(lambda n: b"%d" % n),
    st.sampled_from([b"-1", b"0x5", b"5, 5", b"5,6", b" 7 ", b"", b"9" * 21, b"9" * 5000]),
)
_CODING = _mostly(
    st.sampled_from([b"chunked", b"Chunked"]),
    st.sampled_from([b"gzip", b"gzip, chunked", b"chunked, chunked"]),
)
_STATUS = _mostly(
    st.sampled_from([200, 201, 204, 304, 404, 500, 599, 999]).map(lambda n: b"%d" % n),
    st.sampled_from([b"101", b"000", b"099", b"20", b"2000", b"abc"]),
)
_VERSION = _mostly(
    st.sampled_from([b"HTTP/1.1", b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2.0"]),
    st.sampled_from([b"HTTP/1.1x", b"HTTP/11", b"http/1.1"]),
)
_REASON = _mostly(
    st.sampled_from([b" OK", b" ", b"", b" Not\tFound"]), st.sampled_from([b" bad\x00", b"\tOK"])
)
_FOLD = _mostly(st.just(b"plain"), st.sampled_from([b"connection", b"fold"]))


@st.composite
def _header_lines(draw: st.DrawFn) -> list[bytes]:
    lines: list[bytes] = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(_FOLD)
        if kind == b"connection":
            lines.append(b"Connection: " + draw(_CONNECTION))
        elif kind == b"fold":
            lines.append(draw(st.sampled_from([b" ", b"\t", b"  "])) + draw(_VALUE))
        else:
            space = draw(st.sampled_from([b" ", b"", b"\t"]))
            lines.append(draw(_NAME) + b":" + space + draw(_VALUE))
    return lines


@st.composite
def _chunked_body(draw: st.DrawFn, payload: bytes) -> bytes:
    parts: list[bytes] = []
    rest = payload
    while rest:
        size = draw(st.integers(1, max(1, len(rest))))
        piece, rest = rest[:size], rest[size:]
        size_text = draw(
            _mostly(
                st.sampled_from([b"%x" % len(piece), b"%X" % len(piece), b"0%x" % len(piece)]),
                st.sampled_from([b"0x%x" % len(piece), b"_%x" % len(piece), b" %x" % len(piece)]),
            )
        )
        extension = draw(_mostly(st.sampled_from([b"", b";a=b", b"; x"]), st.just(b" ;x")))
        data_end = draw(_mostly(st.just(b"\r\n"), st.sampled_from([b"\n", b"x\r\n"])))
        parts.append(size_text + extension + b"\r\n" + piece + data_end)
    trailer = draw(
        _mostly(st.sampled_from([b"", b"X-Sum: 1\r\n", b"X: a\n"]), st.just(b"Bad Trailer\r\n"))
    )
    end = draw(_EOL)
    parts.append(b"0\r\n" + trailer + end)
    return b"".join(parts)


@st.composite
def _cases(draw: st.DrawFn) -> Case:
    eol = draw(_EOL)
    data = bytearray()
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2, MAX_INTERIM, MAX_INTERIM + 1, 50]))):
        status = draw(st.sampled_from([b"100", b"103"]))
        lines = [b"HTTP/1.1 " + status + b" Info", *draw(_header_lines())]
        data += b"".join(line + eol for line in lines) + eol
    version = draw(_VERSION)
    status = draw(_STATUS)
    lines = [version + b" " + status + draw(_REASON), *draw(_header_lines())]
    payload = draw(st.binary(max_size=40))
    framing = draw(st.sampled_from(["length", "chunked", "both", "close"]))
    body = payload
    if framing in ("length", "both"):
        right = draw(st.integers(0, 5)) > 0
        lines.append(b"Content-Length: " + (b"%d" % len(payload) if right else draw(_LENGTH_VALUE)))
        if draw(st.booleans()):
            lines.append(b"content-length: %d" % len(payload))
    if framing in ("chunked", "both"):
        lines.append(b"Transfer-Encoding: " + draw(_CODING))
        body = draw(_chunked_body(payload))
    oversized = draw(st.integers(0, 20)) == 0
    if oversized:
        lines.append(b"X-Big: " + b"a" * MAX_HEAD)
    data += b"".join(line + draw(_EOL) for line in lines) + eol + body
    data += draw(_mostly(st.just(b""), st.sampled_from([b"HTTP/1.1 200 OK\r\n\r\n", b"extra"])))
    final = bytes(data)
    cuts = draw(st.lists(st.integers(0, len(final)), max_size=8))
    return Case(
        final,
        draw(st.booleans()),
        cuts,
        reuse_comparable=version == b"HTTP/1.1" or version == b"HTTP/2.0",
        oversized=oversized,
    )


@SETTINGS
@given(_cases())
def test_parser_agrees_with_h11_on_generated_responses(case: Case) -> None:
    _check(case)


@SETTINGS
@given(
    st.binary(max_size=120).map(lambda tail: b"HTTP/1.1 200 OK\r\n" + tail),
    st.booleans(),
    st.lists(st.integers(0, 140), max_size=6),
)
def test_parser_agrees_with_h11_on_arbitrary_bytes_after_a_status_line(
    data: bytes, head_request: bool, cuts: list[int]
) -> None:
    _check(Case(data, head_request, cuts, reuse_comparable=True, oversized=False))


def test_every_hostile_case_of_the_gateway_tests_is_decided_alike() -> None:
    """The responses the gateway is tested against end to end, in one piece and byte by byte."""
    cases = [
        b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" * 6 + b"HTTP/1.1 200 OK\r\n\r\n",
        b"HTTP/1.1 103 Early Hints\r\n\r\n" * 5 + b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Ty",
        b"HTTP/1.1 200 OK\nContent-Type: application/json\nContent-Length: 2\n\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        b"HTTP/1.1 000 Zero\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 099 Low\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Bad: a\rb\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Bad: a\nb\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Bad: a\x00b\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n_5\r\nhello\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Folded: a\r\n \t b\r\nContent-Length: 2\r\n"
        b"Content-Length: 2\r\nX-Empty:\r\n\r\n{}",
    ]
    for data in cases:
        for cuts in ([], list(range(len(data)))):
            _check(Case(data, False, cuts, reuse_comparable=True, oversized=False))
    big = b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n"
    assert _ours(Case(big, False, [], reuse_comparable=True, oversized=True)) is None
