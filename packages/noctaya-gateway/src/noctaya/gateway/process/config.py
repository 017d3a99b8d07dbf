"""Gateway settings from the `NOCTAYA_*` environment, parsed exactly as the operator renders them.

The reference implementation's variables are read as it reads them, on purpose: durations in
the contract's duration syntax (`90s`, `1h30m`), integers as an optional sign and ASCII digits,
and a value that does not parse means the default. The gateway's own (the timeouts, the body
size) are strict: a bad value stops startup.

Tunables no variable sets (readiness interval, grace, drain budget) are fields with fixed
defaults too, so in-process tests can shrink them; the environment never sets them.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from noctaya.core.plan import gateway_env as names
from noctaya.core.plan.gateway_env import DEFAULT_BACKEND_READINESS_PATH
from noctaya.core.values import Duration
from noctaya.core.values.duration import positive_duration
from noctaya.core.values.go_text import go_positive_int, go_quote
from noctaya.gateway.process.config_shared import (
    DEFAULT_SCALER_LISTEN_ADDR,
    ConfigError,
    listen_addr_setting,
)
from noctaya.gateway.process.describe import describe_error
from noctaya.gateway.requests.auth import read_key
from noctaya.gateway.upstream.pool import HEAD_TIMEOUT, READ_TIMEOUT

if TYPE_CHECKING:
    from noctaya.gateway.scaler.kv_cache_settings import KvCacheSettings

DEFAULT_LISTEN_ADDR = ":8080"
DEFAULT_MAX_QUEUE = 100
DEFAULT_ACTIVATION_TIMEOUT = Duration.parse("5m")
DEFAULT_HEARTBEAT_INTERVAL = Duration.parse("10s")
DEFAULT_BACKEND_READ_TIMEOUT = Duration(round(READ_TIMEOUT * 1e9))
DEFAULT_BACKEND_HEAD_TIMEOUT = Duration(round(HEAD_TIMEOUT * 1e9))
SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
DEFAULT_KUBERNETES_TOKEN_FILE = f"{SERVICE_ACCOUNT}/token"
DEFAULT_KUBERNETES_CA_FILE = f"{SERVICE_ACCOUNT}/ca.crt"
ENDPOINTS_RETRY_SECONDS = 10.0
MIB = 1024 * 1024
DEFAULT_MAX_REQUEST_BODY = 8 * MIB
"""Equal to the stream-detection peek, so a request that waits for a cold backend is held whole
(bounded) and a client that disconnects during that wait is always noticed."""
DEFAULT_REQUEST_BODY_TIMEOUT = Duration.parse("60s")
DEFAULT_CLIENT_SEND_TIMEOUT = Duration.parse("60s")


_REQUEST_PATH = re.compile(r"/[!-~]*")
"""What may follow the backend URL in a request line as the readiness path."""
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
"""A namespace's or a Service's name (RFC 1123 label)."""


class ColdStartMode(enum.Enum):
    KEEPALIVE = "keepalive"
    REJECT = "reject"


@dataclass(frozen=True)
class BackendEndpoints:
    """The backend Service whose EndpointSlices the gateway follows, and how it reaches the
    Kubernetes API for them."""

    namespace: str
    service: str
    api_url: str | None
    """`https://<KUBERNETES_SERVICE_HOST>:<KUBERNETES_SERVICE_PORT>`; None when the platform
    did not set them (the gateway then keeps to the Service URL and says why)."""
    token_file: str = DEFAULT_KUBERNETES_TOKEN_FILE
    ca_file: str = DEFAULT_KUBERNETES_CA_FILE


@dataclass(frozen=True)
class GatewayConfig:
    backend_url: str
    backend_readiness_path: str = DEFAULT_BACKEND_READINESS_PATH
    listen_addr: str = DEFAULT_LISTEN_ADDR
    max_queue: int = DEFAULT_MAX_QUEUE
    activation_timeout: float = DEFAULT_ACTIVATION_TIMEOUT.seconds
    coldstart_mode: ColdStartMode = ColdStartMode.KEEPALIVE
    heartbeat_interval: float = DEFAULT_HEARTBEAT_INTERVAL.seconds
    client_api_key_file: str | None = None
    scaler_listen_addr: str = DEFAULT_SCALER_LISTEN_ADDR
    demand_aggregator_url: str | None = None
    max_request_body: int = DEFAULT_MAX_REQUEST_BODY
    readiness_interval: float = 0.5
    held_readiness_interval: float = 0.05
    """Readiness is probed this often while requests wait for a cold backend (the interval
    above otherwise): how late the gateway learns of readiness adds to their first token."""
    readiness_timeout: float = 2.0
    ready_grace: float = 15.0
    peek_limit: int = 8 * MIB
    shutdown_timeout: float = 20.0
    idle_timeout: float = 120.0
    request_body_timeout: float = DEFAULT_REQUEST_BODY_TIMEOUT.seconds
    client_send_timeout: float = DEFAULT_CLIENT_SEND_TIMEOUT.seconds
    backend_read_timeout: float = DEFAULT_BACKEND_READ_TIMEOUT.seconds
    backend_head_timeout: float = DEFAULT_BACKEND_HEAD_TIMEOUT.seconds
    served_models: tuple[str, ...] = ()
    backend_endpoints: BackendEndpoints | None = None
    """None: requests and readiness go through `backend_url` alone."""
    endpoints_retry_interval: float = ENDPOINTS_RETRY_SECONDS
    """How often a watch that cannot work (RBAC taken away) is tried again."""
    kv_cache: KvCacheSettings | None = None
    """`kvCacheUtil` scaling: where each pod's KV-cache gauge is read (None: `queueDepth`)."""


def load_config(environ: Mapping[str, str]) -> GatewayConfig:
    """Build the gateway-mode configuration; raise ConfigError on what prevents startup."""
    backend_url = environ.get(names.BACKEND_URL, "")
    if not backend_url:
        raise ConfigError(f"{names.BACKEND_URL} is required")
    if not is_absolute_http_url(backend_url):
        raise ConfigError("backend URL must be an absolute HTTP URL")
    listen_addr = listen_addr_setting(environ, names.LISTEN_ADDR, DEFAULT_LISTEN_ADDR)
    scaler_listen_addr = listen_addr_setting(
        environ, names.SCALER_LISTEN_ADDR, DEFAULT_SCALER_LISTEN_ADDR
    )
    readiness_path = _request_path(
        environ, names.BACKEND_READINESS_PATH, DEFAULT_BACKEND_READINESS_PATH
    )
    key_file = environ.get(names.CLIENT_API_KEY_FILE) or None
    if key_file is not None:
        _check_key_file(key_file)
    mode = environ.get(names.COLDSTART_MODE, "")
    return GatewayConfig(
        backend_url=backend_url,
        backend_readiness_path=readiness_path,
        listen_addr=listen_addr,
        max_queue=_positive_int(environ.get(names.MAX_QUEUE), DEFAULT_MAX_QUEUE),
        activation_timeout=_positive_seconds(
            environ.get(names.ACTIVATION_TIMEOUT), DEFAULT_ACTIVATION_TIMEOUT
        ),
        coldstart_mode=ColdStartMode.REJECT if mode == "reject" else ColdStartMode.KEEPALIVE,
        heartbeat_interval=_positive_seconds(
            environ.get(names.HEARTBEAT_INTERVAL), DEFAULT_HEARTBEAT_INTERVAL
        ),
        client_api_key_file=key_file,
        scaler_listen_addr=scaler_listen_addr,
        demand_aggregator_url=environ.get(names.DEMAND_AGGREGATOR_URL) or None,
        max_request_body=_byte_size(environ.get(names.MAX_REQUEST_BODY)),
        request_body_timeout=_timeout(
            environ, names.REQUEST_BODY_TIMEOUT, DEFAULT_REQUEST_BODY_TIMEOUT
        ),
        client_send_timeout=_timeout(
            environ, names.CLIENT_SEND_TIMEOUT, DEFAULT_CLIENT_SEND_TIMEOUT
        ),
        backend_read_timeout=_timeout(
            environ, names.BACKEND_READ_TIMEOUT, DEFAULT_BACKEND_READ_TIMEOUT
        ),
        backend_head_timeout=_timeout(
            environ, names.BACKEND_HEAD_TIMEOUT, DEFAULT_BACKEND_HEAD_TIMEOUT
        ),
        served_models=_served_models(environ.get(names.SERVED_MODELS)),
        backend_endpoints=_backend_endpoints(environ),
        kv_cache=_kv_cache(environ),
    )


def _kv_cache(environ: Mapping[str, str]) -> KvCacheSettings | None:
    """As the scaler reads it; its package loads only when the metric is named, as the scaler's
    does when it starts."""
    if not environ.get(names.SCALING_METRIC):
        return None
    from noctaya.gateway.scaler.kv_cache_settings import load_kv_cache_settings

    try:
        return load_kv_cache_settings(environ)
    except ValueError as error:
        raise ConfigError(str(error)) from None


def _backend_endpoints(environ: Mapping[str, str]) -> BackendEndpoints | None:
    text = environ.get(names.BACKEND_ENDPOINTS)
    if not text:
        return None
    namespace, _, service = text.partition("/")
    if not (_DNS_LABEL.fullmatch(namespace) and _DNS_LABEL.fullmatch(service)):
        raise ConfigError(
            f"{names.BACKEND_ENDPOINTS} must be <namespace>/<service>, got {go_quote(text)}"
        )
    host = environ.get("KUBERNETES_SERVICE_HOST", "")
    port = environ.get("KUBERNETES_SERVICE_PORT", "443")
    api_url = None
    if host and port.isdigit():
        api_url = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    return BackendEndpoints(
        namespace,
        service,
        api_url,
        token_file=environ.get(names.KUBERNETES_TOKEN_FILE) or DEFAULT_KUBERNETES_TOKEN_FILE,
        ca_file=environ.get(names.KUBERNETES_CA_FILE) or DEFAULT_KUBERNETES_CA_FILE,
    )


def _request_path(environ: Mapping[str, str], name: str, default: str) -> str:
    path = environ.get(name) or default
    if not _REQUEST_PATH.fullmatch(path):
        raise ConfigError(
            f"{name}: {go_quote(path)} is not an absolute path of printable ASCII without spaces"
        )
    return path


def _served_models(text: str | None) -> tuple[str, ...]:
    if not text:
        return ()
    try:
        listed = json.loads(text)
    except ValueError:
        listed = None
    if not isinstance(listed, list) or not all(isinstance(n, str) and n for n in listed):
        raise ConfigError(
            f"{names.SERVED_MODELS} must be a JSON list of model names, got {go_quote(text)}"
        )
    return tuple(listed)


def is_absolute_http_url(text: str) -> bool:
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _check_key_file(path: str) -> None:
    """The key file as requests will read it (`read_key`), so start-up refuses what they would."""
    try:
        read_key(path)
    except OSError as error:
        raise ConfigError(f"read client API key: {describe_error(error)}") from None
    except ValueError as error:
        raise ConfigError(str(error)) from None


def _positive_int(text: str | None, default: int) -> int:
    """An optional sign and ASCII digits; anything else (or a non-positive value) means the
    default."""
    value = None if text is None else go_positive_int(text)
    return default if value is None else value


def _positive_seconds(text: str | None, default: Duration) -> float:
    try:
        value = Duration.parse(text or "")
    except ValueError:
        return default.seconds
    return value.seconds if value.nanoseconds > 0 else default.seconds


def _timeout(environ: Mapping[str, str], name: str, default: Duration) -> float:
    """A positive duration (`10m`, `90s`); strict, since it is ours."""
    text = environ.get(name)
    if not text:
        return default.seconds
    try:
        return positive_duration(text).seconds
    except ValueError:
        raise ConfigError(
            f'{name} must be a positive duration such as "{default}", got "{text}"'
        ) from None


def _byte_size(text: str | None) -> int:
    """A byte count as a Kubernetes quantity (`8Mi`, `10000000`); strict, since it is ours."""
    if not text:
        return DEFAULT_MAX_REQUEST_BODY
    from noctaya.core.values.quantity import byte_count  # (decimal, 0.4 MiB) only when set

    try:
        return byte_count(text)
    except ValueError:
        raise ConfigError(
            f'{names.MAX_REQUEST_BODY} must be a positive whole number of bytes such as "8Mi", '
            f'got "{text}"'
        ) from None
