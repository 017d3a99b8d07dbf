"""The gateway's and aggregator's configuration contract: NOCTAYA_* env and mounted files.

The gateway reads exactly these names (see `noctaya.gateway.config`); keeping them in one
module means the operator and the gateway can only disagree in one place.
"""

from __future__ import annotations

from noctaya.core.plan.gateway import GatewayPlan
from noctaya.core.plan.identity import ServiceIdentity
from noctaya.k8s.render.objects import Obj, env, mount, secret_volume

HTTP_PORT = 8080
GRPC_PORT = 9090
AGGREGATOR_PORT = 9091
CLIENT_AUTH_DIR = "/var/run/noctaya/client-auth"
SCALER_TLS_DIR = "/var/run/noctaya/scaler-tls"
DEMAND_AUTH_DIR = "/var/run/noctaya/demand-auth"
_SECRET_MODE = 0o440


def scaler_tls_env() -> list[Obj]:
    return [
        env("NOCTAYA_SCALER_TLS_CERT_FILE", f"{SCALER_TLS_DIR}/tls.crt"),
        env("NOCTAYA_SCALER_TLS_KEY_FILE", f"{SCALER_TLS_DIR}/tls.key"),
        env("NOCTAYA_SCALER_TLS_CLIENT_CA_FILE", f"{SCALER_TLS_DIR}/ca.crt"),
    ]


def demand_token_env() -> Obj:
    return env("NOCTAYA_DEMAND_AUTH_TOKEN_FILE", f"{DEMAND_AUTH_DIR}/token")


def gateway_env(svc: ServiceIdentity, plan: GatewayPlan) -> list[Obj]:
    result = [
        env("NOCTAYA_BACKEND_URL", svc.backend_url),
        env("NOCTAYA_LISTEN_ADDR", f":{HTTP_PORT}"),
        env("NOCTAYA_MAX_QUEUE", str(plan.max_queue)),
    ]
    if plan.aggregated:
        result.append(env("NOCTAYA_DEMAND_AGGREGATOR_URL", svc.aggregator_url))
        result.append(
            {
                "name": "NOCTAYA_GATEWAY_ID",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.uid"}},
            }
        )
    else:
        result.append(env("NOCTAYA_SCALER_LISTEN_ADDR", f":{GRPC_PORT}"))
    if plan.activation_timeout.nanoseconds > 0:
        result.append(env("NOCTAYA_ACTIVATION_TIMEOUT", str(plan.activation_timeout)))
    if plan.cold_start_mode:
        result.append(env("NOCTAYA_COLDSTART_MODE", plan.cold_start_mode))
        if plan.heartbeat_interval.nanoseconds > 0:
            result.append(env("NOCTAYA_HEARTBEAT_INTERVAL", str(plan.heartbeat_interval)))
    if plan.api_key is not None:
        result.append(env("NOCTAYA_CLIENT_API_KEY_FILE", f"{CLIENT_AUTH_DIR}/api-key"))
    if plan.aggregated:
        result.append(demand_token_env())
    elif plan.scaler_tls_secret:
        result.extend(scaler_tls_env())
    return result


def aggregator_env(plan: GatewayPlan) -> list[Obj]:
    result = [
        env("NOCTAYA_AGGREGATOR_LISTEN_ADDR", f":{AGGREGATOR_PORT}"),
        env("NOCTAYA_SCALER_LISTEN_ADDR", f":{GRPC_PORT}"),
        env("NOCTAYA_MAX_GATEWAY_MEMBERS", str(plan.max_members)),
        env("NOCTAYA_MAX_GATEWAY_DEMAND", str(plan.max_queue)),
        demand_token_env(),
    ]
    if plan.scaler_tls_secret:
        result.extend(scaler_tls_env())
    return result


def client_auth_volume(plan: GatewayPlan) -> tuple[list[Obj], list[Obj]]:
    if plan.api_key is None:
        return [], []
    items = [{"key": plan.api_key.key, "path": "api-key"}]
    volume = secret_volume("client-auth", plan.api_key.secret_name, _SECRET_MODE, items)
    return [volume], [mount("client-auth", CLIENT_AUTH_DIR, read_only=True)]


def scaler_tls_volume(plan: GatewayPlan) -> tuple[list[Obj], list[Obj]]:
    if not plan.scaler_tls_secret:
        return [], []
    volume = secret_volume("external-scaler-tls", plan.scaler_tls_secret, _SECRET_MODE)
    return [volume], [mount("external-scaler-tls", SCALER_TLS_DIR, read_only=True)]


def demand_auth_volume(svc: ServiceIdentity) -> tuple[list[Obj], list[Obj]]:
    volume = secret_volume("demand-auth", svc.demand_secret, _SECRET_MODE)
    return [volume], [mount("demand-auth", DEMAND_AUTH_DIR, read_only=True)]
