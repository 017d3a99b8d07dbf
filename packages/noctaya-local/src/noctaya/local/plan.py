"""What local mode runs for one LLMService: the operator's serving plan, mapped to one machine.

The service is planned by the core's planner, over the runtimes of the files served and the
installed vendor plugins, exactly as the operator plans it: runtime choice, autoscaling (min,
max, target, cooldown), gateway settings (queue bound, cold-start mode, heartbeat, activation
timeout), model path, templated engine args and env, and every validation on the way. Local
mode then swaps the cluster's parts for local ones:

- the backend Service becomes the engine's port on 127.0.0.1: the runtime's
  `spec.container.port.containerPort`, where the engine listens as it would in its pod;
- the container image becomes the runtime's local command (`noctaya.local.command`);
- the kubelet becomes `noctaya.local.workloads`: processes, the readiness check, stops;
- KEDA becomes `noctaya.local.autoscaler`, one engine process at most;
- the prewarm / staging Job becomes `noctaya.local.model_fetch`, whose fetched folder
  is the engine's `.Model.Path`;
- the cache volume becomes the machine's own caches: the engine's hub clients keep their
  defaults.

What needs a cluster is refused with a message naming the field: `pvc://` models (a volume),
env `valueFrom` (the Kubernetes API), exec and gRPC readiness probes, and a client API key
Secret unless `--api-key-file` provides the key. Accelerator, scheduling and gateway-resource
fields are cluster scheduling concerns and are not used here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from noctaya.core.api import InferenceRuntime, LLMService
from noctaya.core.cache_planning import FETCH_COMMAND
from noctaya.core.errors import NoctayaError
from noctaya.core.model_source import SourceKind
from noctaya.core.plan.autoscaling import AutoscalingPlan
from noctaya.core.plan.container import HealthCheck
from noctaya.core.plan.gateway import GatewayPlan
from noctaya.core.plan.planner import PlanSettings, ServicePlanner
from noctaya.core.plan.serving import ServingPlan
from noctaya.core.plugins import VendorRegistry
from noctaya.core.values.go_text import go_quote
from noctaya.local.annotations import own_listen_address, pinned
from noctaya.local.command import local_command
from noctaya.local.errors import LocalConfigError
from noctaya.local.runtimes import FileRuntimes
from noctaya.local.sources import ServedService

LOOPBACK = "127.0.0.1"
DEFAULT_STOP_GRACE_SECONDS = 30
"""Kubernetes' default terminationGracePeriodSeconds."""
GATEWAY_COMMAND = "noctaya-gateway"
SETTINGS = PlanSettings(
    gateway_image=GATEWAY_COMMAND, gateway_replicas=1, fetch_image=FETCH_COMMAND
)
"""Local mode runs Noctaya's programs by name where a cluster runs its image; one gateway."""
_FIELD_OF_REASON = {
    "ModelResolution": "spec.model: ",
    "ScaledObject": "spec.",
    "Prewarm": "spec.cache: ",
}
"""Where a planning failure of these reasons lies, in front of a message that does not say."""


@dataclass(frozen=True, slots=True)
class EnginePlan:
    argv: tuple[str, ...]
    env: Mapping[str, str]
    """Set on top of local mode's own environment: runtime env (templated), then model env."""
    port: int
    stop_grace_seconds: int
    readiness: HealthCheck | None = None
    """The runtime's readiness check, which local mode runs as the kubelet would; None: none."""
    readiness_path: str | None = None
    """The path of the runtime's HTTP readiness probe, which the gateway asks in place of the
    Service that gates a cluster's pods on it; None: the gateway's default (`/health`)."""
    port_name: str = "http"
    """The name of `port`, which a check may use instead of its number."""


@dataclass(frozen=True, slots=True)
class DeviceNeed:
    """The whole devices of one vendor an engine holds while it runs: what the plan's limits
    ask of the runtime's accelerator."""

    vendor: str
    count: int


@dataclass(frozen=True, slots=True)
class LocalPlan:
    serving: ServingPlan
    engine: EnginePlan
    api_key_file: str | None
    devices: DeviceNeed
    pinned: bool = False
    """Never stopped to hand its devices on (`serving.noctaya.io/local-pinned`)."""
    own_listen: str | None = None
    """The address of its own endpoint (`serving.noctaya.io/local-listen`), if any."""

    @property
    def service_name(self) -> str:
        return self.serving.service.name

    @property
    def runtime_name(self) -> str:
        return self.serving.runtime

    @property
    def gateway(self) -> GatewayPlan:
        return self.serving.gateway

    @property
    def autoscaling(self) -> AutoscalingPlan:
        return self.serving.autoscaling

    @property
    def backend_url(self) -> str:
        return f"http://{LOOPBACK}:{self.engine.port}"

    @property
    def model_names(self) -> tuple[str, ...]:
        """What clients may put in `model` for this service: the names the engine answers to
        (the core's reading of its args, as the gateway lists them), then the service's name."""
        return tuple(dict.fromkeys((*self.gateway.served_models, self.service_name)))


def plan_local(
    served: ServedService,
    runtimes: FileRuntimes,
    *,
    api_key_file: str | None = None,
    model_path: str | None = None,
    vendors: VendorRegistry | None = None,
) -> LocalPlan:
    """The service, planned and mapped; `model_path` replaces the model's own path (the folder
    a fetch filled)."""
    planner = ServicePlanner(runtimes, vendors or VendorRegistry.discover(), SETTINGS)
    try:
        serving = planner.plan(served.service, model_path=model_path)
    except NoctayaError as error:
        raise planning_error(error, served.service, served.source) from None
    return local_plan(serving, runtimes, api_key_file=api_key_file, served=served)


def planning_error(error: NoctayaError, service: LLMService, source: str) -> LocalConfigError:
    """The planner's failure as a local-mode error naming the field, or else the reason."""
    if error.reason == "RuntimeResolution":
        selector = "" if service.spec.runtime.name else "spec.runtime.selector: "
        return LocalConfigError(f"{source}: LLMService {selector}{error.message}")
    field = _FIELD_OF_REASON.get(error.reason)
    if field is not None:
        return LocalConfigError(f"LLMService {field}{error.message}")
    name = go_quote(service.metadata.name or "")
    return LocalConfigError(f"{source}: LLMService {name}: {error.reason}: {error.message}")


def local_plan(
    serving: ServingPlan,
    runtimes: FileRuntimes,
    *,
    api_key_file: str | None,
    served: ServedService,
) -> LocalPlan:
    """`serving` on this machine, or the LocalConfigError of the first part it cannot run;
    `served` is the service as written, with its local-mode annotations."""
    auth = serving.gateway.api_key
    if auth is not None and api_key_file is None:
        raise LocalConfigError(
            f"LLMService spec.endpoint.authentication.secretRef: local mode cannot read Secret "
            f"{go_quote(auth.secret_name)}; pass --api-key-file with the client API key"
        )
    if serving.model.kind is SourceKind.PVC:
        raise LocalConfigError(
            "LLMService spec.model.source.uri: pvc:// models need a cluster (a volume claim); "
            "local mode serves hf://, modelscope:// and oci:// models"
        )
    runtime = runtimes.runtime(serving.runtime)
    return LocalPlan(
        serving=serving,
        engine=_plan_engine(serving, runtime),
        api_key_file=api_key_file,
        devices=DeviceNeed(
            str(runtime.spec.vendor),
            serving.backend.limits.get(runtime.spec.accelerator.resource_name, 0),
        ),
        pinned=pinned(served.service),
        own_listen=own_listen_address(served.service),
    )


def _plan_engine(serving: ServingPlan, runtime: InferenceRuntime) -> EnginePlan:
    backend = serving.backend
    name = go_quote(runtime.metadata.name or "")
    for index, item in enumerate(runtime.spec.container.env):
        if item.value_from is not None:
            raise LocalConfigError(
                f"InferenceRuntime {name} spec.container.env[{index}].valueFrom "
                f"({item.name}): not supported in local mode, which has no Kubernetes API to "
                "read it from; set value instead"
            )
    token = serving.model.token_env  # read from local mode's environment (`model_fetch`)
    for env in backend.env:
        if env.source is not None and not (token is not None and env.name == token.name):
            raise LocalConfigError(
                f"LLMService env {env.name}: its value comes from the cluster, which local mode "
                "cannot read"
            )
    readiness = backend.readiness
    if readiness.http_get is None and readiness.tcp_socket is None:
        kind = ".exec" if readiness.exec is not None else ".grpc" if readiness.grpc else ""
        raise LocalConfigError(
            f"InferenceRuntime {name} spec.health.readiness{kind}: not supported in local mode, "
            "which checks readiness with httpGet or tcpSocket only"
        )
    declared = runtime.spec.health.readiness
    http_get = declared.http_get if declared is not None else None
    return EnginePlan(
        argv=(*local_command(runtime), *backend.args),
        env={item.name: item.value or "" for item in backend.env if item.source is None},
        port=backend.port,
        stop_grace_seconds=backend.termination_grace_seconds or DEFAULT_STOP_GRACE_SECONDS,
        readiness=readiness,
        readiness_path=None if http_get is None else http_get.path or "/",
        port_name=backend.port_name,
    )
