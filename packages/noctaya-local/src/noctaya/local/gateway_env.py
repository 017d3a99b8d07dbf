"""The gateway's environment in local mode: the operator's contract with loopback addresses.

The gateway reads only `NOCTAYA_*` env, so local mode configures it from the same core contract
the operator renders a single-gateway Deployment from; only the addresses, the API key file and
the readiness path are local (no Service gates the engine on its readiness probe here, so the
gateway asks the probe's path itself).
"""

from __future__ import annotations

from noctaya.core.plan import gateway_env as contract
from noctaya.local.plan import LocalPlan

SCALER_LISTEN_ADDR = "127.0.0.1:0"
"""Only local mode's autoscaler dials the scaler; the gateway logs the port it bound."""


def gateway_env(plan: LocalPlan, listen_addr: str) -> dict[str, str]:
    placement = contract.GatewayPlacement(
        backend_url=plan.backend_url,
        listen_addr=listen_addr,
        scaler_listen_addr=SCALER_LISTEN_ADDR,
        api_key_file=plan.api_key_file,
        readiness_path=plan.engine.readiness_path,
    )
    env: dict[str, str] = {}
    for name, value in contract.gateway_env(plan.gateway, placement):
        if not isinstance(value, str):  # only several replicas need one; local mode runs one
            raise ValueError(f"local mode cannot supply {name}")
        env[name] = value
    return env
