"""The one place that builds Noctaya's labels: selectors must never drift."""

from __future__ import annotations

from typing import Final

from noctaya.core.plan.identity import ServiceIdentity

MANAGED_BY: Final = "app.kubernetes.io/managed-by"
NAME: Final = "app.kubernetes.io/name"
LLMSERVICE: Final = "serving.noctaya.io/llmservice"
RUNTIME: Final = "serving.noctaya.io/runtime"
GATEWAY: Final = "serving.noctaya.io/gateway"
SCALER: Final = "serving.noctaya.io/scaler"
MANAGER: Final = "noctaya"
VOLCANO_QUEUE: Final = "scheduling.volcano.sh/queue-name"


def selector_labels(svc: ServiceIdentity) -> dict[str, str]:
    return {NAME: svc.name, MANAGED_BY: MANAGER, LLMSERVICE: svc.name}


def backend_pod_labels(svc: ServiceIdentity, runtime: str) -> dict[str, str]:
    return {**selector_labels(svc), RUNTIME: runtime}


def gateway_selector_labels(svc: ServiceIdentity) -> dict[str, str]:
    """Gateway pods carry no llmservice label, so the backend Pod watch never sees them."""
    return {NAME: svc.gateway, MANAGED_BY: MANAGER, GATEWAY: svc.name}


def gateway_service_labels(svc: ServiceIdentity) -> dict[str, str]:
    return {**gateway_selector_labels(svc), LLMSERVICE: svc.name}


def scaler_selector_labels(svc: ServiceIdentity) -> dict[str, str]:
    return {NAME: svc.scaler, MANAGED_BY: MANAGER, SCALER: svc.name}


def gateway_pod_selector(svc: ServiceIdentity) -> str:
    """The label selector listing a service's gateway pods."""
    return f"{MANAGED_BY}={MANAGER},{GATEWAY}={svc.name}"


def backend_pod_selector(svc: ServiceIdentity, runtime: str) -> str:
    """The label selector listing a service's backend pods (gateway and prewarm pods excluded)."""
    return f"{MANAGED_BY}={MANAGER},{LLMSERVICE}={svc.name},{RUNTIME}={runtime}"
