"""The serving backend: one vLLM container, whole devices, model and cache volumes, probes and
drain — everything from the runtime profile and the service, vendor-neutral.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from noctaya.core.api import (
    InferenceRuntime,
    InferenceRuntimeSpec,
    LLMService,
    LLMServiceSpec,
    Probe,
)
from noctaya.core.api.kubernetes import EnvVarSource, KeySelector
from noctaya.core.api.security_context import SecurityContext
from noctaya.core.errors import NoctayaError
from noctaya.core.model_source import MODEL_STORE_PATH, LiteralEnv, ResolvedModel, SecretEnv
from noctaya.core.plan.container import (
    ClaimVolume,
    Env,
    HealthCheck,
    HostPathVolume,
    HttpGet,
    MemoryVolume,
    Mount,
    Scheduling,
    Volume,
    health_check,
    last_wins,
    toleration,
)
from noctaya.core.plan.pod_security import (
    PodSecurity,
    PodSecurityContext,
    backend_security,
    pod_security_context,
)
from noctaya.core.ports import VendorAdapter
from noctaya.core.templating import TemplateContext, render_args, render_env_values
from noctaya.core.vendors import AcceleratorPlan, AcceleratorRequest

REASON = "Render"
DRAIN_GRACE_SECONDS = 10
HEALTH_PATH = "/health"


@dataclass(frozen=True, slots=True)
class CacheMount:
    """The model cache as the serving container sees it: a volume at `/cache`, the env that
    points hub clients into it, and the marker serving waits for when a Job fills it.

    Kept apart from the other volumes and env because it is the part a platform replaces with
    its own cache (local mode uses the machine's).
    """

    volume: Volume
    read_only: bool
    env: tuple[Env, ...]
    ready_marker: str | None = None
    """If set, serving must not start before this file exists (a prewarm or staging Job)."""


@dataclass(frozen=True, slots=True)
class BackendPlan:
    runtime: str
    image: str
    args: tuple[str, ...]
    env: tuple[Env, ...]
    """Runtime env (templated), then model env and token; one entry per name."""
    port_name: str
    port: int
    cpu: str | None
    memory: str | None
    limits: Mapping[str, int]
    readiness: HealthCheck
    startup: HealthCheck
    liveness: HealthCheck | None
    volumes: tuple[Volume, ...]
    mounts: tuple[Mount, ...]
    cache: CacheMount | None
    prestop_sleep_seconds: int | None
    termination_grace_seconds: int | None
    scheduling: Scheduling
    image_pull_secrets: tuple[str, ...]
    security_context: SecurityContext | None
    """The runtime's, for the serving container and the init container (same image)."""
    pod_security_context: PodSecurityContext | None
    pod_security: PodSecurity
    """The Pod Security level the serving pod meets, cache and init container included."""


def scheduling_of(runtime: InferenceRuntime) -> Scheduling:
    accelerator = runtime.spec.accelerator
    scheduler = accelerator.scheduler
    queue = scheduler.queue if scheduler else None
    if queue and (scheduler is None or scheduler.name != "volcano"):
        raise NoctayaError(
            REASON,
            f"runtime {json.dumps(runtime.metadata.name)} sets accelerator.scheduler.queue "
            "without scheduler.name=volcano",
        )
    return Scheduling(
        node_selector=dict(accelerator.node_selector),
        tolerations=tuple(toleration(t) for t in accelerator.tolerations),
        scheduler_name=scheduler.name if scheduler and scheduler.name else None,
        volcano_queue=queue or None,
    )


def _health(probe: Probe | None, default: HealthCheck) -> HealthCheck:
    return default if probe is None else health_check(probe)


def literal_env(pairs: tuple[LiteralEnv, ...]) -> tuple[Env, ...]:
    return tuple(Env(item.name, item.value) for item in pairs)


def secret_env(item: SecretEnv) -> Env:
    """A Secret-held value (a hub token) as the env var that reads it."""
    reference = KeySelector(name=item.secret_name, key=item.key)
    return Env(item.name, source=EnvVarSource(secret_key_ref=reference))


def plan_backend(
    service: LLMService,
    runtime: InferenceRuntime,
    adapter: VendorAdapter,
    model: ResolvedModel,
    *,
    cache: CacheMount | None,
) -> BackendPlan:
    """The backend of `service` on `runtime`: refuse what v0 does not serve, then devices,
    command, volumes, drain and probes, each from its own part of the two specs."""
    spec, rt = service.spec, runtime.spec
    rt_name = runtime.metadata.name or ""
    _refuse_unsupported(spec, rt, rt_name)
    accelerator = adapter.accelerator_plan(
        AcceleratorRequest(rt_name, rt.accelerator.resource_name, spec.resources.accelerators)
    )
    scheduling = scheduling_of(runtime)
    args, env = _command(service, rt, model)
    volumes, mounts = _volumes(model, accelerator)
    prestop, grace = _drain(spec, rt)
    readiness, startup, liveness = _health_checks(rt)
    checks = [check for check in (readiness, startup, liveness) if check is not None]
    return BackendPlan(
        runtime=rt_name,
        image=rt.container.image,
        args=args,
        env=last_wins(env),
        port_name=rt.container.port.name,
        port=rt.container.port.container_port,
        cpu=str(spec.resources.cpu) if spec.resources.cpu is not None else None,
        memory=str(spec.resources.memory) if spec.resources.memory is not None else None,
        limits=dict(accelerator.limits),
        readiness=readiness,
        startup=startup,
        liveness=liveness,
        volumes=tuple(volumes),
        mounts=tuple(mounts),
        cache=cache,
        prestop_sleep_seconds=prestop,
        termination_grace_seconds=grace,
        scheduling=scheduling,
        image_pull_secrets=tuple(ref.name for ref in spec.image_pull_secrets if ref.name),
        security_context=rt.container.security_context,
        pod_security_context=pod_security_context(rt.container.security_context),
        pod_security=backend_security(
            rt_name,
            rt.container.security_context,
            volumes,
            cache.volume if cache else None,
            checks,
        ),
    )


def _refuse_unsupported(spec: LLMServiceSpec, rt: InferenceRuntimeSpec, rt_name: str) -> None:
    """Device fractions and shared devices are API fields v0 does not serve: refuse them rather
    than hand out whole devices the service did not ask for."""
    if spec.resources.fraction is not None:
        raise NoctayaError(
            REASON,
            f"resources.fraction is not supported in v0; runtime {json.dumps(rt_name)} serves "
            "whole devices, set resources.accelerators instead",
        )
    sharing = rt.accelerator.sharing
    if sharing is not None and sharing.supported:
        raise NoctayaError(
            REASON,
            f"runtime {json.dumps(rt_name)} sets accelerator.sharing.supported, which is not "
            "implemented; Noctaya serves whole devices, set it to false",
        )


def _command(
    service: LLMService, rt: InferenceRuntimeSpec, model: ResolvedModel
) -> tuple[tuple[str, ...], list[Env]]:
    """The serving container's args and env: the runtime's, templated with the model path and
    the service's name, then the model's env and its hub token."""
    context = TemplateContext(
        model_path=model.path,
        service_name=service.metadata.name or "",
        service_namespace=service.metadata.namespace or "",
    )
    args = render_args(rt.container.args, service.spec.runtime.args_override, context)
    values = render_env_values([item.value for item in rt.container.env], context)
    env = [
        Env(item.name, value, item.value_from)
        for item, value in zip(rt.container.env, values, strict=True)
    ]
    env += literal_env(model.env)
    if model.token_env is not None:
        env.append(secret_env(model.token_env))
    return args, env


def _volumes(
    model: ResolvedModel, accelerator: AcceleratorPlan
) -> tuple[list[Volume], list[Mount]]:
    """Shared memory, the model's claim when it comes from one (read-only), and the host paths
    the vendor's devices need; the cache is the caller's `CacheMount`."""
    volumes: list[Volume] = [MemoryVolume("dshm")]
    mounts = [Mount("dshm", "/dev/shm")]
    if model.pvc_claim:
        volumes.append(ClaimVolume("model-store", model.pvc_claim, read_only=True))
        mounts.append(Mount("model-store", MODEL_STORE_PATH, read_only=True))
    volumes += [HostPathVolume(m.name, m.host_path) for m in accelerator.host_mounts]
    mounts += [Mount(m.name, m.mount_path, m.read_only) for m in accelerator.host_mounts]
    return volumes, mounts


def _drain(spec: LLMServiceSpec, rt: InferenceRuntimeSpec) -> tuple[int | None, int | None]:
    """The preStop sleep and the termination grace period: with `preStopDrain`, the pod sleeps
    for the service's drain timeout and is given that plus `DRAIN_GRACE_SECONDS` to stop."""
    grace = rt.lifecycle.termination_grace_period_seconds
    drain = spec.scaling.drain_timeout
    if not rt.lifecycle.pre_stop_drain or drain.nanoseconds <= 0:
        return None, grace
    prestop = drain.ceil_seconds()
    return prestop, max(grace or 0, prestop + DRAIN_GRACE_SECONDS)


def _health_checks(rt: InferenceRuntimeSpec) -> tuple[HealthCheck, HealthCheck, HealthCheck | None]:
    """Readiness, startup and liveness: the runtime's probes, or GET /health on the serving port
    for the first two (startup allows ten minutes); no liveness unless the runtime sets one."""
    health = HttpGet(port=rt.container.port.name, path=HEALTH_PATH)
    readiness = _health(rt.health.readiness, HealthCheck(http_get=health))
    startup = _health(
        rt.health.startup, HealthCheck(http_get=health, period_seconds=10, failure_threshold=60)
    )
    liveness = health_check(rt.health.liveness) if rt.health.liveness is not None else None
    return readiness, startup, liveness
