"""KV-cache use of the ready backend pods: the metric KEDA gets for `kvCacheUtil` scaling.

Each ready pod's engine gauge (a 0–1 fraction, as vLLM's `vllm:kv_cache_usage_perc`) is read
from the pod itself, never through the Service, so every pod is counted exactly once; the sum in
percent goes to KEDA, whose HPA divides it by the per-replica target (AverageValue:
`desired = ceil(sum / target)`).

The engine is not trusted: a pod whose answer is slow, endless, oversized, not HTTP 200, lacks
the gauge or holds anything but a finite fraction from 0 to 1 adds nothing this time, is logged
once until it answers well again and is counted in the discard counter. A reading lasts one
scrape period, and callers that ask during a scrape share it, so KEDA's polls and several
scaler calls cost each pod at most one request per period.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Collection, Sequence
from typing import Protocol

from noctaya.gateway.metrics.exposition import Counter
from noctaya.gateway.scaler.kv_cache_settings import KvCacheSettings
from noctaya.gateway.upstream import ProtocolError, UpstreamError, UpstreamPool

Addresses = Callable[[], Collection[str]]
"""The IP addresses of the backend's ready pods now (the EndpointSlice watch's view)."""


class PodEndpoint(Protocol):
    @property
    def address(self) -> str: ...
    @property
    def ready(self) -> bool: ...


class PodEndpoints(Protocol):
    """The backend's pods as an EndpointSlice watch follows them (`backend.endpoints`)."""

    def endpoints(self) -> Sequence[PodEndpoint]: ...


def ready_addresses(pods: PodEndpoints) -> Addresses:
    """The ready pods' addresses, each once though several slices name it."""
    return lambda: {endpoint.address for endpoint in pods.endpoints() if endpoint.ready}


SCRAPE_TIMEOUT = 2.0
"""Seconds one pod's whole answer may take: well inside KEDA's 5 s polling interval."""
SCRAPE_PERIOD = 2.0
"""Seconds a reading is served before the pods are asked again."""
MAX_BODY = 1 << 20
"""Bytes of exposition read from one pod; vLLM's is a few tens of KiB."""

_log = logging.getLogger(__name__)


class _Discarded(Exception):
    """A pod's answer that adds nothing to the sum; the message is the counter's reason."""


class KvCacheReader:
    def __init__(
        self,
        addresses: Addresses,
        port: int,
        path: str,
        metric: str,
        discarded: Counter,
        *,
        timeout: float = SCRAPE_TIMEOUT,
        period: float = SCRAPE_PERIOD,
    ) -> None:
        """`discarded` has one label, `reason`."""
        self._addresses = addresses
        self._port = port
        self._target = ("/" + path.lstrip("/")).encode("ascii")
        self._metric = metric.encode("ascii")
        self._discarded = discarded
        self._timeout = timeout
        self._period = period
        self._pools: dict[str, UpstreamPool] = {}
        self._complaints: dict[str, str] = {}
        self._percent = 0.0
        self._fresh_until = float("-inf")
        self._scrape: asyncio.Task[float] | None = None

    @classmethod
    def of_pods(
        cls, pods: PodEndpoints, settings: KvCacheSettings, discarded: Counter
    ) -> KvCacheReader:
        """The reader a scaler serves: the ready pods of `pods`, where `settings` say."""
        return cls(ready_addresses(pods), settings.port, settings.path, settings.metric, discarded)

    async def current(self) -> float:
        """The summed KV-cache use of the ready pods, in percent of one pod's cache."""
        loop = asyncio.get_running_loop()
        if loop.time() < self._fresh_until:
            return self._percent
        if self._scrape is None:
            self._scrape = loop.create_task(self._read_all())
        # Shielded: a caller that gives up must not cancel the reading the others wait for.
        return await asyncio.shield(self._scrape)

    async def close(self) -> None:
        if self._scrape is not None:
            self._scrape.cancel()
            await asyncio.gather(self._scrape, return_exceptions=True)
        for pool in self._pools.values():
            await pool.close()
        self._pools.clear()

    async def _read_all(self) -> float:
        try:
            addresses = set(self._addresses())
            for gone in self._pools.keys() - addresses:
                await self._pools.pop(gone).close()
                self._complaints.pop(gone, None)
            readings = await asyncio.gather(*(self._read(address) for address in addresses))
            self._percent = 100.0 * sum(reading for reading in readings if reading is not None)
            self._fresh_until = asyncio.get_running_loop().time() + self._period
            return self._percent
        finally:
            self._scrape = None

    async def _read(self, address: str) -> float | None:
        """One pod's fraction, None when its answer is discarded."""
        try:
            async with asyncio.timeout(self._timeout):
                body = await self._exposition(address)
            fraction = gauge_value(body, self._metric)
        except TimeoutError:
            self._discard(address, "timeout")
        except ProtocolError as error:
            self._discard(address, "protocol", str(error))
        except UpstreamError as error:
            self._discard(address, "unreachable", str(error) or type(error).__name__)
        except _Discarded as error:
            self._discard(address, str(error))
        else:
            if self._complaints.pop(address, None) is not None:
                _log.info("reading the KV-cache gauge of backend pod %s again", address)
            return fraction
        return None

    async def _exposition(self, address: str) -> bytes:
        pool = self._pools.get(address)
        if pool is None:
            host = f"[{address}]" if ":" in address else address
            pool = UpstreamPool(
                f"http://{host}:{self._port}",
                connect_timeout=self._timeout,
                read_timeout=self._timeout,
                head_timeout=self._timeout,
            )
            self._pools[address] = pool
        async with pool.exchange("GET", self._target, [(b"accept", b"text/plain")]) as response:
            if response.status != 200:
                raise _Discarded("status")
            parts: list[bytes] = []
            size = 0
            while chunk := await response.read_chunk():
                size += len(chunk)
                if size > MAX_BODY:
                    raise _Discarded("oversized")
                parts.append(chunk)
        return b"".join(parts)

    def _discard(self, address: str, reason: str, detail: str = "") -> None:
        self._discarded.labels(reason=reason).inc()
        if self._complaints.get(address) != reason:
            self._complaints[address] = reason
            metric = self._metric.decode()
            shown = f": {detail}" if detail else ""
            _log.warning(
                "discarded the %s reading of backend pod %s (%s%s)", metric, address, reason, shown
            )


def gauge_value(exposition: bytes, metric: bytes) -> float:
    """The fraction `metric` reports in a Prometheus text exposition: the mean of its series
    (an engine with several workers in one pod reports one each), each a finite 0 to 1."""
    values = []
    for line in exposition.split(b"\n"):
        if not line.startswith(metric):
            continue
        rest = line[len(metric) :]
        if rest.startswith(b"{"):
            rest = rest[_labels_end(rest) :]
        elif not rest.startswith((b" ", b"\t")):
            continue  # another metric whose name begins with this one
        fields = rest.split()
        try:
            value = float(fields[0]) if fields else math.nan
        except ValueError:
            raise _Discarded("malformed") from None
        if not (math.isfinite(value) and 0.0 <= value <= 1.0):
            raise _Discarded("out_of_range")
        values.append(value)
    if not values:
        raise _Discarded("missing")
    return sum(values) / len(values)


def _labels_end(labels: bytes) -> int:
    """Where the `{…}` at the start of `labels` ends, quoted `}` and `\\"` skipped."""
    quoted = escaped = False
    for index, byte in enumerate(labels):
        if escaped:
            escaped = False
        elif byte == 0x5C:  # backslash
            escaped = quoted
        elif byte == 0x22:  # double quote
            quoted = not quoted
        elif byte == 0x7D and not quoted:  # closing brace
            return index + 1
    raise _Discarded("malformed")
