"""Whether a set of files can be served as a whole: every service planned by the core, then the
rules that hold between services on one machine. The first failure is a LocalConfigError naming
the file and field; nothing is served from a set that fails (at start-up local mode exits 2, a
live edit is refused and the running set stays).

Between services: each port is used once (engines, the endpoint, own endpoints), a model name
routes to one service only, and no service needs more devices than the machine has.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from noctaya.core.plugins import VendorRegistry
from noctaya.core.values.go_text import go_quote
from noctaya.local.devices import MachineDevices
from noctaya.local.errors import LocalConfigError
from noctaya.local.model_fetch import ModelFetch, plan_fetch
from noctaya.local.plan import LocalPlan, plan_local
from noctaya.local.port_claims import check_ports
from noctaya.local.sources import LocalManifests


@dataclass(frozen=True)
class AdmissionSettings:
    listen: str
    vendors: VendorRegistry
    devices: MachineDevices
    environ: Mapping[str, str]
    api_key_file: str | None = None
    registry_config: str | None = None


@dataclass(frozen=True)
class Admitted:
    plans: dict[str, LocalPlan]
    """By service name."""
    sources: dict[str, str]
    """Each service's file."""
    fetches: dict[str, ModelFetch] = field(default_factory=dict)
    """The services whose model local mode must fetch first (its path is not in `fetched`)."""


def admit(
    manifests: LocalManifests, settings: AdmissionSettings, fetched: Mapping[str, str]
) -> Admitted:
    """`fetched` maps a model's URI to the folder a fetch filled, which the engine gets as its
    `.Model.Path`."""
    plans: dict[str, LocalPlan] = {}
    sources: dict[str, str] = {}
    fetches: dict[str, ModelFetch] = {}
    for served in manifests.services:
        plan = plan_local(
            served, manifests.runtimes, api_key_file=settings.api_key_file, vendors=settings.vendors
        )
        fetch = plan_fetch(plan.serving, settings.registry_config, settings.environ)
        if fetch is not None:
            path = fetched.get(fetch.uri)
            if path is None:
                fetches[served.name] = fetch
            else:
                plan = plan_local(
                    served,
                    manifests.runtimes,
                    api_key_file=settings.api_key_file,
                    model_path=path,
                    vendors=settings.vendors,
                )
        try:
            settings.devices.check(served.name, plan.devices.vendor, plan.devices.count)
        except LocalConfigError as error:
            raise LocalConfigError(f"{served.source}: {error}") from None
        plans[served.name] = plan
        sources[served.name] = served.source
    try:
        check_ports(list(plans.values()), settings.listen)
        _check_model_names(plans)
    except LocalConfigError as error:
        raise LocalConfigError(f"{_source_of(error, sources)}{error}") from None
    return Admitted(plans, sources, fetches)


def _check_model_names(plans: Mapping[str, LocalPlan]) -> None:
    owner: dict[str, str] = {}
    for name, plan in plans.items():
        for model in plan.model_names:
            other = owner.setdefault(model, name)
            if other != name:
                raise LocalConfigError(
                    f"LLMService {go_quote(name)}: model name {go_quote(model)} is also "
                    f"LLMService {go_quote(other)}'s; requests name the model to choose the "
                    "service, so each name belongs to one"
                )


def _source_of(error: LocalConfigError, sources: Mapping[str, str]) -> str:
    """`file: ` of the service the message starts with."""
    for name, source in sources.items():
        if str(error).startswith(f"LLMService {go_quote(name)}"):
            return f"{source}: "
    return ""
