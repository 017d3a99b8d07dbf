"""The gateway env contract: several replicas report demand under a per-replica identity."""

from __future__ import annotations

import dataclasses

import pytest
from noctaya.core.api import GatewayResources, parse_llmservice
from noctaya.core.plan.gateway import GatewayDefaults, GatewayPlan, RequestLimits, plan_gateway
from noctaya.core.plan.gateway_env import (
    DemandReporting,
    FromReplica,
    GatewayPlacement,
    ScalerTLSFiles,
    gateway_env,
)
from noctaya.core.values import Duration

TLS = ScalerTLSFiles("/tls/crt", "/tls/key", "/tls/ca")
LIMIT_NAMES = {
    "NOCTAYA_MAX_REQUEST_BODY",
    "NOCTAYA_REQUEST_BODY_TIMEOUT",
    "NOCTAYA_CLIENT_SEND_TIMEOUT",
    "NOCTAYA_BACKEND_READ_TIMEOUT",
    "NOCTAYA_BACKEND_HEAD_TIMEOUT",
}


def _plan(replicas: int) -> GatewayPlan:
    return GatewayPlan(
        image="gateway",
        replicas=replicas,
        max_queue=5,
        activation_timeout=Duration.parse("0s"),
        cold_start_mode="",
        heartbeat_interval=Duration.parse("0s"),
        api_key=None,
        scaler_tls_secret="tls",
        resources=None,
        image_pull_secrets=(),
    )


def _placement(reporting: DemandReporting | None) -> GatewayPlacement:
    return GatewayPlacement("http://backend", ":8080", ":9090", "/key", TLS, reporting)


def test_several_replicas_report_demand_with_their_own_identity_and_no_scaler_tls() -> None:
    placement = _placement(DemandReporting("http://aggregator/v1/demand", "/demand/token"))
    assert gateway_env(_plan(2), placement) == [
        ("NOCTAYA_BACKEND_URL", "http://backend"),
        ("NOCTAYA_LISTEN_ADDR", ":8080"),
        ("NOCTAYA_MAX_QUEUE", "5"),
        ("NOCTAYA_DEMAND_AGGREGATOR_URL", "http://aggregator/v1/demand"),
        ("NOCTAYA_GATEWAY_ID", FromReplica.IDENTITY),
        ("NOCTAYA_CLIENT_API_KEY_FILE", "/key"),
        ("NOCTAYA_DEMAND_AUTH_TOKEN_FILE", "/demand/token"),
    ]


def test_a_lone_gateway_serves_the_scaler_with_its_tls_files() -> None:
    placement = _placement(DemandReporting("http://aggregator/v1/demand", "/demand/token"))
    assert gateway_env(_plan(1), placement) == [
        ("NOCTAYA_BACKEND_URL", "http://backend"),
        ("NOCTAYA_LISTEN_ADDR", ":8080"),
        ("NOCTAYA_MAX_QUEUE", "5"),
        ("NOCTAYA_SCALER_LISTEN_ADDR", ":9090"),
        ("NOCTAYA_CLIENT_API_KEY_FILE", "/key"),
        ("NOCTAYA_SCALER_TLS_CERT_FILE", "/tls/crt"),
        ("NOCTAYA_SCALER_TLS_KEY_FILE", "/tls/key"),
        ("NOCTAYA_SCALER_TLS_CLIENT_CA_FILE", "/tls/ca"),
    ]


def test_several_replicas_without_an_aggregator_to_report_to_are_refused() -> None:
    with pytest.raises(ValueError, match="demand aggregator"):
        gateway_env(_plan(3), _placement(None))


def test_the_platforms_request_limits_follow_the_cold_start_settings_when_set() -> None:
    limits = RequestLimits(
        max_request_body=1024,
        client_send_timeout=Duration.parse("2m"),
        backend_head_timeout=Duration.parse("45s"),
    )
    plan = dataclasses.replace(_plan(1), limits=limits)
    env = dict(gateway_env(plan, _placement(None)))
    assert {k: v for k, v in env.items() if k in LIMIT_NAMES} == {
        "NOCTAYA_MAX_REQUEST_BODY": "1024",
        "NOCTAYA_CLIENT_SEND_TIMEOUT": "2m0s",
        "NOCTAYA_BACKEND_HEAD_TIMEOUT": "45s",
    }
    assert not LIMIT_NAMES & dict(gateway_env(_plan(1), _placement(None))).keys()


def test_a_services_own_gateway_resources_win_over_the_platforms_default() -> None:
    spec = parse_llmservice(
        {"model": {"source": {"uri": "hf://org/m"}}, "runtime": {"name": "r"}}
    ).spec
    platform = GatewayResources.model_validate({"requests": {"cpu": "50m"}})
    own = GatewayResources.model_validate({"limits": {"memory": "1Gi"}})
    defaults = GatewayDefaults(resources=platform)
    assert plan_gateway(spec, "gw", 1, None, defaults).resources == platform
    spec.endpoint.resources = own
    assert plan_gateway(spec, "gw", 1, None, defaults).resources == own
