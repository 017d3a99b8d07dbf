"""Probe addresses, the probe server, and the validation of runtime settings."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pytest
from noctaya.k8s.runtime import (
    LEADER_ELECTION_ID,
    HealthServer,
    InformerTiming,
    LeaderElectionConfig,
    ManagerOptions,
    default_identity,
    parse_probe_address,
)


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        (":8081", ("", 8081)),
        ("127.0.0.1:9000", ("127.0.0.1", 9000)),
        ("[::1]:8081", ("::1", 8081)),
        ("0", None),
    ],
)
def test_go_form_probe_addresses(address: str, expected: tuple[str, int] | None) -> None:
    assert parse_probe_address(address) == expected


@pytest.mark.parametrize("address", ["8081", ":http", "::1:8081", "host:70000", ""])
def test_bad_probe_addresses_are_rejected_with_the_address_in_the_message(address: str) -> None:
    with pytest.raises(ValueError, match="invalid health probe address"):
        parse_probe_address(address)


def test_probe_server_answers_ok_on_healthz_and_readyz_and_404_elsewhere() -> None:
    server = HealthServer("127.0.0.1:0")
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        for path in ("/healthz", "/readyz", "/readyz?verbose"):
            with urllib.request.urlopen(base + path, timeout=5) as response:
                assert (response.status, response.read()) == (200, b"ok")
                assert response.headers["Content-Type"] == "text/plain; charset=utf-8"
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(base + "/livez", timeout=5)
        assert missing.value.code == 404
    finally:
        server.stop()


def test_a_probe_port_already_taken_is_reported_with_the_address() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(OSError, match=f'cannot serve health probes on "{address}"'):
            HealthServer(address).start()


def test_leader_election_defaults_are_controller_runtimes() -> None:
    config = LeaderElectionConfig(namespace="noctaya-system")
    assert (config.name, config.lease_duration, config.renew_deadline, config.retry_period) == (
        LEADER_ELECTION_ID,
        15.0,
        10.0,
        2.0,
    )
    assert config.name == "6d7012cb.noctaya.io"
    assert config.release_on_cancel
    hostname, _, suffix = config.identity.rpartition("_")
    assert hostname
    assert len(suffix) == 36
    assert default_identity() != default_identity()


def test_lease_duration_rounds_up_to_whole_seconds_for_the_lease_field() -> None:
    config = LeaderElectionConfig("ns", lease_duration=2.5, renew_deadline=2, retry_period=0.5)
    assert config.lease_duration_seconds == 3


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"lease_duration": 10, "renew_deadline": 10}, "lease_duration must exceed renew_deadline"),
        ({"renew_deadline": 2.0, "retry_period": 2.0}, r"renew_deadline must exceed 1.2 \* retry"),
        ({"retry_period": 0}, "retry_period must be positive"),
        ({"namespace": ""}, "needs a namespace"),
    ],
)
def test_inconsistent_leader_election_timings_are_rejected(
    settings: dict[str, float], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        LeaderElectionConfig(**{"namespace": "ns", **settings})  # type: ignore[arg-type]


def test_manager_options_reject_no_workers_and_bad_probe_addresses() -> None:
    with pytest.raises(ValueError, match="workers must be at least 1"):
        ManagerOptions(workers=0)
    with pytest.raises(ValueError, match='"nonsense"'):
        ManagerOptions(health_probe_address="nonsense")
    with pytest.raises(ValueError, match="resync_period"):
        InformerTiming(resync_period=0)
