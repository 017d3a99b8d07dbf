"""Optional mTLS for the ExternalScaler: only KEDA, holding a CA-signed client certificate, may ask.

Credentials are read once at startup, so a broken Secret stops the process with a clear message
instead of failing every handshake later. As gRPC requires: TLS 1.2 or newer, ALPN `h2`, and no
TLS compression.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from noctaya.core.plan import gateway_env as names
from noctaya.gateway.process.describe import describe_error

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
    """The server's TLS context: its identity, and a client certificate signed by KEDA's CA
    required of every client; plaintext is refused."""

    context: ssl.SSLContext


def load_scaler_tls(environ: Mapping[str, str]) -> ScalerTLS | None:
    """Read the mTLS files named by the environment; None means plaintext. ValueError if bad."""
    cert_path, key_path, ca_path = (environ.get(name, "") for name in _FILE_NAMES)
    if not (cert_path or key_path or ca_path):
        return None
    if not (cert_path and key_path and ca_path):
        cert_name, key_name, ca_name = _FILE_NAMES
        raise ValueError(f"{cert_name}, {key_name}, and {ca_name} must be set together")
    try:
        context = _server_context(cert_path, key_path)
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
    context.load_verify_locations(cadata=client_ca)
    return ScalerTLS(context)


def _server_context(cert_path: str, key_path: str) -> ssl.SSLContext:
    """Loading the pair proves both files parse and belong together, as the handshake needs."""
    if not _PEM_CERTIFICATE.search(Path(cert_path).read_bytes()):
        raise ValueError(f"no PEM certificate in {cert_path}")
    Path(key_path).read_bytes()  # an unreadable key is named by its path (ssl's error names none)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_COMPRESSION
    context.set_alpn_protocols(["h2"])
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_cert_chain(cert_path, key_path, password=_refuse_encrypted_key)
    return context


def _refuse_encrypted_key() -> bytes:
    """Without this OpenSSL would prompt on the terminal for a passphrase and hang the process."""
    raise ValueError("encrypted private keys are not supported")


def _parse_certificates(pem: bytes) -> str:
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
    return "".join(accepted)
