"""What the gateway keeps of an EndpointSlice, and which replica a request goes to: the pure parts
of `backend.endpoints` and `backend.replicas`, fed real slice documents through a watch that is
never started (the watch itself is proven against a real API server in test_endpoints_watch)."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest
from noctaya.gateway.backend.endpoints import Endpoint, EndpointWatch, WatchState, slice_endpoints
from noctaya.gateway.backend.kube_api import TOKEN_LIMIT, read_token
from noctaya.gateway.backend.readiness import ReadinessProbe
from noctaya.gateway.backend.replicas import Replica, Replicas
from noctaya.gateway.upstream import UpstreamPool

SERVICE = "backend"


def document(
    endpoints: list[Any],
    *,
    address_type: str = "IPv4",
    ports: Any = None,
    service: str = SERVICE,
    name: str = "a",
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/service-name": service}},
        "addressType": address_type,
        "ports": [{"name": "http", "port": 8000}] if ports is None else ports,
        "endpoints": endpoints,
    }


def pod(address: str, **conditions: bool) -> dict[str, Any]:
    return {"addresses": [address], "conditions": conditions}


def test_conditions_follow_the_api_s_rules_for_unset_values() -> None:
    found = slice_endpoints(
        document(
            [
                {"addresses": ["10.0.0.1"]},
                pod("10.0.0.2", ready=False),
                pod("10.0.0.3", ready=False, serving=True, terminating=True),
            ]
        ),
        SERVICE,
    )
    assert found == (
        Endpoint("10.0.0.1", 8000, ready=True, serving=True, terminating=False),
        Endpoint("10.0.0.2", 8000, ready=False, serving=False, terminating=False),
        Endpoint("10.0.0.3", 8000, ready=False, serving=True, terminating=True),
    )


def test_only_ips_of_the_slice_s_family_are_kept_and_only_the_first_of_each_endpoint() -> None:
    endpoints = [
        pod("fd00::1"),
        pod("pod.example.com"),
        pod("10.0.0.1"),
        {"addresses": ["10.0.0.2", "10.0.0.3"]},
        {"addresses": []},
        {"addresses": [7]},
        "junk",
    ]
    v4 = slice_endpoints(document(endpoints), SERVICE)
    assert v4 is not None
    assert [each.address for each in v4] == ["10.0.0.1", "10.0.0.2"]
    v6 = slice_endpoints(document(endpoints, address_type="IPv6"), SERVICE)
    assert v6 is not None
    assert [each.address for each in v6] == ["fd00::1"]
    assert slice_endpoints(document(endpoints, address_type="FQDN"), SERVICE) == ()


@pytest.mark.parametrize(
    "ports",
    [
        [],
        [{"name": "metrics", "port": 8000}],
        [{"name": "http", "port": None}],
        [{"name": "http", "port": 0}],
        [{"name": "http", "port": 70000}],
        [{"name": "http", "port": "8000"}],
        [{"name": "http", "port": True}],
        [{"name": "http", "port": 8000, "protocol": "UDP"}],
        "junk",
    ],
)
def test_a_slice_without_a_usable_http_port_names_no_pod(ports: Any) -> None:
    assert slice_endpoints(document([pod("10.0.0.1")], ports=ports), SERVICE) == ()


def test_the_http_port_is_found_among_others() -> None:
    ports = [{"name": "metrics", "port": 9000}, {"name": "http", "port": 8080, "protocol": "TCP"}]
    found = slice_endpoints(document([pod("10.0.0.1")], ports=ports), SERVICE)
    assert found is not None
    assert found[0].port == 8080


@pytest.mark.parametrize(
    "item",
    [
        document([pod("10.0.0.1")], service="other"),
        {"metadata": {"name": "a"}, "addressType": "IPv4", "endpoints": [pod("10.0.0.1")]},
        {"metadata": "junk"},
        [],
        None,
    ],
)
def test_a_document_not_labelled_for_the_service_is_not_its_slice(item: Any) -> None:
    assert slice_endpoints(item, SERVICE) is None


def test_the_token_is_read_trimmed_and_bounded(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_bytes(b"  abc.def-ghi\n")
    assert read_token(str(path)) == b"abc.def-ghi"
    path.write_bytes(b"t" * (TOKEN_LIMIT + 1))
    with pytest.raises(ValueError, match="larger than"):
        read_token(str(path))
    for hostile in (b"", b"\n", b"abc\r\nx-injected: 1"):
        path.write_bytes(hostile)
        with pytest.raises(ValueError, match="no token"):
            read_token(str(path))


class Backend:
    """Replicas fed from a watch that is never started: slices go in as events."""

    def __init__(self) -> None:
        self.watch = EndpointWatch(None, "ns", SERVICE, retry=1.0)
        self.watch.state = WatchState.WATCHING
        self.pools: list[UpstreamPool] = []
        service = ReadinessProbe(UpstreamPool("http://127.0.0.1:9"))
        self.replicas = Replicas(service, self.watch, self._pool, path="/health", timeout=1.0)
        self.woken = 0
        self.replicas.on_ready = self._woken

    def put(self, *endpoints: dict[str, Any]) -> None:
        self.watch._apply({"type": "MODIFIED", "object": document(list(endpoints))}, "1")

    def replica(self, address: str) -> Replica:
        return next(r for r in self.replicas._replicas.values() if r.endpoint.address == address)

    def routable(self) -> list[str]:
        return sorted(replica.endpoint.address for replica in self.replicas._routable)

    def _pool(self, endpoint: Endpoint) -> UpstreamPool:
        pool = UpstreamPool(f"http://{endpoint.address}:{endpoint.port}")
        self.pools.append(pool)
        return pool

    def _woken(self) -> None:
        self.woken += 1


def test_the_replica_with_fewest_in_flight_is_chosen_and_ties_are_spread() -> None:
    backend = Backend()
    backend.put(pod("10.0.0.1", ready=True), pod("10.0.0.2", ready=True), pod("10.0.0.3"))
    first, second = backend.replica("10.0.0.1"), backend.replica("10.0.0.2")
    first.in_flight = 3
    second.in_flight = 2
    assert backend.replicas.choose(()) is backend.replica("10.0.0.3")
    backend.replica("10.0.0.3").in_flight = 5
    assert backend.replicas.choose(()) is second
    assert backend.replicas.choose([second]) is first
    assert backend.replicas.choose([first, second, backend.replica("10.0.0.3")]) is None
    first.in_flight = second.in_flight
    picks = collections.Counter(backend.replicas.choose(()) for _ in range(400))
    assert set(picks) == {first, second}
    assert min(picks.values()) > 120  # each of the tied about half the time


async def test_ready_flips_terminating_and_refusals_decide_what_is_routable() -> None:
    backend = Backend()
    backend.put(pod("10.0.0.1", ready=False), pod("10.0.0.2", ready=True))
    assert backend.routable() == ["10.0.0.2"]
    assert backend.replicas.cached_ready()

    starting = backend.replica("10.0.0.1")
    starting.probed = True  # the gateway's own probe answered before the slice turned
    backend.replicas._reroute()
    assert backend.routable() == ["10.0.0.1", "10.0.0.2"]

    backend.put(pod("10.0.0.1", ready=True), pod("10.0.0.2", ready=False, terminating=True))
    assert backend.routable() == ["10.0.0.1"]
    backend.put(pod("10.0.0.1", ready=False), pod("10.0.0.2", ready=False, terminating=True))
    assert backend.routable() == []  # its slice stopped saying ready: the probe's word is void
    assert not starting.probed
    assert not backend.replicas.cached_ready()

    woken = backend.woken
    backend.put(pod("10.0.0.1", ready=True))
    assert backend.woken == woken + 1  # ready again: held requests are woken
    backend.replicas.set_aside(starting)
    assert backend.routable() == []
    backend.put(pod("10.0.0.1", ready=True), pod("10.0.0.5", ready=True))
    assert backend.routable() == ["10.0.0.5"]  # set aside until found ready anew
    backend.put(pod("10.0.0.1", ready=False), pod("10.0.0.5", ready=True))
    backend.put(pod("10.0.0.1", ready=True), pod("10.0.0.5", ready=True))
    assert backend.routable() == ["10.0.0.1", "10.0.0.5"]
    await backend.replicas.close()  # ends the probing of the replica set aside


def test_a_pod_gone_from_its_slice_has_its_pool_retired() -> None:
    backend = Backend()
    backend.put(pod("10.0.0.1", ready=True), pod("10.0.0.2", ready=True))
    gone = backend.replica("10.0.0.2").pool
    backend.put(pod("10.0.0.1", ready=True))
    assert gone._closed
    assert not backend.replica("10.0.0.1").pool._closed
    assert backend.routable() == ["10.0.0.1"]


def test_without_a_working_watch_the_service_answers() -> None:
    backend = Backend()
    backend.put(pod("10.0.0.1", ready=True))
    assert backend.replicas.pods
    backend.watch._fall_back("refused")
    assert not backend.replicas.pods
    assert not backend.replicas.cached_ready()  # the Service's probe has not answered
