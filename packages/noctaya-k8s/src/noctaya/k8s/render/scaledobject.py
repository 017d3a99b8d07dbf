"""The KEDA ScaledObject: KEDA owns backend replicas through it."""

from __future__ import annotations

from noctaya.core.plan.autoscaling import METRIC_NAME, POLLING_INTERVAL_SECONDS, AutoscalingPlan
from noctaya.core.plan.identity import ServiceIdentity
from noctaya.k8s.render.labels import selector_labels
from noctaya.k8s.render.objects import Obj, new_object

API_VERSION = "keda.sh/v1alpha1"
KIND = "ScaledObject"


def render_scaled_object(svc: ServiceIdentity, plan: AutoscalingPlan) -> Obj:
    trigger: Obj = {
        "type": "external-push",
        "metadata": {
            "scalerAddress": svc.scaler_address,
            "metricName": METRIC_NAME,
            "targetValue": str(plan.target),
        },
    }
    if plan.authentication is not None:
        ref: Obj = {"name": plan.authentication.name}
        if plan.authentication.kind:
            ref["kind"] = plan.authentication.kind
        trigger["authenticationRef"] = ref
    obj = new_object(API_VERSION, KIND, svc.name, svc.namespace, selector_labels(svc))
    obj["spec"] = {
        "scaleTargetRef": {"name": svc.name},
        "minReplicaCount": plan.min_replicas,
        "maxReplicaCount": plan.max_replicas,
        "pollingInterval": POLLING_INTERVAL_SECONDS,
        "cooldownPeriod": plan.cooldown_seconds,
        "advanced": {
            "horizontalPodAutoscalerConfig": {
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": plan.cooldown_seconds}}
            }
        },
        "triggers": [trigger],
    }
    return obj
