"""Gateway settings from the `NOCTAYA_*` environment, parsed exactly as the operator renders them.

Tunables no variable sets (readiness interval, grace, drain budget) are fields with fixed
defaults too, so in-process tests can shrink them; the environment never sets them.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from noctaya.core.plan import gateway_env as names
from noctaya.core.values import Duration
from noctaya.core.values.duration import positive_duration
from noctaya.core.values.go_text import go_positive_int, go_quote
from noctaya.core.values.listen_address import parse_listen_address
from noctaya.gateway.describe import describe_error
from noctaya.gateway.upstream.pool import HEAD_TIMEOUT, READ_TIMEOUT

DEFAULT_BACKEND_READINESS_PATH = "/health"
DEFAULT_LISTEN_ADDR = ":8080"
DEFAULT_SCALER_LISTEN_ADDR = ":9090"
DEFAULT_MAX_QUEUE = 100
DEFAULT_ACTIVATION_TIMEOUT = Duration.parse("5m")
DEFAULT_HEARTBEAT_INTERVAL = Duration.parse("10s")
DEFAULT_BACKEND_READ_TIMEOUT = Duration(round(READ_TIMEOUT * 1e9))
DEFAULT_BACKEND_HEAD_TIMEOUT = Duration(round(HEAD_TIMEOUT * 1e9))
MIB = 1024 * 1024
DEFAULT_MAX_REQUEST_BODY = 8 * MIB
"""Equal to the stream-detection peek, so a request that waits for a cold backend is held whole
(bounded) and a client that disconnects during that wait is always noticed."""
DEFAULT_REQUEST_BODY_TIMEOUT = Duration.parse("60s")
DEFAULT_CLIENT_SEND_TIMEOUT = Duration.parse("60s")


_REQUEST_PATH = re.compile(r"/[!-~]*")
"""What may follow the backend URL in a request line as the readiness path."""


class ConfigError(ValueError):
    """A setting that prevents startup; the message is what the process prints before exiting."""


class ColdStartMode(enum.Enum):
    KEEPALIVE = "keepalive"
    REJECT = "reject"


@dataclass(frozen=True)
class Setting:
    """One variable as the manual's settings page lists it; the default comes from the constant
    the parser uses, so the page cannot drift from what the process does."""

    name: str
    default: str
    """As written in the environment; empty when there is none (`meaning` says what unset does)."""
    form: str
    meaning: str


ADDRESS_FORM = (
    "`host:port`; an empty host means every interface, an IPv6 host is bracketed (`[::1]:8080`)"
)
_LENIENT_DURATION = "Go duration (`90s`, `5m`); anything else, or zero, means the default"
_STRICT_DURATION = "positive Go duration (`90s`, `10m`); anything else stops startup"
_PEM_FILE = "path of a PEM file; the three are set together or not at all"

SCALER_TLS_SETTINGS = (
    Setting(
        names.SCALER_TLS_CERT_FILE,
        "",
        _PEM_FILE,
        "Certificate chain of the gRPC scaler, which then requires mutual TLS (1.2 or newer). "
        "Read once at startup. Unset: plaintext gRPC.",
    ),
    Setting(names.SCALER_TLS_KEY_FILE, "", _PEM_FILE, "The certificate's unencrypted key."),
    Setting(
        names.SCALER_TLS_CLIENT_CA_FILE,
        "",
        _PEM_FILE,
        "The CA that signs KEDA's client certificate; callers without one are refused.",
    ),
)
"""The scaler's mTLS files, read the same way in both modes."""

GATEWAY_SETTINGS = (
    Setting(
        names.BACKEND_URL,
        "",
        "absolute `http` or `https` URL with a host; required",
        "The backend Service: requests are proxied to it, and `GET` on "
        f"`{names.BACKEND_READINESS_PATH}` answering 200 means a backend is ready.",
    ),
    Setting(
        names.LISTEN_ADDR,
        DEFAULT_LISTEN_ADDR,
        ADDRESS_FORM,
        "The HTTP endpoint: the OpenAI-compatible API, `/healthz`, `/noctaya/queue` and "
        "`/metrics`.",
    ),
    Setting(
        names.MAX_QUEUE,
        str(DEFAULT_MAX_QUEUE),
        "positive integer; anything else means the default",
        "Requests admitted at once, waiting for a cold backend or in flight; one more is "
        "answered 429 `gateway queue full`. Set from `spec.endpoint.maxQueue`.",
    ),
    Setting(
        names.SCALER_LISTEN_ADDR,
        DEFAULT_SCALER_LISTEN_ADDR,
        ADDRESS_FORM,
        f"KEDA's External Push gRPC scaler; not served when `{names.DEMAND_AGGREGATOR_URL}` "
        "is set.",
    ),
    Setting(
        names.DEMAND_AGGREGATOR_URL,
        "",
        "absolute `http` or `https` URL",
        "Report this replica's demand to the aggregator at this URL instead of serving the "
        "gRPC scaler; the operator sets it when a service has several gateway replicas. "
        "Unset: this gateway is the scaler.",
    ),
    Setting(
        names.GATEWAY_ID,
        "",
        "text",
        "This replica's name in its demand reports (the operator sets the pod's UID). "
        "Unset: `<hostname>-<pid>`.",
    ),
    Setting(
        names.ACTIVATION_TIMEOUT,
        str(DEFAULT_ACTIVATION_TIMEOUT),
        _LENIENT_DURATION,
        "How long a request waits for a cold backend before 503 `backend not ready` (an error "
        "event on a stream already answered), and how long a cold request keeps the demand at "
        "one. Set from `spec.scaling.activationTimeout`.",
    ),
    Setting(
        names.COLDSTART_MODE,
        ColdStartMode.KEEPALIVE.value,
        "`keepalive` or `reject`; anything else means `keepalive`",
        "While no backend is ready, `keepalive` holds requests (streams get SSE heartbeats) "
        "and `reject` answers 503 with `Retry-After: 10` at once; either way the backend "
        "starts. Set from `spec.endpoint.coldStart.mode`.",
    ),
    Setting(
        names.HEARTBEAT_INTERVAL,
        str(DEFAULT_HEARTBEAT_INTERVAL),
        _LENIENT_DURATION,
        "Time between SSE `: heartbeat` comments to a streaming request that waits for a "
        "cold backend. Set from `spec.endpoint.coldStart.heartbeatInterval`.",
    ),
    Setting(
        names.SERVED_MODELS,
        "",
        'JSON list of names (`["qwen3-8b"]`); anything else stops startup',
        "The names the backend answers to: the gateway lists them on `GET /v1/models` (and "
        "answers `GET /v1/models/{name}`) while no backend is ready, without waking it. The "
        "operator and local mode set the engine's `--served-model-name` (or `--model_alias`), "
        "else the model reference. Unset: an empty list.",
    ),
    Setting(
        names.CLIENT_API_KEY_FILE,
        "",
        "path of a file holding the key; readable and not empty at startup",
        "Clients must send `Authorization: Bearer <key>`; the file is re-read on every "
        "request, so a rotated Secret takes effect without a restart. The operator mounts "
        "`spec.endpoint.authentication.secretRef`; unset, no authentication.",
    ),
    Setting(
        names.DEMAND_AUTH_TOKEN_FILE,
        "",
        f"path of a file, as for the aggregator; required with `{names.DEMAND_AGGREGATOR_URL}`",
        "The token that authenticates this replica's demand reports; re-read for every report.",
    ),
    *SCALER_TLS_SETTINGS,
    Setting(
        names.BACKEND_READINESS_PATH,
        DEFAULT_BACKEND_READINESS_PATH,
        "absolute path of printable ASCII without spaces (`/ready`); anything else stops startup",
        "The path, under the backend URL, whose 200 means a backend is ready. On a cluster the "
        "Service routes only to pods that passed their own readiness probe, so the default "
        "suits any engine that answers it; local mode, where nothing stands in front of the "
        "engine, sets it from the runtime's `spec.health.readiness.httpGet.path`.",
    ),
    Setting(
        names.MAX_REQUEST_BODY,
        f"{DEFAULT_MAX_REQUEST_BODY // MIB}Mi",
        "positive whole number of bytes as a Kubernetes quantity (`8Mi`, `10000000`); "
        "anything else stops startup",
        "Largest request body; a larger one is answered 413. The operator sets its "
        "`--gateway-max-request-body`.",
    ),
    Setting(
        names.REQUEST_BODY_TIMEOUT,
        str(DEFAULT_REQUEST_BODY_TIMEOUT),
        _STRICT_DURATION,
        "The whole request body must arrive within this, else 408. Bodies are read before "
        "admission, so a client trickling one holds its connection only, and not for longer. "
        "The operator sets its `--gateway-request-body-timeout`.",
    ),
    Setting(
        names.CLIENT_SEND_TIMEOUT,
        str(DEFAULT_CLIENT_SEND_TIMEOUT),
        _STRICT_DURATION,
        "A response write the client takes no room for within this ends the exchange (like "
        "nginx's `send_timeout`): a client that stops reading frees its queue slot and stops "
        "the backend's work. The operator sets its `--gateway-client-send-timeout`.",
    ),
    Setting(
        names.BACKEND_READ_TIMEOUT,
        str(DEFAULT_BACKEND_READ_TIMEOUT),
        _STRICT_DURATION,
        "The longest the backend may stay silent mid-exchange, else 504 (a non-streamed "
        "completion sends its first byte only once it is generated). The operator sets its "
        "`--gateway-backend-read-timeout`.",
    ),
    Setting(
        names.BACKEND_HEAD_TIMEOUT,
        str(DEFAULT_BACKEND_HEAD_TIMEOUT),
        _STRICT_DURATION,
        "How long a response head the backend has begun may take to be complete, else 504. "
        "The operator sets its `--gateway-backend-head-timeout`.",
    ),
)
"""Every variable of `--mode=gateway`: those the operator sets, in its order, then the limits it
leaves at their defaults."""


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
    readiness_path = environ.get(names.BACKEND_READINESS_PATH) or DEFAULT_BACKEND_READINESS_PATH
    if not _REQUEST_PATH.fullmatch(readiness_path):
        raise ConfigError(
            f"{names.BACKEND_READINESS_PATH}: {go_quote(readiness_path)} is not an absolute "
            "path of printable ASCII without spaces"
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
    )


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


def listen_addr_setting(environ: Mapping[str, str], name: str, default: str) -> str:
    """The Go-form listen address in `name` (`default` if unset or empty), checked at startup."""
    value = environ.get(name) or default
    try:
        parse_listen_address(value)
    except ValueError as error:
        raise ConfigError(f"{name}: {error}") from None
    return value


def is_absolute_http_url(text: str) -> bool:
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _check_key_file(path: str) -> None:
    try:
        with open(path, "rb") as handle:
            key = handle.read().strip()
    except OSError as error:
        raise ConfigError(f"read client API key: {describe_error(error)}") from None
    if not key:
        raise ConfigError("client API key must not be empty")


def _positive_int(text: str | None, default: int) -> int:
    """Go `strconv.Atoi` syntax; anything else (or a non-positive value) means the default."""
    value = None if text is None else go_positive_int(text)
    return default if value is None else value


def _positive_seconds(text: str | None, default: Duration) -> float:
    try:
        value = Duration.parse(text or "")
    except ValueError:
        return default.seconds
    return value.seconds if value.nanoseconds > 0 else default.seconds


def _timeout(environ: Mapping[str, str], name: str, default: Duration) -> float:
    """A positive Go duration (`10m`, `90s`); strict, since it is ours."""
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
