"""The KEDA External Push autoscaling decision, planned and applied first of all.

Without its ScaledObject KEDA would never scale the backend up, so a service whose ScaledObject
is invalid or cannot be applied gets no other object.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from noctaya.core.api import LLMServiceSpec
from noctaya.core.errors import NoctayaError
from noctaya.core.values import Duration

REASON = "ScaledObject"
METRIC_NAME = "pending"
POLLING_INTERVAL_SECONDS = 5
_MAX_STABILIZATION = Duration.parse("1h")
_AUTH_KINDS = ("", "TriggerAuthentication", "ClusterTriggerAuthentication")


@dataclass(frozen=True, slots=True)
class AuthenticationPlan:
    name: str
    kind: str


@dataclass(frozen=True, slots=True)
class AutoscalingPlan:
    min_replicas: int
    max_replicas: int
    target: int
    """Per replica: requests for queueDepth, percent of KV cache for kvCacheUtil; either way
    the trigger's targetValue, which the scaler's summed metric is divided by."""
    cooldown_seconds: int
    """KEDA cooldown and HPA scale-down stabilization window alike."""
    authentication: AuthenticationPlan | None
    scaler_tls_secret: str | None


def plan_autoscaling(spec: LLMServiceSpec) -> AutoscalingPlan:
    scaling = spec.scaling
    window = scaling.scale_down_stabilization
    if not (window.is_whole_seconds() and Duration(0) <= window <= _MAX_STABILIZATION):
        raise NoctayaError(
            REASON, "scaling.scaleDownStabilization must be a whole number of seconds from 0s to 1h"
        )
    authentication, tls_secret = None, None
    tls = scaling.external_scaler.tls if scaling.external_scaler else None
    if tls is not None:
        if not tls.server_secret_name:
            raise NoctayaError(REASON, "scaling.externalScaler.tls.serverSecretName is required")
        ref = tls.authentication_ref
        if ref is None or not ref.name:
            raise NoctayaError(
                REASON, "scaling.externalScaler.tls.authenticationRef.name is required"
            )
        kind = ref.kind.value if ref.kind else ""
        if kind not in _AUTH_KINDS:
            raise NoctayaError(
                REASON,
                f"scaling.externalScaler.tls.authenticationRef.kind {json.dumps(kind)} is invalid",
            )
        authentication, tls_secret = AuthenticationPlan(ref.name, kind), tls.server_secret_name
    return AutoscalingPlan(
        min_replicas=scaling.min,
        max_replicas=scaling.max if scaling.max > 0 else 1,
        target=scaling.target if scaling.target > 0 else 10,
        cooldown_seconds=window.nanoseconds // 1_000_000_000,
        authentication=authentication,
        scaler_tls_secret=tls_secret,
    )
