"""A service's serving plan from minimal manifests, as the operator plans it: the installed
vendor plugins, the runtime pinned by name, the model resolved from its source."""

from __future__ import annotations

from noctaya.core.api import parse_inferenceruntime, parse_llmservice
from noctaya.core.model_source import resolve_model_spec
from noctaya.core.plan.serving import ServingPlan, plan_serving
from noctaya.core.plugins import VendorRegistry

from .custom_resources import Manifest
from .manifests import inference_runtime, llmservice

SERVICE = "chat"
NAMESPACE = "tenant"
RUNTIME = "rt"


def serving_plan(
    service: Manifest | None = None,
    runtime: Manifest | None = None,
    *,
    gateway_replicas: int = 1,
) -> ServingPlan:
    """The plan of LLMService `chat` in `tenant` (spec `service` merged in) on InferenceRuntime
    `rt` (spec `runtime` merged in)."""
    changes = {"runtime": {"name": RUNTIME}, **(service or {})}
    llm = parse_llmservice(llmservice(SERVICE, changes))
    llm.metadata.namespace = NAMESPACE
    rt = parse_inferenceruntime(inference_runtime(RUNTIME, runtime))
    return plan_serving(
        llm,
        rt,
        VendorRegistry.discover().adapter(rt.spec.vendor),
        resolve_model_spec(llm.spec.model),
        gateway_image="ghcr.io/noctaya/noctaya:test",
        gateway_replicas=gateway_replicas,
    )
