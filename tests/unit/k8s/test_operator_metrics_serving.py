"""The metrics endpoint under load and over TLS: a bounded worker pool, certificates that rotate,
a generated one when none is given, and short-lived access decisions."""

from __future__ import annotations

import select
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Iterator
from http import HTTPStatus
from pathlib import Path

import pytest
from cryptography import x509
from noctaya.k8s.operator.access_review import DecisionCache
from noctaya.k8s.operator.metrics import ControllerMetrics
from noctaya.k8s.operator.metrics_server import MetricsServer, ServingLimits, TlsContexts
from noctaya.k8s.operator.serving_certificate import CertificateFiles, self_signed_context
from scaler.certs import CertificateAuthority
from support.fake_clock import FakeClock
from support.operator_process import poll

DEFAULT = ServingLimits()
PROMPTLY = 5.0  # seconds; far below the 10 s a held connection would last


def _unverified() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


@pytest.fixture(params=["http", "https"])
def server(request: pytest.FixtureRequest) -> Iterator[tuple[MetricsServer, str]]:
    """A metrics server with the default limits, plain or with a generated certificate."""
    tls: TlsContexts | None = None
    if request.param == "https":
        context = self_signed_context("metrics.test")
        tls = lambda: context  # noqa: E731
    metrics = MetricsServer("127.0.0.1:0", ControllerMetrics().registry, tls=tls)
    metrics.start()
    yield metrics, request.param
    metrics.stop()


def _scrape(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5, context=_unverified()) as response:
            return int(response.status)
    except OSError:
        return 0


def test_a_connection_flood_takes_no_more_threads_than_the_pool_and_the_excess_is_closed_at_once(
    server: tuple[MetricsServer, str],
) -> None:
    metrics, scheme = server
    threads = threading.active_count()
    held = DEFAULT.workers + DEFAULT.queue_size
    flood = [socket.create_connection(("127.0.0.1", metrics.port)) for _ in range(3 * held)]
    try:
        closed: set[socket.socket] = set()
        deadline = time.monotonic() + PROMPTLY
        while len(closed) < len(flood) - held and time.monotonic() < deadline:
            readable, _, _ = select.select([s for s in flood if s not in closed], [], [], 0.1)
            closed.update(s for s in readable if _at_eof(s))
        grew = threading.active_count() - threads
    finally:
        for connection in flood:
            connection.close()
    assert len(closed) >= len(flood) - held, f"{len(closed)} of {len(flood)} closed at once"
    assert grew <= 0, f"{grew} more threads for {len(flood)} idle connections"
    url = f"{scheme}://127.0.0.1:{metrics.port}/metrics"
    poll(lambda: _scrape(url) == 200, 30, "a scrape once the flood is gone")


def _at_eof(connection: socket.socket) -> bool:
    try:
        return connection.recv(1, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def _served_certificate(port: int, trust: ssl.SSLContext) -> bytes:
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        trust.wrap_socket(raw) as tls,
    ):
        certificate = tls.getpeercert(binary_form=True)
    assert certificate is not None
    return certificate


def test_a_rotated_certificate_is_served_to_new_connections_and_a_broken_one_is_not(
    tmp_path: Path,
) -> None:
    authority = CertificateAuthority("metrics-ca")
    first = authority.issue("first", server=True)
    first.write(tmp_path, "tls")
    trust = ssl.create_default_context(cadata=authority.cert_pem.decode())
    trust.check_hostname = False
    metrics = MetricsServer(
        "127.0.0.1:0",
        ControllerMetrics().registry,
        tls=CertificateFiles(str(tmp_path), "tls.crt", "tls.key"),
    )
    metrics.start()
    try:
        before = _served_certificate(metrics.port, trust)
        authority.issue("second", server=True).write(tmp_path, "tls")
        after = _served_certificate(metrics.port, trust)
        (tmp_path / "tls.key").write_bytes(first.key_pem)  # not the pair of the served cert
        still = _served_certificate(metrics.port, trust)
    finally:
        metrics.stop()
    assert ssl.DER_cert_to_PEM_cert(before).encode() == first.cert_pem
    assert after != before
    assert still == after


def test_a_missing_certificate_is_refused_at_start_naming_both_files(tmp_path: Path) -> None:
    with pytest.raises(OSError, match=r"cannot load the metrics certificate .*tls\.crt and key"):
        CertificateFiles(str(tmp_path), "tls.crt", "tls.key")


def test_a_generated_certificate_names_the_host_localhost_and_loopback() -> None:
    context = self_signed_context("operator-7d9f")
    metrics = MetricsServer("127.0.0.1:0", ControllerMetrics().registry, tls=lambda: context)
    metrics.start()
    try:
        der = _served_certificate(metrics.port, _unverified())
    finally:
        metrics.stop()
    served = x509.load_der_x509_certificate(der)
    names = served.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["operator-7d9f", "localhost"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1", "::1"]


def test_decisions_are_kept_a_minute_when_allowed_half_a_minute_when_refused() -> None:
    clock = FakeClock()
    cache = DecisionCache(clock=clock)
    allowed, refused = (b"a", "/metrics"), (b"r", "/metrics")
    cache.put(allowed, HTTPStatus.OK)
    cache.put(refused, HTTPStatus.FORBIDDEN)
    clock.advance(29)
    assert (cache.get(allowed), cache.get(refused)) == (HTTPStatus.OK, HTTPStatus.FORBIDDEN)
    clock.advance(2)
    assert (cache.get(allowed), cache.get(refused)) == (HTTPStatus.OK, None)
    clock.advance(30)
    assert cache.get(allowed) is None


def test_the_decision_cache_is_bounded_and_forgets_the_least_recently_used() -> None:
    cache = DecisionCache(size=2, clock=FakeClock())
    for token in (b"1", b"2"):
        cache.put((token, "/metrics"), HTTPStatus.OK)
    assert cache.get((b"1", "/metrics")) == HTTPStatus.OK  # 2 is now the oldest
    cache.put((b"3", "/metrics"), HTTPStatus.UNAUTHORIZED)
    assert len(cache) == 2
    assert cache.get((b"2", "/metrics")) is None
    assert cache.get((b"1", "/metrics")) == HTTPStatus.OK
