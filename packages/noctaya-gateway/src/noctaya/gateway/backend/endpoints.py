"""The backend's pods as the gateway follows them: a list-and-watch of the EndpointSlices of the
backend Service (`NOCTAYA_BACKEND_ENDPOINTS`, `<namespace>/<service>`), over `kube_api`.

`EndpointWatch.endpoints()` is every pod address the slices name now, `on_change` registers a
callback run on the event loop after each change, and `state` says whether the watch works
(`WATCHING`) or the gateway uses the Service URL (`FALLBACK`, with a `reason`). The app holds
it as `GatewayApp.endpoints` (None without `NOCTAYA_BACKEND_ENDPOINTS`), for the request path
(`replicas`) and for whatever else reads each pod (the KV-cache scraper).

The watch lists, then watches from the list's resourceVersion with bookmarks, one JSON event per
line, each line bounded (`MAX_EVENT`: a larger one breaks the watch, which lists again). A 410
Gone or a broken watch lists again after a backoff; while a list fails, the state is
`FALLBACK`. Where the watch cannot work (no token, no CA, 401 or 403: the platform took its RBAC
away), the state is `FALLBACK` too, said once in the log, and the watch is tried again every
`retry` seconds, so restored RBAC is picked up without a restart.

What is kept of a slice: only one labelled `kubernetes.io/service-name=<service>` (the label
selector asks for no other; one that slips through is ignored), only its port named `http` (the
backend Service's), and of each endpoint its first address, if it is an IP of the slice's
family. Such an address is sent requests whatever network it is on, as kube-proxy routes the
Service to it: whoever may write EndpointSlices in the namespace already chooses where the
Service's traffic goes, and the gateway adds no credential of its own to what it forwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import ipaddress
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from noctaya.gateway.backend.kube_api import ApiRefused, ApiStatus, KubeApi, status_ok
from noctaya.gateway.upstream import UpstreamError

if TYPE_CHECKING:
    from noctaya.gateway.process.config import BackendEndpoints

log = logging.getLogger("noctaya.gateway")

SERVICE_LABEL = "kubernetes.io/service-name"
PORT_NAME = "http"
MAX_EVENT = 4 * 1024 * 1024
"""The longest watch event line read: a full slice of 100 endpoints is well under 100 KiB."""
WATCH_SECONDS = 300
"""How long the API server keeps one watch open; the gateway watches again from where it was."""
BACKOFF = (0.2, 5.0)
"""The first and the longest wait before listing again after a broken watch or failed list."""
SHORT_WATCH = 1.0
"""A watch the server ended sooner than this is followed by the next one only after a backoff."""
_FAMILIES = {"IPv4": 4, "IPv6": 6}


@dataclass(frozen=True, slots=True)
class Endpoint:
    address: str
    port: int
    ready: bool
    serving: bool
    terminating: bool


class WatchState(enum.Enum):
    WATCHING = "watching"
    FALLBACK = "fallback"


class _Gone(Exception):
    """The watch's resourceVersion is too old: list again."""


_BROKEN = (_Gone, ApiStatus, ValueError, RecursionError, *UpstreamError)
"""What ends a list or a watch that is worth trying again soon."""


def slice_endpoints(item: Any, service: str) -> tuple[Endpoint, ...] | None:
    """The endpoints of one EndpointSlice document; None when it is not this Service's."""
    if not isinstance(item, dict):
        return None
    metadata = item.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    if not isinstance(labels, dict) or labels.get(SERVICE_LABEL) != service:
        return None
    family = _FAMILIES.get(item.get("addressType"))  # type: ignore[arg-type]
    port = _http_port(item.get("ports"))
    entries = item.get("endpoints")
    if family is None or port is None or not isinstance(entries, list):
        return ()
    found = []
    for entry in entries:
        address = _first_address(entry, family)
        if address is not None:
            conditions = entry.get("conditions")
            if not isinstance(conditions, dict):
                conditions = {}
            ready = conditions.get("ready") is not False  # unknown means ready (the API's rule)
            serving = conditions.get("serving")
            found.append(
                Endpoint(
                    address,
                    port,
                    ready=ready,
                    serving=ready if serving is None else serving is True,
                    terminating=conditions.get("terminating") is True,
                )
            )
    return tuple(found)


def _http_port(ports: Any) -> int | None:
    if not isinstance(ports, list):
        return None
    for port in ports:
        if isinstance(port, dict) and port.get("name") == PORT_NAME:
            number = port.get("port")
            if port.get("protocol", "TCP") == "TCP" and type(number) is int and 0 < number < 65536:
                return number
    return None


def _first_address(entry: Any, family: int) -> str | None:
    """Addresses of one endpoint are fungible: the first is the one used."""
    addresses = entry.get("addresses") if isinstance(entry, dict) else None
    if not isinstance(addresses, list) or not addresses or not isinstance(addresses[0], str):
        return None
    try:
        address = ipaddress.ip_address(addresses[0])
    except ValueError:
        return None
    return str(address) if address.version == family else None


class EndpointWatch:
    """Build it on the running loop, `start()` it, and `await close()` it."""

    def __init__(
        self,
        api: KubeApi | None,
        namespace: str,
        service: str,
        *,
        retry: float,
        state_changed: Callable[[WatchState], None] | None = None,
        unavailable: str = "",
    ) -> None:
        """`api` None: the watch cannot work, for the reason `unavailable` (no API server
        address); `state_changed` hears each change of `state` (the gauge)."""
        self._api = api
        self.namespace = namespace
        self.service = service
        self._retry = retry
        self._state_changed = state_changed
        self.state = WatchState.FALLBACK
        self.reason = unavailable or "not listed yet"
        self._slices: dict[str, tuple[Endpoint, ...]] = {}
        self._endpoints: tuple[Endpoint, ...] = ()
        self._listeners: list[Callable[[], None]] = []
        self._task: asyncio.Task[None] | None = None
        selector = quote(f"{SERVICE_LABEL}={service}", safe="")
        self._target = (
            f"/apis/discovery.k8s.io/v1/namespaces/{quote(namespace, safe='')}/endpointslices"
            f"?labelSelector={selector}"
        ).encode()

    @property
    def watching(self) -> bool:
        return self.state is WatchState.WATCHING

    def endpoints(self) -> tuple[Endpoint, ...]:
        """Every pod address of the backend the slices name now (empty before the first list)."""
        return self._endpoints

    def on_change(self, callback: Callable[[], None]) -> None:
        """`callback` runs after each change to `endpoints()` or `state`."""
        self._listeners.append(callback)

    def start(self) -> None:
        self._report(WatchState.FALLBACK, self.reason)
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._api is not None:
            self._api.close()

    async def _run(self) -> None:
        api = self._api
        if api is None:
            log.warning(
                "Noctaya gateway cannot follow the pods of %s/%s (%s): sending to the backend "
                "Service",
                self.namespace,
                self.service,
                self.reason,
            )
            return
        loop = asyncio.get_running_loop()
        backoff = BACKOFF[0]
        while True:
            try:
                await api.connect()
                version = await self._list(api)
                backoff = BACKOFF[0]
                while True:
                    began = loop.time()
                    version = await self._watch(api, version)
                    if loop.time() - began < SHORT_WATCH:  # never a busy loop of watches
                        await asyncio.sleep(backoff)
                        backoff = min(backoff * 2, BACKOFF[1])
                    else:
                        backoff = BACKOFF[0]
            except ApiRefused as error:
                self._fall_back(str(error))
                await asyncio.sleep(self._retry)
            except _BROKEN:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF[1])
            except Exception as error:  # a defect: the gateway serves on, through the Service
                if self.reason != f"unexpected {type(error).__name__}":
                    log.exception("EndpointSlice watch failed")
                self._fall_back(f"unexpected {type(error).__name__}")
                await asyncio.sleep(self._retry)

    async def _list(self, api: KubeApi) -> str:
        try:
            document = await api.get_json(self._target)
        except _BROKEN as error:
            self._fall_back(f"cannot list EndpointSlices: {error or type(error).__name__}")
            raise
        items = document.get("items") if isinstance(document, dict) else None
        metadata = document.get("metadata") if isinstance(document, dict) else None
        version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
        if not isinstance(items, list) or not isinstance(version, str):
            self._fall_back("the EndpointSlice list is malformed")
            raise ValueError("malformed EndpointSlice list")
        slices = {}
        for item in items:
            found = slice_endpoints(item, self.service)
            if found is not None:
                slices[item["metadata"].get("name", "")] = found
        self._slices = slices
        if self.state is not WatchState.WATCHING:
            log.info("Noctaya gateway following the pods of %s/%s", self.namespace, self.service)
            self._report(WatchState.WATCHING, "")
        self._changed()
        return version

    async def _watch(self, api: KubeApi, version: str) -> str:
        """Apply events until the watch ends; the resourceVersion to watch from next."""
        target = (
            self._target
            + (
                f"&watch=1&allowWatchBookmarks=true&timeoutSeconds={WATCH_SECONDS}"
                f"&resourceVersion={quote(version, safe='')}"
            ).encode()
        )
        async with await api.get(target) as response:
            if response.status == 410:
                raise _Gone
            status_ok(response.status)
            pending = bytearray()  # the start of a line whose end has not arrived
            while chunk := await response.read_chunk():
                lines = chunk.split(b"\n")
                pending += lines[0]
                if len(pending) > MAX_EVENT:
                    raise ValueError(f"a watch event is longer than {MAX_EVENT} bytes")
                if len(lines) == 1:
                    continue
                lines[0] = bytes(pending)
                pending = bytearray(lines.pop())
                for line in lines:
                    if line.strip():
                        version = self._apply(json.loads(line), version)
        return version

    def _apply(self, event: Any, version: str) -> str:
        kind = event.get("type") if isinstance(event, dict) else None
        item = event.get("object") if isinstance(event, dict) else None
        if kind == "ERROR":
            code = item.get("code") if isinstance(item, dict) else None
            if code == 410:
                raise _Gone
            raise ApiStatus(code if isinstance(code, int) else 500)
        metadata = item.get("metadata") if isinstance(item, dict) else None
        if not isinstance(metadata, dict):
            return version
        name = metadata.get("name")
        next_version = metadata.get("resourceVersion")
        if isinstance(next_version, str):
            version = next_version
        if kind == "BOOKMARK" or not isinstance(name, str):
            return version
        found = slice_endpoints(item, self.service) if kind != "DELETED" else None
        if found is None:
            if self._slices.pop(name, None) is not None:
                self._changed()
        elif self._slices.get(name) != found:
            self._slices[name] = found
            self._changed()
        return version

    def _changed(self) -> None:
        merged: dict[tuple[str, int], Endpoint] = {}
        for found in self._slices.values():
            for endpoint in found:
                key = (endpoint.address, endpoint.port)
                known = merged.get(key)
                if known is None or (endpoint.ready and not known.ready):
                    merged[key] = endpoint
        self._endpoints = tuple(merged.values())
        for listener in self._listeners:
            listener()

    def _fall_back(self, reason: str) -> None:
        if self.state is WatchState.FALLBACK and self.reason == reason:
            return
        log.warning(
            "Noctaya gateway cannot follow the pods of %s/%s (%s): sending to the backend "
            "Service until it can",
            self.namespace,
            self.service,
            reason,
        )
        self._report(WatchState.FALLBACK, reason)
        for listener in self._listeners:
            listener()

    def _report(self, state: WatchState, reason: str) -> None:
        self.state = state
        self.reason = reason
        if self._state_changed is not None:
            self._state_changed(state)


def follow(
    wanted: BackendEndpoints,
    retry: float,
    state_changed: Callable[[WatchState], None] | None = None,
) -> EndpointWatch:
    """The watch of `wanted`'s pods as a gateway or an aggregator runs it, not started: over
    the API server its environment names, else falling back and saying why."""
    api = None
    if wanted.api_url is not None:
        read_timeout = WATCH_SECONDS + 30.0  # the API server ends each watch itself
        api = KubeApi(wanted.api_url, wanted.token_file, wanted.ca_file, read_timeout)
    return EndpointWatch(
        api,
        wanted.namespace,
        wanted.service,
        retry=retry,
        state_changed=state_changed,
        unavailable="" if api is not None else "KUBERNETES_SERVICE_HOST is unset",
    )
