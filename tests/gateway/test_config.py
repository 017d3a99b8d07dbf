"""`NOCTAYA_*` parsing: exactly the operator's renderings, the documented defaults and errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from noctaya.gateway.process.config import MIB, ColdStartMode, load_config
from noctaya.gateway.process.config_shared import ConfigError

BACKEND = {"NOCTAYA_BACKEND_URL": "http://svc-backend.ns.svc:8000"}


def test_defaults_match_the_reference() -> None:
    config = load_config(BACKEND)
    assert config.listen_addr == ":8080"
    assert config.max_queue == 100
    assert config.activation_timeout == 300
    assert config.coldstart_mode is ColdStartMode.KEEPALIVE
    assert config.heartbeat_interval == 10
    assert config.client_api_key_file is None
    assert config.scaler_listen_addr == ":9090"
    assert config.demand_aggregator_url is None
    assert config.max_request_body == 8 * MIB
    assert (config.readiness_interval, config.readiness_timeout) == (0.5, 2.0)
    assert (config.ready_grace, config.shutdown_timeout) == (15.0, 20.0)
    assert config.peek_limit == 8 * MIB
    assert config.backend_readiness_path == "/health"


def test_operator_rendered_values_are_read() -> None:
    config = load_config(
        {
            **BACKEND,
            "NOCTAYA_LISTEN_ADDR": "127.0.0.1:8081",
            "NOCTAYA_MAX_QUEUE": "250",
            "NOCTAYA_ACTIVATION_TIMEOUT": "2m0s",
            "NOCTAYA_COLDSTART_MODE": "reject",
            "NOCTAYA_HEARTBEAT_INTERVAL": "1.5s",
            "NOCTAYA_SCALER_LISTEN_ADDR": "[::1]:9091",
            "NOCTAYA_DEMAND_AGGREGATOR_URL": "http://svc-scaler.ns.svc:9091/v1/demand",
            "NOCTAYA_MAX_REQUEST_BODY": "32Mi",
        }
    )
    assert config.listen_addr == "127.0.0.1:8081"
    assert config.max_queue == 250
    assert config.activation_timeout == 120
    assert config.coldstart_mode is ColdStartMode.REJECT
    assert config.heartbeat_interval == 1.5
    assert config.scaler_listen_addr == "[::1]:9091"
    assert config.demand_aggregator_url == "http://svc-scaler.ns.svc:9091/v1/demand"
    assert config.max_request_body == 32 * MIB


@pytest.mark.parametrize(
    ("text", "expected"),
    [("7", 7), ("+7", 7), ("abc", 100), ("0", 100), ("-5", 100), ("1_0", 100), (" 5", 100)],
)
def test_max_queue_falls_back_to_100_unless_a_positive_go_integer(text: str, expected: int) -> None:
    assert load_config({**BACKEND, "NOCTAYA_MAX_QUEUE": text}).max_queue == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("300ms", 0.3), ("1m30s", 90.0), ("abc", 300.0), ("0s", 300.0), ("-1s", 300.0)],
)
def test_activation_timeout_falls_back_unless_a_positive_go_duration(
    text: str, expected: float
) -> None:
    config = load_config({**BACKEND, "NOCTAYA_ACTIVATION_TIMEOUT": text})
    assert config.activation_timeout == pytest.approx(expected)


@pytest.mark.parametrize("text", ["", "Reject", "keepalive", "queue"])
def test_anything_but_reject_means_keepalive(text: str) -> None:
    config = load_config({**BACKEND, "NOCTAYA_COLDSTART_MODE": text})
    assert config.coldstart_mode is ColdStartMode.KEEPALIVE


@pytest.mark.parametrize("path", ["/v1/models", "/", "/ready?model=a%20b"])
def test_backend_readiness_path_is_read(path: str) -> None:
    config = load_config({**BACKEND, "NOCTAYA_BACKEND_READINESS_PATH": path})
    assert config.backend_readiness_path == path


@pytest.mark.parametrize("path", ["health", "/a b", "/h\x7f", "/caf\u00e9", "http://x/health"])
def test_backend_readiness_path_must_be_an_absolute_printable_path(path: str) -> None:
    with pytest.raises(ConfigError, match=r"^NOCTAYA_BACKEND_READINESS_PATH: .* not an absolute"):
        load_config({**BACKEND, "NOCTAYA_BACKEND_READINESS_PATH": path})


@pytest.mark.parametrize("url", ["backend:8000", "ftp://backend", "http://", "http:///x", "/v1"])
def test_backend_url_must_be_absolute_http(url: str) -> None:
    with pytest.raises(ConfigError, match=r"^backend URL must be an absolute HTTP URL$"):
        load_config({"NOCTAYA_BACKEND_URL": url})


def test_backend_url_is_required() -> None:
    with pytest.raises(ConfigError, match=r"^NOCTAYA_BACKEND_URL is required$"):
        load_config({"NOCTAYA_BACKEND_URL": ""})


def test_key_file_must_be_readable_and_non_empty(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(ConfigError) as raised:
        load_config({**BACKEND, "NOCTAYA_CLIENT_API_KEY_FILE": str(missing)})
    assert str(raised.value) == f"read client API key: open {missing}: no such file or directory"
    with pytest.raises(ConfigError) as raised:
        load_config({**BACKEND, "NOCTAYA_CLIENT_API_KEY_FILE": str(tmp_path)})
    assert str(raised.value) == (
        f"read client API key: open {tmp_path}: a directory, not a regular file"
    )
    empty = tmp_path / "empty"
    empty.write_text(" \n\t")
    with pytest.raises(ConfigError, match=r"^client API key must not be empty$"):
        load_config({**BACKEND, "NOCTAYA_CLIENT_API_KEY_FILE": str(empty)})
    good = tmp_path / "key"
    good.write_text("k\n")
    assert load_config({**BACKEND, "NOCTAYA_CLIENT_API_KEY_FILE": str(good)}).client_api_key_file


@pytest.mark.parametrize("name", ["NOCTAYA_LISTEN_ADDR", "NOCTAYA_SCALER_LISTEN_ADDR"])
def test_malformed_listen_address_names_the_variable(name: str) -> None:
    with pytest.raises(ConfigError, match=rf'^{name}: invalid listen address "8080"'):
        load_config({**BACKEND, name: "8080"})


@pytest.mark.parametrize(("text", "expected"), [("1Mi", MIB), ("1000", 1000), ("1k", 1000)])
def test_max_request_body_is_a_byte_quantity(text: str, expected: int) -> None:
    assert load_config({**BACKEND, "NOCTAYA_MAX_REQUEST_BODY": text}).max_request_body == expected


@pytest.mark.parametrize("text", ["0", "-1Mi", "1.5", "lots", "100m"])
def test_bad_max_request_body_is_an_error_naming_the_variable(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^NOCTAYA_MAX_REQUEST_BODY must be a positive"):
        load_config({**BACKEND, "NOCTAYA_MAX_REQUEST_BODY": text})


@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("NOCTAYA_REQUEST_BODY_TIMEOUT", "request_body_timeout"),
        ("NOCTAYA_CLIENT_SEND_TIMEOUT", "client_send_timeout"),
    ],
)
def test_client_deadlines_default_to_a_minute_and_reject_bad_durations(
    name: str, field: str
) -> None:
    assert getattr(load_config(BACKEND), field) == 60
    assert getattr(load_config({**BACKEND, name: "2m30s"}), field) == 150
    for text in ("0s", "-1s", "soon"):
        with pytest.raises(ConfigError) as raised:
            load_config({**BACKEND, name: text})
        expected = f'{name} must be a positive duration such as "1m0s", got "{text}"'
        assert str(raised.value) == expected


def test_a_key_file_that_is_a_fifo_or_a_device_is_refused_at_start_up_without_blocking(
    tmp_path: Path,
) -> None:
    """Start-up reads the key as requests do: a FIFO (which would block the read until a writer
    came) or a device (which never ends) is refused before it is opened."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    through_link = tmp_path / "link"
    through_link.symlink_to(fifo)
    zero = tmp_path / "zero"
    zero.symlink_to("/dev/zero")
    for path, kind in ((fifo, "a FIFO"), (through_link, "a FIFO"), (zero, "a character device")):
        with pytest.raises(ConfigError) as raised:
            load_config({**BACKEND, "NOCTAYA_CLIENT_API_KEY_FILE": str(path)})
        assert str(raised.value) == f"read client API key: open {path}: {kind}, not a regular file"
