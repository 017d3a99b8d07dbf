"""Every variable of each mode, as the manual's settings page lists it (`hack/gen-metrics-docs.py`
writes the page from these tables, and tests hold them to the contract and the parsers).

The defaults are the constants the parsers use, so the page cannot drift from what a process
does; the tables themselves stay out of the processes, which never read them.
"""

from __future__ import annotations

from dataclasses import dataclass

from noctaya.core.plan import gateway_env as names
from noctaya.core.plan.gateway_env import DEFAULT_BACKEND_READINESS_PATH
from noctaya.gateway.aggregator.config import (
    DEFAULT_LISTEN_ADDR as DEFAULT_AGGREGATOR_LISTEN_ADDR,
)
from noctaya.gateway.aggregator.config import DEFAULT_MAX_DEMAND, DEFAULT_MAX_MEMBERS
from noctaya.gateway.aggregator.protocol import MIN_TOKEN_LENGTH
from noctaya.gateway.process.config import (
    DEFAULT_ACTIVATION_TIMEOUT,
    DEFAULT_BACKEND_HEAD_TIMEOUT,
    DEFAULT_BACKEND_READ_TIMEOUT,
    DEFAULT_CLIENT_SEND_TIMEOUT,
    DEFAULT_HEARTBEAT_INTERVAL,
    DEFAULT_KUBERNETES_CA_FILE,
    DEFAULT_KUBERNETES_TOKEN_FILE,
    DEFAULT_LISTEN_ADDR,
    DEFAULT_MAX_QUEUE,
    DEFAULT_MAX_REQUEST_BODY,
    DEFAULT_REQUEST_BODY_TIMEOUT,
    ENDPOINTS_RETRY_SECONDS,
    MIB,
    ColdStartMode,
)
from noctaya.gateway.process.config_shared import DEFAULT_SCALER_LISTEN_ADDR
from noctaya.gateway.scaler.kv_cache_settings import (
    DEFAULT_METRICS_PATH,
    KV_CACHE_UTIL,
    QUEUE_DEPTH,
)


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


_LENIENT_DURATION = "Go duration (`90s`, `5m`); anything else, or zero, means the default"
_STRICT_DURATION = "positive Go duration (`90s`, `10m`); anything else stops startup"
GATEWAY_SETTINGS = (
    Setting(
        names.BACKEND_URL,
        "",
        "absolute `http` or `https` URL with a host; required",
        "The backend Service: requests are proxied to it, and `GET` on "
        f"`{names.BACKEND_READINESS_PATH}` answering 200 means a backend is ready.",
    ),
    Setting(
        names.BACKEND_ENDPOINTS,
        "",
        "`<namespace>/<service>`, each a DNS label; anything else stops startup",
        "The backend Service whose EndpointSlices the gateway lists and watches (through the "
        "API server at `KUBERNETES_SERVICE_HOST`:`KUBERNETES_SERVICE_PORT`, which Kubernetes "
        "sets in every pod): each request goes to the ready pod with the fewest requests in "
        "flight from this gateway, never to a terminating one, and a held request to the first "
        "pod found ready, by its EndpointSlice or by the gateway's own readiness probe of its "
        "address. Any IP address a slice labelled for the Service names is sent requests, as "
        "kube-proxy routes the Service to it: who may write EndpointSlices in the namespace "
        "already decides where its traffic goes. Where the watch cannot work (no token, or "
        "RBAC refuses it: 401, 403) the gateway sends to the backend URL, says so once in its "
        "log and in "
        f"`noctaya_gateway_endpoints_watch`, and tries again every {ENDPOINTS_RETRY_SECONDS:g} "
        "s. Unset: the backend URL only (local mode).",
    ),
    Setting(
        names.KUBERNETES_TOKEN_FILE,
        DEFAULT_KUBERNETES_TOKEN_FILE,
        "path of a file",
        "The ServiceAccount token the watch presents; read again for every request to the API "
        "server, so a rotated projected token is used as soon as it is written.",
    ),
    Setting(
        names.KUBERNETES_CA_FILE,
        DEFAULT_KUBERNETES_CA_FILE,
        "path of a PEM file",
        "The CA bundle that signs the API server's certificate; read again whenever the watch "
        "lists.",
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
        names.SCALING_METRIC,
        QUEUE_DEPTH,
        f"`{QUEUE_DEPTH}` or `{KV_CACHE_UTIL}`; anything else stops startup",
        "What the gRPC scaler reports to KEDA: the requests admitted, or the engines' KV-cache "
        f"use read from each ready pod (needs `{names.BACKEND_ENDPOINTS}`). Set from "
        "`spec.scaling.metric`.",
    ),
    Setting(
        names.BACKEND_METRICS_PORT,
        "",
        f"port number (1–65535); required with `{KV_CACHE_UTIL}`, else startup stops",
        f"Where each pod's engine serves its metrics for `{KV_CACHE_UTIL}`.",
    ),
    Setting(
        names.BACKEND_METRICS_PATH,
        DEFAULT_METRICS_PATH,
        "absolute path of printable ASCII without spaces; anything else stops startup",
        f"The path of each pod's engine metrics for `{KV_CACHE_UTIL}`.",
    ),
    Setting(
        names.BACKEND_KV_CACHE_METRIC,
        "",
        f"a Prometheus metric name; required with `{KV_CACHE_UTIL}`, else startup stops",
        "The engine's KV-cache gauge, a 0–1 fraction (vLLM's `vllm:kv_cache_usage_perc`), read "
        f"for `{KV_CACHE_UTIL}`; the operator sets the runtime's `spec.metrics.kvCacheUtil`.",
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
        "Clients must send `Authorization: Bearer <key>`; the file is re-read as requests come "
        "(a key read is used for at most a second), so a rotated Secret takes effect without a "
        "restart. The operator mounts "
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
        "The path, under the backend URL, whose 200 means a backend is ready. The operator "
        "(on a cluster) and local mode both set it from the path of the runtime's "
        "`spec.health.readiness.httpGet` probe when that path is not `/health`; on a cluster "
        "the Service also routes only to pods that passed their own readiness probe.",
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

_POSITIVE_INT = "positive integer; anything else stops startup"

AGGREGATOR_SETTINGS = (
    Setting(
        names.DEMAND_AUTH_TOKEN_FILE,
        "",
        f"path of a file holding at least {MIN_TOKEN_LENGTH} characters; required",
        "The token every gateway's demand report must carry; re-read for every report, and "
        "`/readyz` answers 503 while it is unreadable or too short.",
    ),
    Setting(
        names.MAX_GATEWAY_MEMBERS,
        str(DEFAULT_MAX_MEMBERS),
        _POSITIVE_INT,
        "Gateway replicas counted at once; a report from one more is answered 429 `gateway "
        "member capacity reached`. The operator sets four times the gateway replicas, at "
        "least 16, room for a rollout's overlap.",
    ),
    Setting(
        names.MAX_GATEWAY_DEMAND,
        str(DEFAULT_MAX_DEMAND),
        _POSITIVE_INT,
        "Largest demand one report may carry; a larger one is answered 400 `invalid demand "
        "report`. The operator sets the gateways' `spec.endpoint.maxQueue`.",
    ),
    Setting(
        names.AGGREGATOR_LISTEN_ADDR,
        DEFAULT_AGGREGATOR_LISTEN_ADDR,
        ADDRESS_FORM,
        "The plain HTTP endpoint: demand reports (`POST /v1/demand`), `/healthz`, `/readyz` "
        "and `/metrics`.",
    ),
    Setting(
        names.SCALER_LISTEN_ADDR,
        DEFAULT_SCALER_LISTEN_ADDR,
        ADDRESS_FORM,
        "KEDA's External Push gRPC scaler, serving the sum of the gateways' demand.",
    ),
    *SCALER_TLS_SETTINGS,
)
"""Every variable of `--mode=aggregator`."""
