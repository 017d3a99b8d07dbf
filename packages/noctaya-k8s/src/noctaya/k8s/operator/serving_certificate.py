"""The metrics server's TLS: a given certificate that follows rotation, or a generated one.

With `--metrics-cert-path` the files there are served and re-read when they change (a
cert-manager renewal or a Secret update takes effect on the next connection, no restart);
without it a self-signed certificate is generated at start-up, so that secure metrics (the
default) work without any certificate management. TLS 1.2+, and
ALPN offers HTTP/1.1 only, which is what `--enable-http2=false` asks for.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import os
import ssl
import tempfile
import threading
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

log = logging.getLogger(__name__)

SELF_SIGNED_VALIDITY = datetime.timedelta(days=365)
LOOPBACK = (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"))

_Signature = tuple[tuple[int, int, int], ...]


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    """A server context for the certificate and key files; OSError names both on failure."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    try:
        context.load_cert_chain(cert, key)
    except OSError as error:  # ssl.SSLError included
        reason = error.strerror or str(error)
        message = f"cannot load the metrics certificate {cert} and key {key}: {reason}"
        raise OSError(message) from error
    return context


class CertificateFiles:
    """The context for the certificate in `cert_dir`, rebuilt when either file changes.

    Called for every new connection; two `stat` calls decide whether to reload. A pair that does
    not load (caught mid-rotation, or a key that does not match) keeps the previous one serving.
    """

    def __init__(self, cert_dir: str, cert_name: str, key_name: str) -> None:
        self._cert = Path(cert_dir) / cert_name
        self._key = Path(cert_dir) / key_name
        self._lock = threading.Lock()
        self._context = server_context(self._cert, self._key)  # raises: nothing to serve yet
        self._signature = self._stat()

    def __call__(self) -> ssl.SSLContext:
        with self._lock:
            try:
                signature = self._stat()
            except OSError as error:
                log.warning("metrics certificate unreadable, serving the previous one: %s", error)
                return self._context
            if signature != self._signature:
                try:
                    self._context = server_context(self._cert, self._key)
                except OSError as error:
                    log.warning("metrics certificate not reloaded: %s", error)
                else:
                    log.info("reloaded the metrics certificate", extra={"path": str(self._cert)})
                self._signature = signature
            return self._context

    def _stat(self) -> _Signature:
        """Follows symlinks, so a Secret volume's atomic `..data` swap counts as a change."""
        return tuple(
            (status.st_ino, status.st_size, status.st_mtime_ns)
            for status in (os.stat(self._cert), os.stat(self._key))
        )


def self_signed_context(hostname: str) -> ssl.SSLContext:
    """A context serving a fresh self-signed certificate for `hostname`, localhost and loopback.

    The key exists only in memory after this returns: `ssl` loads a chain from files only, so
    they go to a private temporary directory that is removed at once.
    """
    cert_pem, key_pem = _self_signed_pem(hostname)
    with tempfile.TemporaryDirectory(prefix="noctaya-metrics-") as directory:
        cert, key = Path(directory) / "tls.crt", Path(directory) / "tls.key"
        cert.write_bytes(cert_pem)
        key.write_bytes(key_pem)
        return server_context(cert, key)


def _self_signed_pem(hostname: str) -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    # `<host>@<unix time>`: which pod made the certificate and when, a new name at every start.
    common_name = f"{hostname}@{int(now.timestamp())}"
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    hosts = dict.fromkeys((hostname, "localhost"))  # once each, in order
    names: list[x509.GeneralName] = [x509.DNSName(host) for host in hosts]
    names += [x509.IPAddress(address) for address in LOOPBACK]
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + SELF_SIGNED_VALIDITY)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return certificate.public_bytes(serialization.Encoding.PEM), key_pem
