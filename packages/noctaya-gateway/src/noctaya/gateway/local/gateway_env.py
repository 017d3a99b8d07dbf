"""The gateway's environment in local mode: the names and value forms the operator renders.

The gateway reads only `NOCTAYA_*` env (reference §2.1, `noctaya.gateway.config`), so local
mode configures it exactly as the operator's single-gateway Deployment does (§1.6.3), with
loopback addresses in place of cluster Services. The gateway package may not import the
operator's renderer, so the names are repeated here; the test suite checks both renderers
against the gateway's own config loader.
"""

from __future__ import annotations

from noctaya.gateway.local.plan import LocalPlan

SCALER_LISTEN_ADDR = "127.0.0.1:0"
"""Only local mode's autoscaler dials the scaler; the gateway logs the port it bound."""


def gateway_env(plan: LocalPlan, listen_addr: str) -> dict[str, str]:
    """In the operator's order: backend, listen, queue, scaler, timeout, cold start, auth."""
    gateway = plan.gateway
    env = {
        "NOCTAYA_BACKEND_URL": plan.backend_url,
        "NOCTAYA_LISTEN_ADDR": listen_addr,
        "NOCTAYA_MAX_QUEUE": str(gateway.max_queue),
        "NOCTAYA_SCALER_LISTEN_ADDR": SCALER_LISTEN_ADDR,
    }
    if gateway.activation_timeout.nanoseconds > 0:
        env["NOCTAYA_ACTIVATION_TIMEOUT"] = str(gateway.activation_timeout)
    if gateway.cold_start_mode:
        env["NOCTAYA_COLDSTART_MODE"] = gateway.cold_start_mode
        if gateway.heartbeat_interval.nanoseconds > 0:
            env["NOCTAYA_HEARTBEAT_INTERVAL"] = str(gateway.heartbeat_interval)
    if plan.api_key_file is not None:
        env["NOCTAYA_CLIENT_API_KEY_FILE"] = plan.api_key_file
    return env
