"""The gateway env contract: several replicas report demand under a per-replica identity."""

from __future__ import annotations

import pytest
from noctaya.core.plan.gateway import GatewayPlan
from noctaya.core.plan.gateway_env import (
    DemandReporting,
    FromReplica,
    GatewayPlacement,
    ScalerTLSFiles,
    gateway_env,
)
from noctaya.core.values import Duration

TLS = ScalerTLSFiles("/tls/crt", "/tls/key", "/tls/ca")


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
