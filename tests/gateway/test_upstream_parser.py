"""Backend response framing, byte by byte: every way RFC 9112 lets a body end, and refusals."""

from __future__ import annotations

import pytest
from noctaya.gateway.upstream.parser import END, NEED_DATA, Head, ProtocolError, ResponseParser


def _events(parser: ResponseParser, data: bytes, *, split: int = 0, eof: bool = False) -> list:
    """Feed `data` (in `split`-byte pieces if given) and collect events until NEED_DATA/END."""
    events: list = []
    pieces = [data[i : i + split] for i in range(0, len(data), split)] if split else [data]
    for index, piece in enumerate(pieces):
        parser.feed(piece)
        if eof and index == len(pieces) - 1:
            parser.eof()
        while (event := parser.next_event()) is not NEED_DATA:
            events.append(event)
            if event is END:
                return events
    return events


def _body(events: list) -> bytes:
    return b"".join(e for e in events if isinstance(e, bytes))


@pytest.mark.parametrize("split", [0, 1, 7])
def test_content_length_body_in_any_pieces(split: int) -> None:
    parser = ResponseParser()
    parser.start(head_request=False)
    events = _events(
        parser,
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello",
        split=split,
    )
    assert events[0] == Head(200, [(b"content-type", b"text/plain"), (b"content-length", b"5")])
    assert _body(events) == b"hello"
    assert events[-1] is END
    assert parser.reusable


@pytest.mark.parametrize("split", [0, 1, 3])
def test_chunked_body_with_extensions_and_trailers(split: int) -> None:
    parser = ResponseParser()
    parser.start(head_request=False)
    events = _events(
        parser,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;name=value\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nX-Checksum: 1\r\n\r\n",
        split=split,
    )
    assert _body(events) == b"hello 0123456789"
    assert events[-1] is END
    assert parser.reusable


def test_body_until_close_ends_at_eof_and_is_not_reusable() -> None:
    parser = ResponseParser()
    parser.start(head_request=False)
    events = _events(parser, b"HTTP/1.0 200 OK\r\n\r\nstream of bytes", eof=True)
    assert _body(events) == b"stream of bytes"
    assert events[-1] is END
    assert not parser.reusable


def test_interim_responses_are_skipped() -> None:
    parser = ResponseParser()
    parser.start(head_request=False)
    events = _events(
        parser,
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
        b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
    )
    assert events == [Head(201, [(b"content-length", b"0")]), END]


@pytest.mark.parametrize(("status", "head_request"), [(204, False), (304, False), (200, True)])
def test_bodyless_responses_end_with_the_head(status: int, head_request: bool) -> None:
    parser = ResponseParser()
    parser.start(head_request=head_request)
    events = _events(parser, b"HTTP/1.1 %d X\r\nContent-Length: 42\r\n\r\n" % status)
    assert events[1:] == [END]
    assert parser.reusable


def test_connection_close_and_http10_keep_alive_decide_reuse() -> None:
    closing = ResponseParser()
    closing.start(head_request=False)
    _events(closing, b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
    assert not closing.reusable
    old = ResponseParser()
    old.start(head_request=False)
    _events(old, b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n")
    assert old.reusable


def test_one_parser_reads_consecutive_responses_on_a_kept_alive_connection() -> None:
    parser = ResponseParser()
    for body in (b"one", b"three"):
        parser.start(head_request=False)
        events = _events(
            parser, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        assert _body(events) == body


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"HTTP/2 200\r\n\r\n", "malformed status line"),
        (b"SSH-2.0-OpenSSH\r\n\r\n", "malformed status line"),
        (b"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n", "malformed header line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", "longer than"),
        (b"HTTP/1.1 101 Switching Protocols\r\n\r\n", "protocol switch"),
    ],
)
def test_malformed_responses_are_protocol_errors(data: bytes, message: str) -> None:
    parser = ResponseParser()
    parser.start(head_request=False)
    with pytest.raises(ProtocolError, match=message):
        _events(parser, data)


@pytest.mark.parametrize(
    "data",
    [
        b"HTTP/1.1 200 OK\r\nContent-Le",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
    ],
    ids=["in-head", "short-length", "mid-chunk"],
)
def test_connection_closing_early_is_a_protocol_error(data: bytes) -> None:
    parser = ResponseParser()
    parser.start(head_request=False)
    with pytest.raises(ProtocolError, match="connection closed before"):
        _events(parser, data, eof=True)


@pytest.mark.parametrize("end", [b"", b"\r\n\r\n"], ids=["incomplete", "complete"])
def test_oversized_head_is_refused_whether_or_not_it_is_complete(end: bytes) -> None:
    parser = ResponseParser()
    parser.start(head_request=False)
    with pytest.raises(ProtocolError, match="too large"):
        _events(parser, b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70_000 + end)


def test_chunks_that_arrive_together_come_out_as_one_piece() -> None:
    """A stream's tokens read from the backend in one go are relayed in one write."""
    parser = ResponseParser()
    parser.start(head_request=False)
    parser.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    assert isinstance(parser.next_event(), Head)
    parser.feed(b"7\r\ndata: 1\r\n7\r\ndata: 2\r\n7\r\ndata: 3\r\n4\r\nda")
    assert parser.next_event() == b"data: 1data: 2data: 3da"
    assert parser.next_event() is NEED_DATA
    parser.feed(b"ta\r\n0\r\n\r\n")
    assert parser.next_event() == b"ta"
    assert parser.next_event() is END
    assert parser.reusable


def test_a_fault_behind_good_chunks_comes_after_their_data() -> None:
    """What the backend sent well before it broke the framing is still handed over, as it was
    when each chunk was its own event; the fault is raised on the next call."""
    parser = ResponseParser()
    parser.start(head_request=False)
    parser.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n")
    assert isinstance(parser.next_event(), Head)
    assert parser.next_event() == b"hello"
    with pytest.raises(ProtocolError, match="chunk size"):
        parser.next_event()
