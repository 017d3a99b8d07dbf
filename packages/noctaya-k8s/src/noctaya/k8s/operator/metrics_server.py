"""`/metrics` on `--metrics-bind-address`: plain HTTP, or HTTPS behind the API server's verdict.

Secure mode is controller-runtime's authn/authz filter: the caller's bearer token goes to a
TokenReview (who is this?) and the user to a SubjectAccessReview for `get` on the non-resource
URL `/metrics` (may they?). It speaks HTTP/1.1 only (ALPN offers nothing else), which is what
`--enable-http2=false` asks for; the certificate is read once at start.
"""

from __future__ import annotations

import logging
import ssl
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

from kubernetes import client as k8s
from noctaya.k8s.runtime.health import BackgroundServer, bind_server, parse_probe_address
from noctaya.k8s.runtime.resources import describe_error
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)

METRICS_PATH = "/metrics"
_REQUEST_TIMEOUT = 10.0


class AccessReview:
    """Asks the API server whether a bearer token may read a path; fails closed on errors."""

    def __init__(self, api_client: k8s.ApiClient) -> None:
        self._authentication = k8s.AuthenticationV1Api(api_client)
        self._authorization = k8s.AuthorizationV1Api(api_client)

    def status(self, authorization: str | None, path: str) -> HTTPStatus:
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return HTTPStatus.UNAUTHORIZED
        try:
            review: Any = self._authentication.create_token_review(
                k8s.V1TokenReview(spec=k8s.V1TokenReviewSpec(token=token.strip())),
                _request_timeout=_REQUEST_TIMEOUT,
            )
        except Exception as error:
            log.warning("metrics: token review failed: %s", describe_error(error))
            return HTTPStatus.UNAUTHORIZED
        if not review.status or not review.status.authenticated:
            return HTTPStatus.UNAUTHORIZED
        user = review.status.user
        spec = k8s.V1SubjectAccessReviewSpec(
            user=user.username,
            uid=user.uid,
            groups=user.groups,
            extra=user.extra,
            non_resource_attributes=k8s.V1NonResourceAttributes(path=path, verb="get"),
        )
        try:
            decision: Any = self._authorization.create_subject_access_review(
                k8s.V1SubjectAccessReview(spec=spec), _request_timeout=_REQUEST_TIMEOUT
            )
        except Exception as error:
            log.warning("metrics: access review failed: %s", describe_error(error))
            return HTTPStatus.FORBIDDEN
        if not decision.status or not decision.status.allowed:
            log.debug("metrics: %s may not get %s", user.username, path)
            return HTTPStatus.FORBIDDEN
        return HTTPStatus.OK


class _MetricsHTTPServer(ThreadingHTTPServer):
    registry: CollectorRegistry
    reviewer: AccessReview | None


class _Handler(BaseHTTPRequestHandler):
    timeout = _REQUEST_TIMEOUT  # a client that stalls (or never finishes TLS) loses its thread

    def do_GET(self) -> None:
        server = cast(_MetricsHTTPServer, self.server)
        path = self.path.split("?", 1)[0]
        if path != METRICS_PATH:
            self._error(HTTPStatus.NOT_FOUND)
            return
        if server.reviewer is not None:
            verdict = server.reviewer.status(self.headers.get("Authorization"), path)
            if verdict != HTTPStatus.OK:
                self._error(verdict)
                return
        body = generate_latest(server.registry)
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", CONTENT_TYPE_LATEST)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: HTTPStatus) -> None:
        """As Go's `http.Error`: the status text and a newline, plain text, nosniff."""
        body = f"{status.phrase}\n".encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Scrapes every few seconds would flood the operator log."""


def server_tls(cert_dir: str, cert_name: str, key_name: str) -> ssl.SSLContext:
    """TLS 1.2+ with the certificate in `cert_dir`, HTTP/1.1 only."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    cert, key = Path(cert_dir) / cert_name, Path(cert_dir) / key_name
    try:
        context.load_cert_chain(cert, key)
    except OSError as error:  # ssl.SSLError included
        reason = error.strerror or str(error)
        message = f"cannot load the metrics certificate {cert} and key {key}: {reason}"
        raise OSError(message) from error
    context.set_alpn_protocols(["http/1.1"])
    return context


class MetricsServer(BackgroundServer):
    """Serves `registry` in a background thread until `stop`."""

    def __init__(
        self,
        address: str,
        registry: CollectorRegistry,
        *,
        tls: ssl.SSLContext | None = None,
        reviewer: AccessReview | None = None,
    ) -> None:
        super().__init__("metrics")
        parsed = parse_probe_address(address, "metrics bind")
        if parsed is None:
            raise ValueError('the metrics address is disabled ("0"); do not start a server')
        self._host, self._port = parsed
        self._registry = registry
        self._tls = tls
        self._reviewer = reviewer

    def start(self) -> None:
        server = cast(_MetricsHTTPServer, bind_server(self._host, self._port, _Handler))
        server.registry = self._registry
        server.reviewer = self._reviewer
        if self._tls is not None:
            # The handshake happens on first read, in the connection's own thread.
            server.socket = self._tls.wrap_socket(
                server.socket, server_side=True, do_handshake_on_connect=False
            )
        self._serve(server, "metrics")
        scheme = "https" if self._tls else "http"
        log.info(
            "serving metrics",
            extra={"address": f"{scheme}://{self._host or '*'}:{self.port}{METRICS_PATH}"},
        )
