"""Multi-gateway demand reporter: how one replica's demand reaches the aggregator.

A report goes out on every demand change, so a cold request reaches KEDA in one round trip, and
at least every 2 s otherwise, so the aggregator (which forgets a silent member after 10 s) keeps
counting a live replica and rebuilds its total within one heartbeat after a restart. Sends are
serialized; changes made during a slow send coalesce into the next one (latest value wins).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from collections.abc import Mapping

import aiohttp
from noctaya.core.plan import gateway_env as names
from noctaya.gateway.aggregator.protocol import DemandReport, bearer, read_demand_token
from noctaya.gateway.config import is_absolute_http_url
from noctaya.gateway.scaler.service import DemandSource
from prometheus_client import Counter

HEARTBEAT_SECONDS = 2.0
SEND_TIMEOUT_SECONDS = 1.0
# An answer is a status, with at most a one-line error text: reading more could only fill memory.
# A longer body is left unread, and aiohttp then closes the connection instead of reusing it.
MAX_REPLY_BYTES = 4096

_log = logging.getLogger(__name__)

# A pooled connection the aggregator closed (it restarted, or idled it out) fails before any
# response; one immediate retry on a fresh connection keeps that from costing a heartbeat.
_STALE_CONNECTION_ERRORS = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)


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
        async with aiohttp.ClientSession(
            trust_env=False, timeout=aiohttp.ClientTimeout(total=self._send_timeout)
        ) as session:
            try:
                await self._report_changes_and_heartbeats(session, feed)
            except asyncio.CancelledError:
                await self._send(session, 0)
                raise

    async def _report_changes_and_heartbeats(
        self, session: aiohttp.ClientSession, feed: DemandSource
    ) -> None:
        changes = feed.subscribe()
        change = asyncio.ensure_future(anext(changes))
        try:
            while True:
                done, _ = await asyncio.wait((change,), timeout=self._heartbeat)
                if done:
                    demand = change.result()
                    change = asyncio.ensure_future(anext(changes))
                else:
                    demand = feed.current()
                await self._send(session, demand)
        finally:
            change.cancel()
            await asyncio.wait((change,))
            aclose = getattr(changes, "aclose", None)
            if aclose is not None:
                await aclose()

    async def _send(self, session: aiohttp.ClientSession, demand: int) -> None:
        """POST one report; count it as success only when the aggregator answers 204."""
        self._sequence += 1
        report = DemandReport(self.member_id, self._sequence, demand)
        try:
            status = await self._post(session, report)
            problem = None if status == 204 else f"HTTP {status}"
        except TimeoutError:  # before ClientError: aiohttp's own timeouts are both
            problem = f"no answer within {self._send_timeout:g} s"
        except (ValueError, aiohttp.ClientError) as exc:
            problem = str(exc) or type(exc).__name__
        self._reports.labels(result="error" if problem else "success").inc()
        self._log_transition(problem)

    async def _post(self, session: aiohttp.ClientSession, report: DemandReport) -> int:
        headers = {
            "Content-Type": "application/json",
            "Authorization": bearer(read_demand_token(self._token_file)).decode(),
        }
        body = report.encode()
        async with asyncio.timeout(self._send_timeout):
            try:
                return await _post_once(session, self.endpoint, body, headers)
            except _STALE_CONNECTION_ERRORS:
                return await _post_once(session, self.endpoint, body, headers)

    def _log_transition(self, problem: str | None) -> None:
        """Log when reporting starts or stops failing, not every 2 s while it stays the same."""
        if problem and not self._failing:
            _log.warning("demand report to %s failed: %s", self.endpoint, problem)
        elif not problem and self._failing:
            _log.info("demand reports to %s succeed again", self.endpoint)
        self._failing = problem is not None


async def _post_once(
    session: aiohttp.ClientSession, url: str, body: bytes, headers: Mapping[str, str]
) -> int:
    async with session.post(url, data=body, headers=headers) as reply:
        await reply.content.read(MAX_REPLY_BYTES)
        return reply.status


def default_gateway_id() -> str:
    """`<hostname>-<pid>` when NOCTAYA_GATEWAY_ID is unset: distinct per process on one host."""
    return f"{socket.gethostname() or 'gateway'}-{os.getpid()}"
