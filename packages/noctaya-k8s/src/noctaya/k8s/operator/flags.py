"""The operator's command line.

It is read as Go's `flag` package reads the reference operator's, on purpose: deployment
manifests written for Go operators pass `--leader-elect=true`, so booleans take an optional
`=value` in the spellings of Go's `strconv.ParseBool`, and a bare `--leader-elect` means true;
integers are decimal and 64-bit. Syntax errors exit 2; values that parse but are not allowed
raise `FlagError`, which the entry point reports and exits 1 on.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from noctaya.core.model_source import is_oci_registry
from noctaya.core.plan.gateway import GatewayDefaults, validate_gateway_replicas
from noctaya.k8s.gateway_flags import add_gateway_default_flags, gateway_defaults
from noctaya.k8s.runtime.health import parse_probe_address
from noctaya.k8s.runtime.manager import DEFAULT_WORKERS

# The gateway runs from the main image, the release this operator belongs to (images/build.sh
# tags it with the same package version).
DEFAULT_GATEWAY_IMAGE = f"ghcr.io/noctaya/noctaya:{version('noctaya-k8s')}"
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_INT64 = 2**63
LOG_LEVELS = ("debug", "info", "error", "panic")


class FlagError(ValueError):
    """A flag value that parses but is not allowed; the message names the rule it breaks."""


def go_bool(text: str) -> bool:
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f'invalid boolean value "{text}"')


def go_int(text: str) -> int:
    """An integer flag: decimal, signed 64-bit; range rules beyond that belong to validation."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f'invalid integer value "{text}"') from None
    if not -_INT64 <= value < _INT64:
        raise argparse.ArgumentTypeError(f'invalid value "{text}": value out of range')
    return value


def log_level(text: str) -> str:
    """The log level flag: a name, or a positive integer for increasingly verbose debug output."""
    if text in LOG_LEVELS or (text.isdigit() and int(text) > 0):
        return text
    raise argparse.ArgumentTypeError(
        f'invalid log level "{text}": want one of {", ".join(LOG_LEVELS)} or an integer > 0'
    )


@dataclass(frozen=True)
class OperatorFlags:
    version: bool
    metrics_bind_address: str
    health_probe_bind_address: str
    leader_elect: bool
    metrics_secure: bool
    metrics_cert_path: str
    metrics_cert_name: str
    metrics_cert_key: str
    enable_http2: bool
    gateway_image: str
    gateway_replicas: int
    fetch_image: str
    plain_http_registries: tuple[str, ...]
    max_concurrent_reconciles: int
    kubeconfig: str | None
    zap_devel: bool
    log_format: str | None  # "json" or "console"; None: the mode's default
    log_level: str | None  # None: the mode's default
    gateway_cpu_request: str = ""
    gateway_memory_request: str = ""
    gateway_cpu_limit: str = ""
    gateway_memory_limit: str = ""
    gateway_max_request_body: str = ""
    gateway_request_body_timeout: str = ""
    gateway_client_send_timeout: str = ""
    gateway_backend_read_timeout: str = ""
    gateway_backend_head_timeout: str = ""
    gateway_node_selector: str = ""
    gateway_tolerations: str = ""

    @property
    def metrics_enabled(self) -> bool:
        return parse_probe_address(self.metrics_bind_address, "metrics bind") is not None

    def gateway_defaults(self) -> GatewayDefaults:
        """What the `--gateway-*` flags give every gateway; FlagError for a value not allowed."""
        try:
            return gateway_defaults(vars(self))
        except ValueError as error:
            raise FlagError(str(error)) from error


@dataclass(frozen=True)
class _Flag:
    """One flag as `argparse.ArgumentParser.add_argument` takes it: its names, then the rest."""

    names: tuple[str, ...]
    options: Mapping[str, Any]


def _flag(*names: str, **options: Any) -> _Flag:
    return _Flag(names, options)


def _bool_flag(name: str, default: bool, help: str) -> _Flag:
    """A boolean that takes an optional `=value` (`go_bool`); bare, it means true."""
    return _flag(
        name, type=go_bool, nargs="?", const=True, default=default, metavar="BOOL", help=help
    )


_MANAGER_FLAGS = (
    _flag("--version", action="store_true", help="print the version and exit"),
    _flag(
        "--metrics-bind-address",
        default="0",
        metavar="ADDR",
        help='address the metrics endpoint binds to, like ":8443" or ":8080"; "0" disables it',
    ),
    _flag(
        "--health-probe-bind-address",
        default=":8081",
        metavar="ADDR",
        help="address the /healthz and /readyz endpoints bind to",
    ),
    _bool_flag(
        "--leader-elect",
        False,
        "elect a leader through a Lease so that only one replica reconciles at a time",
    ),
    _bool_flag(
        "--metrics-secure",
        True,
        "serve metrics over HTTPS and only to callers the API server authenticates and allows",
    ),
    _flag(
        "--metrics-cert-path",
        default="",
        metavar="DIR",
        help="directory holding the metrics server certificate, re-read when it changes; "
        "empty: a self-signed one is generated at start-up",
    ),
    _flag("--metrics-cert-name", default="tls.crt", help="certificate file in --metrics-cert-path"),
    _flag("--metrics-cert-key", default="tls.key", help="key file in --metrics-cert-path"),
    _bool_flag(
        "--enable-http2",
        False,
        "allow HTTP/2 on the metrics server (off: HTTP/1.1 only, against HTTP/2 stream attacks)",
    ),
    _flag("--gateway-image", default=DEFAULT_GATEWAY_IMAGE, help="image of the rendered gateways"),
    _flag(
        "--fetch-image",
        default="",
        help="image of the rendered prewarm and OCI staging Jobs, which run noctaya-fetch; "
        "empty: the --gateway-image",
    ),
    _flag(
        "--plain-http-registry",
        dest="plain_http_registries",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="an OCI registry the staging Jobs reach over plain HTTP, such as one served inside "
        "the cluster without TLS (repeat for several); every other registry needs HTTPS",
    ),
    _flag(
        "--gateway-replicas",
        type=go_int,
        default=1,
        metavar="N",
        help="gateway replicas per LLMService; more than one adds a PDB and a demand aggregator",
    ),
    _flag(
        "--max-concurrent-reconciles",
        type=go_int,
        default=DEFAULT_WORKERS,
        metavar="N",
        help="LLMServices reconciled at once; each reconcile mostly waits on the API server",
    ),
)
"""The manager's own flags: endpoints, leader election, images, concurrency."""

_CLIENT_AND_LOG_FLAGS = (
    _flag(
        "--kubeconfig",
        default=None,
        help="kubeconfig file (default: $KUBECONFIG, then in-cluster, then ~/.kube/config)",
    ),
    _bool_flag(
        "--zap-devel",
        False,
        "development logging: human-readable text from debug level; false: JSON lines from "
        "info, what a log pipeline reads",
    ),
    _flag(
        "--zap-encoder",
        "--log-format",
        dest="log_format",
        choices=("json", "console", "text"),
        default=None,
        help="log encoding (text is console): overrides the --zap-devel default",
    ),
    _flag(
        "--zap-log-level",
        "--log-level",
        dest="log_level",
        type=log_level,
        default=None,
        help="debug, info, error, panic, or an integer > 0 for more verbose debug output",
    ),
)
"""How the operator reaches the API server, and how it logs."""


def build_parser() -> argparse.ArgumentParser:
    """The manager's flags, the `--gateway-*` defaults (shared with `noctaya render`), then
    the client and logging flags, in the order `--help` and the flags page list them."""
    parser = argparse.ArgumentParser(
        prog="noctaya-operator",
        description="The Noctaya operator: reconciles LLMServices into their serving stack.",
        allow_abbrev=False,
    )
    _add_flags(parser, _MANAGER_FLAGS)
    add_gateway_default_flags(parser)
    _add_flags(parser, _CLIENT_AND_LOG_FLAGS)
    return parser


def _add_flags(parser: argparse.ArgumentParser, flags: Sequence[_Flag]) -> None:
    for flag in flags:
        parser.add_argument(*flag.names, **flag.options)


def parse_flags(argv: Sequence[str] | None = None) -> OperatorFlags:
    """Parse the command line; a syntax error exits 2 (argparse's usage error)."""
    args = build_parser().parse_args(argv)
    log_format = "console" if args.log_format == "text" else args.log_format
    fetch_image = args.fetch_image or args.gateway_image
    return OperatorFlags(
        **{
            **vars(args),
            "log_format": log_format,
            "fetch_image": fetch_image,
            "plain_http_registries": tuple(args.plain_http_registries),
        }
    )


def validate(flags: OperatorFlags) -> None:
    """Raise FlagError for the first value the operator must not start with."""
    try:
        validate_gateway_replicas(flags.gateway_replicas)
        parse_probe_address(flags.health_probe_bind_address, "health probe")
        parse_probe_address(flags.metrics_bind_address, "metrics bind")
    except ValueError as error:
        raise FlagError(str(error)) from error
    if flags.max_concurrent_reconciles < 1:
        raise FlagError(
            f"max concurrent reconciles must be at least 1, got {flags.max_concurrent_reconciles}"
        )
    if not flags.gateway_image.strip():
        raise FlagError("gateway image must not be empty")
    if not flags.fetch_image.strip():
        raise FlagError("fetch image must not be empty")
    flags.gateway_defaults()
    for registry in flags.plain_http_registries:
        if not is_oci_registry(registry):
            raise FlagError(
                f"plain HTTP registry {registry!r}: expected a registry host, optionally with "
                ":port, as it appears in oci:// model URIs"
            )
