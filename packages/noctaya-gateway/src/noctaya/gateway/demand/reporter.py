"""Multi-gateway demand reporter: how one replica's demand reaches the aggregator.

A report goes out on every demand change, so a cold request reaches KEDA in one round trip, and
at least every 2 s otherwise, so the aggregator (which forgets a silent member after 10 s) keeps
counting a live replica and rebuilds its total within one heartbeat after a restart. Sends are
serialized; changes made during a slow send coalesce into the next one (latest value wins).

A cold request's report is written in the event loop's next turn after the change, which under
load is what decides activation latency: the reporter's task waits on its feed subscription
itself, and reports go through the gateway's own HTTP/1.1 client, which writes a request the
moment it is asked to (aiohttp would write the body from a task of its own, a turn later).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from collections.abc import Mapping
from urllib.parse import urlsplit

from noctaya.core.plan import gateway_env as names
from noctaya.gateway.aggregator.protocol import DemandReport, bearer, read_demand_token
from noctaya.gateway.metrics.exposition import Counter
from noctaya.gateway.process.config import is_absolute_http_url
from noctaya.gateway.process.describe import describe_error
from noctaya.gateway.scaler.service import DemandSource
from noctaya.gateway.upstream import (
    ProtocolError,
    UpstreamClosed,
    UpstreamPool,
    UpstreamTimeout,
)

HEARTBEAT_SECONDS = 2.0
SEND_TIMEOUT_SECONDS = 1.0
# An answer is a status, with at most a one-line error text: reading more could only fill memory.
# A longer body is left unread, and the connection is then closed instead of reused.
MAX_REPLY_BYTES = 4096

_log = logging.getLogger(__name__)


class DemandReporter:
    def __init__(
        self,
        endpoint: str,
        gateway_id: str,
        token_file: str,
        reports: Counter,
        *,
        heartbeat: float = HEARTBEAT_SECONDS,
        send_timeout: float = SEND_TIMEOUT_SECONDS,
    ) -> None:
        """Validate the settings (ValueError naming what is wrong); nothing is sent."""
        endpoint = endpoint.rstrip("/")
        if not is_absolute_http_url(endpoint):
            raise ValueError("demand aggregator endpoint must be an absolute HTTP URL")
        if not gateway_id:
            raise ValueError("gateway ID is required")
        read_demand_token(token_file)
        self.endpoint = endpoint
        parts = urlsplit(endpoint)
        self._origin = f"{parts.scheme}://{parts.netloc}"
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        self._target = target.encode()
        self.member_id = f"{gateway_id}/{secrets.token_hex(12)}"
        self._token_file = token_file
        self._reports = reports
        self._heartbeat = heartbeat
        self._send_timeout = send_timeout
        self._sequence = 0
        self._failing = False

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], reports: Counter) -> DemandReporter:
        """The reporter the environment asks for (only call it when the aggregator URL is set)."""
        return cls(
            environ.get(names.DEMAND_AGGREGATOR_URL, ""),
            environ.get(names.GATEWAY_ID, "") or default_gateway_id(),
            environ.get(names.DEMAND_AUTH_TOKEN_FILE, ""),
            reports,
        )

    async def run(self, feed: DemandSource) -> None:
        """Report until cancelled; on cancellation withdraw (report 0) before re-raising."""
        pool = UpstreamPool(self._origin, connect_timeout=self._send_timeout)
        try:
            await self._report_changes_and_heartbeats(pool, feed)
        except asyncio.CancelledError:
            await self._send(pool, 0)
            raise
        finally:
            await pool.close()

    async def _report_changes_and_heartbeats(self, pool: UpstreamPool, feed: DemandSource) -> None:
        changes = feed.subscribe()
        while True:
            try:
                async with asyncio.timeout(self._heartbeat):
                    demand = await anext(changes)
            except TimeoutError:
                demand = feed.current()
            await self._send(pool, demand)

    async def _send(self, pool: UpstreamPool, demand: int) -> None:
        """POST one report; count it as success only when the aggregator answers 204."""
        self._sequence += 1
        report = DemandReport(self.member_id, self._sequence, demand)
        try:
            status = await self._post(pool, report)
            problem = None if status == 204 else f"HTTP {status}"
        except TimeoutError:  # before OSError: it is one
            problem = f"no answer within {self._send_timeout:g} s"
        except UpstreamClosed:  # before OSError: its text speaks of a backend
            problem = "the aggregator closed the connection before answering"
        except (ValueError, OSError, ProtocolError, UpstreamTimeout) as exc:
            problem = describe_error(exc) or type(exc).__name__
        self._reports.labels(result="error" if problem else "success").inc()
        self._log_transition(problem)

    async def _post(self, pool: UpstreamPool, report: DemandReport) -> int:
        """The answer's status. A pooled connection the aggregator closed (it restarted, or idled
        it out) fails before any answer; the pool then retries once on a fresh connection, as it
        does for any request marked idempotent. A report is: the aggregator applies each
        sequence number at most once."""
        token = await asyncio.to_thread(read_demand_token, self._token_file)
        headers = [
            (b"content-type", b"application/json"),
            (b"authorization", bearer(token)),
            (b"idempotency-key", b"%d" % report.sequence),
        ]
        async with (
            asyncio.timeout(self._send_timeout),
            pool.exchange("POST", self._target, headers, report.encode()) as reply,
        ):
            size = 0
            while size <= MAX_REPLY_BYTES and (chunk := await reply.read_chunk()):
                size += len(chunk)
            return reply.status

    def _log_transition(self, problem: str | None) -> None:
        """Log when reporting starts or stops failing, not every 2 s while it stays the same."""
        if problem and not self._failing:
            _log.warning("demand report to %s failed: %s", self.endpoint, problem)
        elif not problem and self._failing:
            _log.info("demand reports to %s succeed again", self.endpoint)
        self._failing = problem is not None


def default_gateway_id() -> str:
    """`<hostname>-<pid>` when NOCTAYA_GATEWAY_ID is unset: distinct per process on one host."""
    return f"{socket.gethostname() or 'gateway'}-{os.getpid()}"
