"""Optional mTLS for the ExternalScaler: only KEDA, holding a CA-signed client certificate, may ask.

Credentials are read once at startup, so a broken Secret stops the process with a clear message
instead of failing every handshake later. gRPC's TLS stack negotiates TLS 1.2 or newer only.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import grpc
from noctaya.core.plan import gateway_env as names
from noctaya.gateway.scaler.describe import describe_error

_FILE_NAMES = (
    names.SCALER_TLS_CERT_FILE,
    names.SCALER_TLS_KEY_FILE,
    names.SCALER_TLS_CLIENT_CA_FILE,
)

_PEM_CERTIFICATE = re.compile(
    rb"-----BEGIN CERTIFICATE-----\r?\n.+?\r?\n-----END CERTIFICATE-----", re.DOTALL
)


@dataclass(frozen=True)
class ScalerTLS:
    """PEM material of the server identity and of the CA that signs KEDA's client certificate."""

    certificate_chain: bytes
    private_key: bytes
    client_ca: bytes

    def server_credentials(self) -> grpc.ServerCredentials:
        """Credentials that require and verify a client certificate; plaintext is refused."""
        return grpc.ssl_server_credentials(
            [(self.private_key, self.certificate_chain)],
            root_certificates=self.client_ca,
            require_client_auth=True,
        )


def load_scaler_tls(environ: Mapping[str, str]) -> ScalerTLS | None:
    """Read the mTLS files named by the environment; None means plaintext. ValueError if bad."""
    cert_path, key_path, ca_path = (environ.get(name, "") for name in _FILE_NAMES)
    if not (cert_path or key_path or ca_path):
        return None
    if not (cert_path and key_path and ca_path):
        cert_name, key_name, ca_name = _FILE_NAMES
        raise ValueError(f"{cert_name}, {key_name}, and {ca_name} must be set together")
    try:
        chain, key = _load_key_pair(cert_path, key_path)
    except (OSError, ssl.SSLError, ValueError) as exc:
        reason = describe_error(exc)
        raise ValueError(f"load external scaler server certificate: {reason}") from None
    try:
        ca_pem = Path(ca_path).read_bytes()
    except OSError as exc:
        raise ValueError(f"read external scaler client CA: {describe_error(exc)}") from None
    client_ca = _parse_certificates(ca_pem)
    if not client_ca:
        raise ValueError("parse external scaler client CA")
    return ScalerTLS(certificate_chain=chain, private_key=key, client_ca=client_ca)


def _load_key_pair(cert_path: str, key_path: str) -> tuple[bytes, bytes]:
    """Read both files and prove they parse and belong together, as the TLS handshake needs."""
    chain = Path(cert_path).read_bytes()
    key = Path(key_path).read_bytes()
    if not _PEM_CERTIFICATE.search(chain):
        raise ValueError(f"no PEM certificate in {cert_path}")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path, password=_refuse_encrypted_key)
    return chain, key


def _refuse_encrypted_key() -> bytes:
    """Without this OpenSSL would prompt on the terminal for a passphrase and hang the process."""
    raise ValueError("encrypted private keys are not supported")


def _parse_certificates(pem: bytes) -> bytes:
    """The parseable certificates of a PEM bundle (re-encoded); unparseable blocks are skipped."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    accepted: list[str] = []
    for block in _PEM_CERTIFICATE.finditer(pem):
        try:
            der = ssl.PEM_cert_to_DER_cert(block.group().decode("ascii"))
            context.load_verify_locations(cadata=der)
        except (ValueError, ssl.SSLError):
            continue
        accepted.append(ssl.DER_cert_to_PEM_cert(der))
    return "".join(accepted).encode("ascii")
