"""`GET /metrics` on local mode's endpoint: every service's gateway series with a `service` label,
and local mode's own series per service (engine state, requests in flight, devices held, engine
starts, swaps), in one Prometheus text exposition.

The gateways' series are read from each gateway's own `/metrics` at scrape time and merged
family by family (a family's HELP and TYPE once, then the samples of every service), so one
scrape target shows every service the way a cluster's gateways would each show one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from noctaya.gateway.metrics.exposition import Counter, Gauge, Registry
from noctaya.gateway.upstream import UpstreamError
from noctaya.local.routes import Route
from noctaya.local.service_view import ServiceView, view

GATEWAY_SCRAPE_TIMEOUT = 2.0

STATES = (
    "cold",
    "starting",
    "waiting",
    "swapping in",
    "swapped out",
    "loading",
    "ready",
    "stopping",
    "restarting",
    "unavailable",
)


async def scrape(routes: Sequence[Route]) -> str:
    """The whole exposition of one scrape: every gateway read at once, each within its timeout
    (a gateway that does not answer shows as `noctaya_local_gateway_up 0`)."""
    texts = await asyncio.gather(*(_gateway_exposition(route) for route in routes))
    merged = merge_expositions(
        (route.name, text) for route, text in zip(routes, texts, strict=True) if text
    )
    now = time.monotonic()
    counts = []
    for route, text in zip(routes, texts, strict=True):
        tenant = route.processes.engine.devices
        counts.append(
            ServiceCounts(
                view(route, now),
                route.processes.engine.starts,
                tenant.swaps if tenant is not None else 0,
                text is not None,
            )
        )
    return merged + local_series(counts)


async def _gateway_exposition(route: Route) -> str | None:
    pool = await route.gateway(0)
    if pool is None:
        return None
    try:
        async with (
            asyncio.timeout(GATEWAY_SCRAPE_TIMEOUT),
            pool.exchange("GET", b"/metrics", []) as response,
        ):
            body = await response.read()
    except (*UpstreamError, TimeoutError):
        return None
    return body.decode("utf-8", errors="replace") if response.status == 200 else None


@dataclass
class _Family:
    meta: list[str] = field(default_factory=list)
    samples: list[str] = field(default_factory=list)


def merge_expositions(parts: Iterable[tuple[str, str]]) -> str:
    """(service, its gateway's exposition) pairs as one exposition, each sample labelled with
    its service."""
    families: dict[str, _Family] = {}
    for service, text in parts:
        current: _Family | None = None
        for line in text.splitlines():
            if line.startswith("# "):
                words = line.split(None, 3)
                if len(words) >= 3 and words[1] in ("HELP", "TYPE"):
                    current = families.setdefault(words[2], _Family())
                    if not any(meta.split(None, 2)[1] == words[1] for meta in current.meta):
                        current.meta.append(line)
                continue
            if line.strip() and current is not None:
                current.samples.append(_labelled(line, service))
    return "".join(
        line + "\n" for family in families.values() for line in (*family.meta, *family.samples)
    )


def _labelled(sample: str, service: str) -> str:
    label = f'service="{service}"'  # a DNS label: nothing to escape
    name_end = min((i for i in (sample.find("{"), sample.find(" ")) if i >= 0), default=-1)
    if name_end < 0:
        return sample
    if sample[name_end] == "{":
        rest = sample[name_end + 1 :]
        return f"{sample[:name_end]}{{{label}{'' if rest.startswith('}') else ','}{rest}"
    return f"{sample[:name_end]}{{{label}}}{sample[name_end:]}"


@dataclass(frozen=True, slots=True)
class ServiceCounts:
    view: ServiceView
    engine_starts: int
    swaps: int
    gateway_up: bool


def local_series(services: Sequence[ServiceCounts]) -> str:
    registry = Registry()
    state = Gauge(
        "noctaya_local_engine_state",
        "1 for the state the service's engine is in (see the local mode page).",
        ["service", "state"],
        registry=registry,
    )
    in_flight = Gauge(
        "noctaya_local_requests_in_flight",
        "Requests of the service held or being answered, streams until their last byte.",
        ["service"],
        registry=registry,
    )
    devices = Gauge(
        "noctaya_local_devices_held",
        "Devices the service's engine holds.",
        ["service"],
        registry=registry,
    )
    starts = Counter(
        "noctaya_local_engine_starts",
        "Engine processes started for the service (since it was last applied).",
        ["service"],
        registry=registry,
    )
    swaps = Counter(
        "noctaya_local_swaps",
        "Times the service's engine was stopped to hand its devices to another service.",
        ["service"],
        registry=registry,
    )
    up = Gauge(
        "noctaya_local_gateway_up",
        "1 when the service's gateway answered this scrape.",
        ["service"],
        registry=registry,
    )
    for counts in services:
        view = counts.view
        for each in STATES:
            state.labels(view.service, each).set(1 if view.state == each else 0)
        in_flight.labels(view.service).set(view.in_flight)
        devices.labels(view.service).set(len(view.devices))
        starts.labels(view.service).inc(counts.engine_starts)
        swaps.labels(view.service).inc(counts.swaps)
        up.labels(view.service).set(int(counts.gateway_up))
    return registry.render().decode()
