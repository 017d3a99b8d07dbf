"""How a failed reconcile shows: the error it raises and the conditions it writes."""

from __future__ import annotations

import pytest
from noctaya.core.errors import NoctayaError
from noctaya.k8s.reconciler import LLMServiceReconciler

Conditions = dict[str, tuple[str, str, str]]


def reconcile_failure(reconciler: LLMServiceReconciler, namespace: str, name: str) -> NoctayaError:
    """Reconcile a service that must fail, and return what it failed with."""
    with pytest.raises(NoctayaError) as failure:
        reconciler.reconcile((namespace, name))
    return failure.value


def before_autoscaling(reason: str, message: str) -> Conditions:
    """A failure before the ScaledObject was applied: AutoscalingReady False too."""
    return {
        "AutoscalingReady": ("False", reason, message),
        "Ready": ("False", reason, message),
        "Degraded": ("True", reason, message),
    }


def after_autoscaling(reason: str, message: str) -> Conditions:
    """A failure after the ScaledObject was applied keeps AutoscalingReady True."""
    return {
        "AutoscalingReady": (
            "True",
            "ScaledObjectApplied",
            "KEDA External Push autoscaling is configured",
        ),
        "Ready": ("False", reason, message),
        "Degraded": ("True", reason, message),
    }
