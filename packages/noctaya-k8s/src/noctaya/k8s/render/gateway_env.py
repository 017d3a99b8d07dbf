"""The gateway's and aggregator's configuration in a pod: NOCTAYA_* env and mounted files.

The names and their order are the core's contract (`noctaya.core.plan.gateway_env`), which the
gateway reads and local mode renders too; this module adds the cluster's addresses and mounts.
"""

from __future__ import annotations

from noctaya.core.plan import gateway_env as contract
from noctaya.core.plan.gateway import GatewayPlan
from noctaya.core.plan.identity import AGGREGATOR_PORT, GRPC_PORT, ServiceIdentity
from noctaya.k8s.render.endpoint_access import CA_FILE, TOKEN_FILE
from noctaya.k8s.render.objects import Obj, env, mount, secret_volume

HTTP_PORT = 8080
CLIENT_AUTH_DIR = "/var/run/noctaya/client-auth"
SCALER_TLS_DIR = "/var/run/noctaya/scaler-tls"
DEMAND_AUTH_DIR = "/var/run/noctaya/demand-auth"
DEMAND_TOKEN_FILE = f"{DEMAND_AUTH_DIR}/token"
SCALER_TLS_FILES = contract.ScalerTLSFiles(
    cert_file=f"{SCALER_TLS_DIR}/tls.crt",
    key_file=f"{SCALER_TLS_DIR}/tls.key",
    client_ca_file=f"{SCALER_TLS_DIR}/ca.crt",
)
_SECRET_MODE = 0o440
_POD_FIELDS = {contract.FromReplica.IDENTITY: "metadata.uid"}


def _env_var(entry: contract.EnvEntry) -> Obj:
    name, value = entry
    if isinstance(value, str):
        return env(name, value)
    field = {"apiVersion": "v1", "fieldPath": _POD_FIELDS[value]}
    return {"name": name, "valueFrom": {"fieldRef": field}}


def backend_endpoints(svc: ServiceIdentity) -> str:
    return f"{svc.namespace}/{svc.backend_service}"


def gateway_env(svc: ServiceIdentity, plan: GatewayPlan, endpoint_access: bool) -> list[Obj]:
    """`endpoint_access`: the pod runs as the service's endpoint reader, so the gateway follows
    the backend's EndpointSlices instead of knowing only its Service's address."""
    placement = contract.GatewayPlacement(
        backend_url=svc.backend_url,
        readiness_path=plan.readiness_path,
        listen_addr=f":{HTTP_PORT}",
        scaler_listen_addr=f":{GRPC_PORT}",
        api_key_file=f"{CLIENT_AUTH_DIR}/api-key" if plan.api_key is not None else None,
        scaler_tls=SCALER_TLS_FILES if plan.scaler_tls_secret else None,
        reporting=contract.DemandReporting(svc.aggregator_url, DEMAND_TOKEN_FILE),
        endpoints=backend_endpoints(svc) if endpoint_access else None,
        kubernetes_token_file=TOKEN_FILE if endpoint_access else None,
        kubernetes_ca_file=CA_FILE if endpoint_access else None,
    )
    return [_env_var(entry) for entry in contract.gateway_env(plan, placement)]


def aggregator_env(svc: ServiceIdentity, plan: GatewayPlan, endpoint_access: bool) -> list[Obj]:
    """With KV-cache scaling and `endpoint_access`, the aggregator reads each ready backend pod's
    gauge; otherwise it reports the demand the gateways send it."""
    entries: list[contract.EnvEntry] = [
        (contract.AGGREGATOR_LISTEN_ADDR, f":{AGGREGATOR_PORT}"),
        (contract.SCALER_LISTEN_ADDR, f":{GRPC_PORT}"),
        (contract.MAX_GATEWAY_MEMBERS, str(plan.max_members)),
        (contract.MAX_GATEWAY_DEMAND, str(plan.max_queue)),
        (contract.DEMAND_AUTH_TOKEN_FILE, DEMAND_TOKEN_FILE),
    ]
    if plan.scaler_tls_secret:
        entries.extend(contract.scaler_tls_env(SCALER_TLS_FILES))
    if plan.kv_cache is not None and endpoint_access:
        entries += contract.endpoints_env(backend_endpoints(svc), TOKEN_FILE, CA_FILE)
        entries += contract.kv_cache_env(plan.kv_cache)
    return [_env_var(entry) for entry in entries]


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
