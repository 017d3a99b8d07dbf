"""A demand-report client for the aggregator's HTTP endpoint, plus an aggregate snapshot."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from gateway.support import sample
from noctaya.gateway.aggregator.server import AggregatorServer

from .conftest import TOKEN


@dataclass(frozen=True)
class Reply:
    status: int
    body: str
    headers: dict[str, str]


def report(member: str = "gw/1", sequence: int = 1, demand: int = 1, **extra: Any) -> bytes:
    return json.dumps(
        {"memberID": member, "sequence": sequence, "demand": demand, **extra}
    ).encode()


class Reporter:
    """Posts to one aggregator; the token is right unless a test says otherwise."""

    def __init__(self, session: aiohttp.ClientSession, aggregator: AggregatorServer) -> None:
        self.session = session
        self.base = f"http://127.0.0.1:{aggregator.http_port}"

    async def post(
        self,
        body: bytes,
        *,
        authorization: str | None = f"Bearer {TOKEN}",
        method: str = "POST",
        path: str = "/v1/demand",
    ) -> Reply:
        headers = {"Content-Type": "application/json"}
        if authorization is not None:
            headers["Authorization"] = authorization
        async with self.session.request(
            method, self.base + path, data=body, headers=headers
        ) as reply:
            return Reply(reply.status, await reply.text(), dict(reply.headers))

    async def get(self, path: str) -> Reply:
        async with self.session.get(self.base + path) as reply:
            return Reply(reply.status, await reply.text(), dict(reply.headers))


def snapshot(aggregator: AggregatorServer) -> tuple[object, ...]:
    """Everything a report can change: the total, the members, and the report counters."""
    registry = aggregator.metrics.registry
    counts = tuple(
        sample(registry, "noctaya_scaler_demand_reports_total", {"result": result})
        for result in ("accepted", "stale", "capacity")
    )
    return aggregator.aggregate.current(), aggregator.aggregate.members(), counts


def set_token(path: Path, token: str | None) -> None:
    """Rotate (or, with None, remove) the token file the aggregator re-reads per request."""
    if token is None:
        path.unlink()
    else:
        path.write_text(token)
