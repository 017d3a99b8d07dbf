"""Listen addresses arrive in Go form from the operator; both spellings of "all interfaces" work."""

import pytest
from noctaya.core.values.listen_address import parse_listen_address


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (":8080", ("", 8080)),
        ("127.0.0.1:8080", ("127.0.0.1", 8080)),
        ("[::1]:9090", ("::1", 9090)),
        ("localhost:0", ("localhost", 0)),
        ("0.0.0.0:65535", ("0.0.0.0", 65535)),
    ],
)
def test_go_form_listen_addresses_split_into_host_and_port(
    text: str, expected: tuple[str, int]
) -> None:
    assert parse_listen_address(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("8080", "missing port"),
        ("127.0.0.1", "missing port"),
        (":http", "port must be a number"),
        (":", "port must be a number"),
        (":70000", "port out of range"),
        ("::1:8080", "IPv6 address needs brackets"),
        ("[::1:8080", "unbalanced brackets"),
        ("[127.0.0.1]:80", "brackets need an IPv6 address"),
        (":-1", "port must be a number"),
    ],
)
def test_malformed_listen_address_is_rejected_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason) as caught:
        parse_listen_address(text)
    assert f'"{text}"' in str(caught.value)
