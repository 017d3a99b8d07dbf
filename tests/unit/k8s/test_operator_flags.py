"""The operator's flags read as Go's `flag` package reads them; bad values are refused by name."""

from __future__ import annotations

import pytest
from noctaya.core.plan.container import Scheduling
from noctaya.core.plan.gateway import RequestLimits
from noctaya.k8s.operator.flags import (
    DEFAULT_GATEWAY_IMAGE,
    FlagError,
    OperatorFlags,
    parse_flags,
    validate,
)


def _usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        parse_flags(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err


def _refused(argv: list[str]) -> str:
    with pytest.raises(FlagError) as refused:
        validate(parse_flags(argv))
    return str(refused.value)


def test_defaults_are_the_documented_defaults() -> None:
    flags = parse_flags([])
    assert flags == OperatorFlags(
        version=False,
        metrics_bind_address="0",
        health_probe_bind_address=":8081",
        leader_elect=False,
        metrics_secure=True,
        metrics_cert_path="",
        metrics_cert_name="tls.crt",
        metrics_cert_key="tls.key",
        enable_http2=False,
        gateway_image=DEFAULT_GATEWAY_IMAGE,
        gateway_replicas=1,
        fetch_image=DEFAULT_GATEWAY_IMAGE,
        plain_http_registries=(),
        max_concurrent_reconciles=8,
        kubeconfig=None,
        zap_devel=False,
        log_format=None,
        log_level=None,
    )
    assert DEFAULT_GATEWAY_IMAGE == "ghcr.io/noctaya/noctaya:0.1.0"
    assert not flags.metrics_enabled
    validate(flags)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--leader-elect=true"], True),
        (["--leader-elect"], True),
        (["--leader-elect=1"], True),
        (["--leader-elect=T"], True),
        (["--leader-elect=false"], False),
        (["--leader-elect=False"], False),
        (["--leader-elect=0"], False),
        ([], False),
    ],
)
def test_leader_elect_takes_go_boolean_spellings(argv: list[str], expected: bool) -> None:
    assert parse_flags(argv).leader_elect is expected


def test_a_bare_boolean_flag_does_not_swallow_the_next_flag() -> None:
    flags = parse_flags(["--leader-elect", "--metrics-secure=false", "--gateway-replicas", "3"])
    assert flags.leader_elect is True
    assert flags.metrics_secure is False
    assert flags.gateway_replicas == 3


def test_a_boolean_that_go_would_not_parse_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _usage_error(["--leader-elect=yes"], capsys)
    assert 'invalid boolean value "yes"' in err
    assert "--leader-elect" in err


def test_the_manifest_args_of_the_packaging_parse_to_the_packaging_defaults() -> None:
    flags = parse_flags(
        [
            "--leader-elect=true",
            "--health-probe-bind-address=:8081",
            "--metrics-bind-address=0",
            "--gateway-image=registry.example/gw:1.2",
            "--gateway-replicas=2",
        ]
    )
    validate(flags)
    assert (flags.leader_elect, flags.health_probe_bind_address) == (True, ":8081")
    assert (flags.gateway_image, flags.gateway_replicas) == ("registry.example/gw:1.2", 2)
    assert not flags.metrics_enabled


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "gateway replicas must be at least 1"),
        ("-3", "gateway replicas must be at least 1"),
        ("2147483648", "gateway replicas must fit in a Kubernetes int32 field"),
    ],
)
def test_gateway_replicas_out_of_range_are_refused_naming_the_bound(
    value: str, message: str
) -> None:
    assert _refused([f"--gateway-replicas={value}"]) == message


def test_the_largest_int32_is_a_valid_gateway_replica_count() -> None:
    validate(parse_flags(["--gateway-replicas=2147483647"]))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("two", 'invalid integer value "two"'),
        ("9223372036854775808", "value out of range"),
    ],
)
def test_gateway_replicas_that_are_not_a_go_int_are_usage_errors(
    value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _usage_error([f"--gateway-replicas={value}"], capsys)
    assert message in err
    assert "--gateway-replicas" in err


def test_max_concurrent_reconciles_sets_the_workers() -> None:
    assert parse_flags(["--max-concurrent-reconciles=8"]).max_concurrent_reconciles == 8


@pytest.mark.parametrize("value", ["0", "-2"])
def test_max_concurrent_reconciles_below_one_are_refused_by_name(value: str) -> None:
    assert _refused([f"--max-concurrent-reconciles={value}"]) == (
        f"max concurrent reconciles must be at least 1, got {value}"
    )


def test_max_concurrent_reconciles_that_are_not_a_go_int_are_usage_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _usage_error(["--max-concurrent-reconciles=many"], capsys)
    assert 'invalid integer value "many"' in err
    assert "--max-concurrent-reconciles" in err


def test_an_empty_gateway_image_is_refused() -> None:
    assert _refused(["--gateway-image= "]) == "gateway image must not be empty"


def test_the_fetch_image_follows_the_gateway_image_unless_named() -> None:
    """The main image carries noctaya-fetch, so by default the Jobs run the gateway's image."""
    assert parse_flags(["--gateway-image=registry.example/n:1"]).fetch_image == (
        "registry.example/n:1"
    )
    flags = parse_flags(["--gateway-image=registry.example/n:1", "--fetch-image=mirror/f:1"])
    assert (flags.gateway_image, flags.fetch_image) == ("registry.example/n:1", "mirror/f:1")


def test_a_blank_fetch_image_is_refused() -> None:
    assert _refused(["--fetch-image= "]) == "fetch image must not be empty"


def test_plain_http_registries_are_repeated_and_must_be_registry_hosts() -> None:
    argv = ["--plain-http-registry=registry.ai.svc:5000", "--plain-http-registry=10.0.0.7"]
    assert parse_flags(argv).plain_http_registries == ("registry.ai.svc:5000", "10.0.0.7")
    assert _refused(["--plain-http-registry=http://registry:5000"]) == (
        "plain HTTP registry 'http://registry:5000': expected a registry host, optionally "
        "with :port, as it appears in oci:// model URIs"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--health-probe-bind-address=8081"], 'invalid health probe address "8081"'),
        (
            ["--metrics-bind-address=::1:8443", "--metrics-secure=false"],
            'invalid metrics bind address "::1:8443": IPv6 hosts need brackets',
        ),
    ],
)
def test_malformed_listen_addresses_are_refused_naming_which_address(
    argv: list[str], message: str
) -> None:
    assert _refused(argv).startswith(message)


def test_secure_metrics_without_a_certificate_are_accepted_a_certificate_is_generated() -> None:
    flags = parse_flags(["--metrics-bind-address=:8443"])
    validate(flags)
    assert (flags.metrics_enabled, flags.metrics_secure, flags.metrics_cert_path) == (
        True,
        True,
        "",
    )


def test_metrics_are_enabled_by_an_address_and_may_be_plain_http() -> None:
    flags = parse_flags(["--metrics-bind-address=127.0.0.1:8080", "--metrics-secure=false"])
    validate(flags)
    assert flags.metrics_enabled


def test_secure_metrics_with_a_certificate_directory_are_accepted() -> None:
    flags = parse_flags(
        ["--metrics-bind-address=:8443", "--metrics-cert-path=/certs", "--metrics-cert-name=a.pem"]
    )
    validate(flags)
    assert (flags.metrics_cert_path, flags.metrics_cert_name) == ("/certs", "a.pem")


@pytest.mark.parametrize(
    ("argv", "log_format", "log_level"),
    [
        (["--log-format=text"], "console", None),
        (["--zap-encoder=json", "--zap-log-level=info"], "json", "info"),
        (["--log-format=json", "--log-level=3"], "json", "3"),
    ],
)
def test_logging_flags_take_zap_names_and_short_aliases(
    argv: list[str], log_format: str, log_level: str | None
) -> None:
    flags = parse_flags(argv)
    assert (flags.log_format, flags.log_level) == (log_format, log_level)


def test_an_unknown_log_level_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert 'invalid log level "loud"' in _usage_error(["--zap-log-level=loud"], capsys)


def test_flags_are_not_abbreviated(capsys: pytest.CaptureFixture[str]) -> None:
    assert "unrecognized arguments: --leader" in _usage_error(["--leader"], capsys)


def test_gateway_default_flags_become_the_defaults_of_every_gateway() -> None:
    flags = parse_flags(
        [
            "--gateway-cpu-request=50m",
            "--gateway-memory-limit=128Mi",
            "--gateway-max-request-body=1Mi",
            "--gateway-request-body-timeout=30s",
            "--gateway-client-send-timeout=2m",
            "--gateway-backend-read-timeout=20m",
            "--gateway-backend-head-timeout=45s",
            "--gateway-node-selector=pool=gateways,example.com/zone=a",
            '--gateway-tolerations=[{"key": "gw", "operator": "Exists", "tolerationSeconds": 5}]',
        ]
    )
    validate(flags)
    defaults = flags.gateway_defaults()
    assert defaults.resources is not None
    assert defaults.resources.requests is not None
    assert defaults.resources.limits is not None
    assert str(defaults.resources.requests.cpu) == "50m"
    assert str(defaults.resources.limits.memory) == "128Mi"
    assert defaults.resources.requests.memory is None
    limits = defaults.limits
    assert limits.max_request_body == 1024 * 1024
    assert [str(t) for t in (limits.request_body_timeout, limits.client_send_timeout)] == [
        "30s",
        "2m0s",
    ]
    assert [str(t) for t in (limits.backend_read_timeout, limits.backend_head_timeout)] == [
        "20m0s",
        "45s",
    ]
    assert dict(defaults.scheduling.node_selector) == {"pool": "gateways", "example.com/zone": "a"}
    (toleration,) = defaults.scheduling.tolerations
    assert (toleration.key, toleration.operator, toleration.toleration_seconds) == (
        "gw",
        "Exists",
        5,
    )


def test_without_gateway_default_flags_the_gateways_keep_their_own() -> None:
    defaults = parse_flags([]).gateway_defaults()
    assert defaults.resources is None
    assert defaults.limits == RequestLimits()
    assert defaults.scheduling == Scheduling()


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("--gateway-cpu-request=lots", "--gateway-cpu-request: "),
        ("--gateway-memory-limit=-1Gi", "--gateway-memory-limit: must be greater than or"),
        ("--gateway-max-request-body=1.5", "--gateway-max-request-body: must be a positive whole"),
        ("--gateway-max-request-body=0", "--gateway-max-request-body: must be a positive whole"),
        ("--gateway-request-body-timeout=0s", "--gateway-request-body-timeout: must be a positive"),
        (
            "--gateway-backend-read-timeout=-1s",
            "--gateway-backend-read-timeout: must be a positive",
        ),
        ("--gateway-backend-head-timeout=soon", "--gateway-backend-head-timeout: must be a posit"),
        ("--gateway-node-selector=pool", "--gateway-node-selector: pool: want KEY=VALUE"),
        ("--gateway-node-selector=bad key=x", "--gateway-node-selector: bad key=x: Invalid value"),
        ("--gateway-tolerations={", "--gateway-tolerations: not JSON"),
        (
            '--gateway-tolerations=[{"keyy": "gw"}]',
            "--gateway-tolerations: [0].keyy: unknown field",
        ),
    ],
)
def test_a_gateway_default_that_is_not_allowed_is_refused_naming_its_flag(
    flag: str, message: str
) -> None:
    assert _refused([flag]).startswith(message)
