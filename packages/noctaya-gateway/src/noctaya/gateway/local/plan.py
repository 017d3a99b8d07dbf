"""What local mode runs for one LLMService: the operator's core policies, mapped to one machine.

The same core functions the operator uses decide the autoscaling (min, max, target, cooldown and
their validation), the gateway settings (queue bound, cold-start mode, heartbeat, activation
timeout), the model path and the templated engine args and env. Local mode then swaps the
cluster's parts for local ones:

- the backend Service becomes the engine's port on 127.0.0.1: the runtime's
  `spec.container.port.containerPort`, where the engine listens as it would in its pod;
- the container image becomes the runtime's local command (`noctaya.gateway.local.command`);
- KEDA becomes `noctaya.gateway.local.autoscaler`, one engine process at most.

- the prewarm / staging Job becomes `noctaya.gateway.local.model_fetch`, whose fetched folder
  is the engine's `.Model.Path`.

What needs a cluster is refused with a message naming the field: `pvc://` models (a volume),
env `valueFrom` (the Kubernetes API), and a client API key Secret unless `--api-key-file`
provides the key. Accelerator and gateway-resource fields are cluster scheduling concerns and
are not used here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from noctaya.core.api import InferenceRuntime, LLMService
from noctaya.core.errors import NoctayaError
from noctaya.core.model_source import ResolvedModel, SourceKind, resolve_model_spec
from noctaya.core.plan.autoscaling import AutoscalingPlan, plan_autoscaling
from noctaya.core.plan.gateway import GatewayPlan, plan_gateway
from noctaya.core.templating import TemplateContext, render_args, render_env_values
from noctaya.core.values.go_text import go_quote
from noctaya.gateway.local.command import local_command
from noctaya.gateway.local.errors import LocalConfigError
from noctaya.gateway.local.manifest import LocalManifest

LOOPBACK = "127.0.0.1"
DEFAULT_NAMESPACE = "default"
DEFAULT_STOP_GRACE_SECONDS = 30
"""Kubernetes' default terminationGracePeriodSeconds."""
GATEWAY_COMMAND = "noctaya-gateway"


@dataclass(frozen=True, slots=True)
class EnginePlan:
    argv: tuple[str, ...]
    env: Mapping[str, str]
    """Set on top of local mode's own environment: runtime env (templated), then model env."""
    port: int
    stop_grace_seconds: int
    readiness_path: str | None = None
    """The path of the runtime's HTTP readiness probe, which the gateway asks in place of the
    Service that gates a cluster's pods on it; None: the gateway's default (`/health`)."""


@dataclass(frozen=True, slots=True)
class LocalPlan:
    service_name: str
    runtime_name: str
    engine: EnginePlan
    gateway: GatewayPlan
    autoscaling: AutoscalingPlan
    api_key_file: str | None

    @property
    def backend_url(self) -> str:
        return f"http://{LOOPBACK}:{self.engine.port}"


def plan_local(
    manifest: LocalManifest, *, api_key_file: str | None = None, model_path: str | None = None
) -> LocalPlan:
    """`model_path` replaces the model's own path: the folder a fetch filled."""
    service, runtime = manifest.service, manifest.runtime
    spec = service.spec
    auth = spec.endpoint.authentication
    if auth is not None and api_key_file is None:
        raise LocalConfigError(
            f"LLMService spec.endpoint.authentication.secretRef: local mode cannot read Secret "
            f"{go_quote(auth.secret_ref.name)}; pass --api-key-file with the client API key"
        )
    try:
        autoscaling = plan_autoscaling(spec)
    except NoctayaError as error:  # its messages start with the field: `scaling.metric …`
        raise LocalConfigError(f"LLMService spec.{error.message}") from None
    return LocalPlan(
        service_name=service.metadata.name or "",
        runtime_name=runtime.metadata.name or "",
        engine=_plan_engine(service, runtime, model_path),
        gateway=plan_gateway(spec, GATEWAY_COMMAND, 1, None),
        autoscaling=autoscaling,
        api_key_file=api_key_file,
    )


def _plan_engine(
    service: LLMService, runtime: InferenceRuntime, model_path: str | None
) -> EnginePlan:
    container = runtime.spec.container
    command = local_command(runtime)
    model = local_model(service)
    context = TemplateContext(
        model_path=model_path or model.path,
        service_name=service.metadata.name or "",
        service_namespace=service.metadata.namespace or DEFAULT_NAMESPACE,
    )
    runtime_name = go_quote(runtime.metadata.name or "")
    for index, item in enumerate(container.env):
        if item.value_from is not None:
            raise LocalConfigError(
                f"InferenceRuntime {runtime_name} spec.container.env[{index}].valueFrom "
                f"({item.name}): not supported in local mode, which has no Kubernetes API to "
                "read it from; set value instead"
            )
    try:
        args = render_args(container.args, service.spec.runtime.args_override, context)
        values = render_env_values([item.value for item in container.env], context)
    except NoctayaError as error:
        raise LocalConfigError(error.message) from None
    env = {item.name: value or "" for item, value in zip(container.env, values, strict=True)}
    env.update({item.name: item.value for item in model.env})
    grace = runtime.spec.lifecycle.termination_grace_period_seconds
    readiness = runtime.spec.health.readiness
    http_get = readiness.http_get if readiness is not None else None
    return EnginePlan(
        argv=(*command, *args),
        env=env,
        port=container.port.container_port,
        stop_grace_seconds=grace or DEFAULT_STOP_GRACE_SECONDS,
        readiness_path=None if http_get is None else http_get.path or "/",
    )


def local_model(service: LLMService) -> ResolvedModel:
    """The service's model, if local mode can serve it: anything but a mounted `pvc://` claim."""
    try:
        model = resolve_model_spec(service.spec.model)
    except NoctayaError as error:
        raise LocalConfigError(f"LLMService spec.model: {error.message}") from None
    if model.kind is SourceKind.PVC:
        raise LocalConfigError(
            "LLMService spec.model.source.uri: pvc:// models need a cluster (a volume claim); "
            "local mode serves hf://, modelscope:// and oci:// models"
        )
    return model
