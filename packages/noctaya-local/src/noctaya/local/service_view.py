"""What a service is doing, in the words the status table, `GET /v1/models`, the metrics and the
held clients' heartbeats use.

States: `cold` (no engine, none wanted), `starting` (wanted, not yet running), `waiting` (for
devices other engines hold and may not give up yet), `swapping in` (engines are being stopped
for it), `swapped out` (it gave its devices up, and takes them again at its next request),
`loading` (its engine runs, not ready yet), `ready`, `stopping`, `restarting` (its engine exited
and restarts after a back-off) and `unavailable` (its gateway does not serve).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from noctaya.local.routes import Route
from noctaya.local.swaps import StartTimes


@dataclass(frozen=True, slots=True)
class ServiceView:
    service: str
    model: str
    state: str
    devices: tuple[str, ...]
    in_flight: int
    last_request: float | None
    """Seconds since the last request arrived; None if none did."""
    last_start: StartTimes | None = None
    """How its engine's last start on budgeted devices went."""


@dataclass(frozen=True, slots=True)
class Phase:
    """What held clients of a cold service are told: `text` in a heartbeat comment; a new
    `kind` is announced at once."""

    kind: str
    text: str


def view(route: Route, now: float) -> ServiceView:
    processes = route.processes
    tenant = processes.engine.devices
    held = tenant.grant.ids if tenant is not None and tenant.grant is not None else ()
    last = route.traffic.last_request
    return ServiceView(
        service=route.name,
        model=route.model,
        state=_state(route),
        devices=held,
        in_flight=route.traffic.in_flight,
        last_request=None if last is None else max(0.0, now - last),
        last_start=tenant.last_start if tenant is not None else None,
    )


def _state(route: Route) -> str:
    processes = route.processes
    engine = processes.engine
    if processes.ended.done():
        return "unavailable"
    if not processes.serving.done():
        return "starting"
    if engine.process is not None:
        return "stopping" if engine.stopping else "ready" if engine.ready else "loading"
    if engine.backing_off:
        return "restarting"
    tenant = engine.devices
    claim = tenant.claim if tenant is not None else None
    if tenant is not None and claim is not None:
        phase = tenant.phase()
        if tenant.swapped_out_at is not None and phase is None:
            return "swapped out"
        if phase is not None:
            return "swapping in" if claim.stopping else "waiting"
    return "starting" if engine.replicas else "cold"


def phase(route: Route) -> Phase | None:
    """For a client held while the service is cold: `stopping <model>` while engines stop for
    it, `waiting for <model>`, `starting`, `loading 12s`, `restarting`; None once its engine is
    ready."""
    engine = route.processes.engine
    tenant = engine.devices
    waiting = tenant.phase() if tenant is not None else None
    if waiting is not None:
        return Phase(waiting, waiting)
    if engine.process is not None and engine.started_at is not None:
        if engine.stopping:
            return Phase("stopping", f"stopping {route.model}")
        if engine.ready:
            return None
        loading = asyncio.get_running_loop().time() - engine.started_at
        return Phase("loading", f"loading {int(loading)}s")
    if engine.backing_off:
        return Phase("restarting", "restarting")
    return Phase("starting", "starting")
