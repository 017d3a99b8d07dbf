"""From an LLMService to its serving plan: resolve the runtime, the vendor and the model, then plan.

The one planner: the operator, `noctaya render` / `noctaya validate` and local mode all plan a
service here, each over its own `RuntimeCatalog`, so a service means the same everywhere. Only
what the platform supplies differs (`PlanSettings`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from noctaya.core.api import InferenceRuntime, LLMService
from noctaya.core.model_source import resolve_model_spec
from noctaya.core.plan.gateway import GatewayDefaults
from noctaya.core.plan.serving import ServingPlan, plan_serving
from noctaya.core.plugins import VendorRegistry
from noctaya.core.ports import RuntimeCatalog
from noctaya.core.runtime_selection import resolve_runtime


@dataclass(frozen=True, slots=True)
class PlanSettings:
    """What the platform adds to every plan."""

    gateway_image: str
    gateway_replicas: int = 1
    fetch_image: str | None = None
    """The prewarm / staging Job's image; None: the gateway image (the main image holds both)."""
    gateway_defaults: GatewayDefaults = field(default_factory=GatewayDefaults)
    plain_http_registries: frozenset[str] = frozenset()
    """OCI registries (`host[:port]`) the staging Job reaches over plain HTTP, such as one
    served inside the cluster without TLS; every other registry is reached over HTTPS."""


class ServicePlanner:
    """Plans services against the runtimes of a catalog and the installed vendor plugins."""

    def __init__(
        self, catalog: RuntimeCatalog, vendors: VendorRegistry, settings: PlanSettings
    ) -> None:
        self._catalog = catalog
        self._vendors = vendors
        self._settings = settings

    def resolve_runtime(self, service: LLMService) -> InferenceRuntime:
        return resolve_runtime(service.spec.runtime, self._catalog)

    def plan(self, service: LLMService, *, model_path: str | None = None) -> ServingPlan:
        """`model_path` is where the platform delivered the model, if it fetched it itself (local
        mode's cache folder); it replaces the path the source names as `.Model.Path`."""
        runtime = self.resolve_runtime(service)
        # Vendor names are open-ended: the installed plugins decide (else UnsupportedVendor).
        adapter = self._vendors.adapter(runtime.spec.vendor)
        model = resolve_model_spec(service.spec.model)
        if model_path is not None:
            model = replace(model, path=model_path)
        settings = self._settings
        return plan_serving(
            service,
            runtime,
            adapter,
            model,
            gateway_image=settings.gateway_image,
            gateway_replicas=settings.gateway_replicas,
            fetch_image=settings.fetch_image,
            gateway_defaults=settings.gateway_defaults,
            plain_http_registries=settings.plain_http_registries,
        )
