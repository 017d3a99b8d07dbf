"""mTLS for the ExternalScaler: configuration errors, and real handshakes with generated certs."""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from noctaya.gateway.demand.feed import DemandFeed
from noctaya.gateway.scaler.server import ScalerServer, start_scaler
from noctaya.gateway.scaler.tls import load_scaler_tls

from .certs import CertificateAuthority, Identity
from .conftest import streams_gauge
from .keda import Keda, ref

SERVICE_DNS = "demo-scaler.default.svc"
TOGETHER = (
    "NOCTAYA_SCALER_TLS_CERT_FILE, NOCTAYA_SCALER_TLS_KEY_FILE, and "
    "NOCTAYA_SCALER_TLS_CLIENT_CA_FILE must be set together"
)


@dataclass
class Pki:
    ca: CertificateAuthority
    server: Identity
    client: Identity
    env: dict[str, str]


@pytest.fixture(scope="module")
def authority() -> CertificateAuthority:
    return CertificateAuthority("noctaya-test-ca")


@pytest.fixture
def pki(tmp_path: Path, authority: CertificateAuthority) -> Pki:
    server = authority.issue("scaler", dns=(SERVICE_DNS,), server=True)
    client = authority.issue("keda", server=False)
    cert, key = server.write(tmp_path, "server")
    ca = tmp_path / "ca.crt"
    ca.write_bytes(authority.cert_pem)
    env = {
        "NOCTAYA_SCALER_TLS_CERT_FILE": str(cert),
        "NOCTAYA_SCALER_TLS_KEY_FILE": str(key),
        "NOCTAYA_SCALER_TLS_CLIENT_CA_FILE": str(ca),
    }
    return Pki(authority, server, client, env)


def exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


async def serve(env: dict[str, str]) -> ScalerServer:
    gauge, _ = streams_gauge()
    feed = DemandFeed(1)
    return await start_scaler(feed, "127.0.0.1:0", load_scaler_tls(env), gauge)


@pytest.fixture
async def tls_scaler(pki: Pki) -> AsyncIterator[ScalerServer]:
    server = await serve(pki.env)
    yield server
    await server.stop(1)


def mtls_client(
    port: int, trusted_ca: bytes, identity: Identity | None, name: str = SERVICE_DNS
) -> Keda:
    credentials = grpc.ssl_channel_credentials(
        root_certificates=trusted_ca,
        private_key=identity.key_pem if identity else None,
        certificate_chain=identity.cert_pem if identity else None,
    )
    options = [("grpc.ssl_target_name_override", name)]
    return Keda(grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials, options=options))


async def refused(client: Keda) -> bool:
    try:
        await client.stub.IsActive(ref(), timeout=5)
    except grpc.aio.AioRpcError as error:
        return error.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        await client.close()
    return False


def test_no_tls_files_means_plaintext() -> None:
    assert load_scaler_tls({}) is None
    assert load_scaler_tls({"NOCTAYA_SCALER_TLS_CERT_FILE": ""}) is None


@pytest.mark.parametrize(
    "present",
    [
        ("NOCTAYA_SCALER_TLS_CERT_FILE",),
        ("NOCTAYA_SCALER_TLS_KEY_FILE",),
        ("NOCTAYA_SCALER_TLS_CLIENT_CA_FILE",),
        ("NOCTAYA_SCALER_TLS_CERT_FILE", "NOCTAYA_SCALER_TLS_KEY_FILE"),
        ("NOCTAYA_SCALER_TLS_KEY_FILE", "NOCTAYA_SCALER_TLS_CLIENT_CA_FILE"),
    ],
)
def test_some_but_not_all_tls_files_is_a_startup_error(pki: Pki, present: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match=exactly(TOGETHER)):
        load_scaler_tls({name: pki.env[name] for name in present})


def test_missing_server_certificate_names_the_file(pki: Pki, tmp_path: Path) -> None:
    env = {**pki.env, "NOCTAYA_SCALER_TLS_CERT_FILE": str(tmp_path / "absent.crt")}
    message = (
        f"load external scaler server certificate: open {tmp_path / 'absent.crt'}: "
        "no such file or directory"
    )
    with pytest.raises(ValueError, match=exactly(message)):
        load_scaler_tls(env)


def test_key_that_does_not_match_the_certificate_is_a_startup_error(
    pki: Pki, tmp_path: Path
) -> None:
    _, other_key = pki.ca.issue("other", dns=(SERVICE_DNS,), server=True).write(tmp_path, "o")
    env = {**pki.env, "NOCTAYA_SCALER_TLS_KEY_FILE": str(other_key)}
    with pytest.raises(ValueError, match=r"^load external scaler server certificate: .*mismatch"):
        load_scaler_tls(env)


def test_certificate_file_without_a_certificate_is_a_startup_error(
    pki: Pki, tmp_path: Path
) -> None:
    empty = tmp_path / "empty.crt"
    empty.write_text("not a certificate\n")
    env = {**pki.env, "NOCTAYA_SCALER_TLS_CERT_FILE": str(empty)}
    message = f"load external scaler server certificate: no PEM certificate in {empty}"
    with pytest.raises(ValueError, match=exactly(message)):
        load_scaler_tls(env)


def test_unreadable_client_ca_is_a_startup_error(pki: Pki, tmp_path: Path) -> None:
    env = {**pki.env, "NOCTAYA_SCALER_TLS_CLIENT_CA_FILE": str(tmp_path)}
    message = f"read external scaler client CA: read {tmp_path}: is a directory"
    with pytest.raises(ValueError, match=exactly(message)):
        load_scaler_tls(env)


def test_client_ca_without_certificates_is_a_startup_error(pki: Pki, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.crt"
    garbage.write_text(
        "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n"
    )
    env = {**pki.env, "NOCTAYA_SCALER_TLS_CLIENT_CA_FILE": str(garbage)}
    with pytest.raises(ValueError, match=exactly("parse external scaler client CA")):
        load_scaler_tls(env)


async def test_client_with_a_ca_signed_certificate_is_served(
    pki: Pki, tls_scaler: ScalerServer
) -> None:
    client = mtls_client(tls_scaler.port, pki.ca.cert_pem, pki.client)
    assert await client.is_active() is True
    assert await client.metric() == 1
    await client.close()


async def test_plaintext_client_is_refused(tls_scaler: ScalerServer) -> None:
    assert await refused(Keda.insecure(tls_scaler.port))


async def test_tls_client_without_a_certificate_is_refused(
    pki: Pki, tls_scaler: ScalerServer
) -> None:
    assert await refused(mtls_client(tls_scaler.port, pki.ca.cert_pem, None))


async def test_client_certificate_from_another_ca_is_refused(
    pki: Pki, tls_scaler: ScalerServer
) -> None:
    stranger = CertificateAuthority("someone-else").issue("keda", server=False)
    assert await refused(mtls_client(tls_scaler.port, pki.ca.cert_pem, stranger))


async def test_server_certificate_without_the_service_san_fails_client_verification(
    pki: Pki, tmp_path: Path
) -> None:
    wrong = pki.ca.issue("scaler", dns=("demo-scaler.other.svc",), server=True)
    cert, key = wrong.write(tmp_path, "wrong")
    env = {
        **pki.env,
        "NOCTAYA_SCALER_TLS_CERT_FILE": str(cert),
        "NOCTAYA_SCALER_TLS_KEY_FILE": str(key),
    }
    server = await serve(env)
    try:
        assert await refused(mtls_client(server.port, pki.ca.cert_pem, pki.client))
    finally:
        await server.stop(1)


async def test_tls_versions_below_1_2_are_refused_and_1_2_is_accepted(
    pki: Pki, tls_scaler: ScalerServer, tmp_path: Path
) -> None:
    cert, key = pki.client.write(tmp_path, "client")

    def handshake(version: ssl.TLSVersion) -> str:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            context.minimum_version = min(version, ssl.TLSVersion.TLSv1_2)
            context.maximum_version = version
        context.set_ciphers("DEFAULT:@SECLEVEL=0")
        context.set_alpn_protocols(["h2"])
        context.load_verify_locations(cadata=pki.ca.cert_pem.decode())
        context.load_cert_chain(cert, key)
        with (
            socket.create_connection(("127.0.0.1", tls_scaler.port), timeout=5) as raw,
            context.wrap_socket(raw, server_hostname=SERVICE_DNS) as tls,
        ):
            return str(tls.version())

    assert await asyncio.to_thread(handshake, ssl.TLSVersion.TLSv1_2) == "TLSv1.2"
    # The client does offer TLS 1.1 (it would fail with NO_PROTOCOLS_AVAILABLE otherwise); the
    # server refuses it with an alert or by closing the connection.
    with pytest.raises(ssl.SSLError, match=r"PROTOCOL_VERSION|UNEXPECTED_EOF"):
        await asyncio.to_thread(handshake, ssl.TLSVersion.TLSv1_1)
