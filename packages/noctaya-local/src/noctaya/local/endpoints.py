"""Where clients reach local mode: the shared endpoint every service is served on, and a
service's own endpoint when its file asks for one; each holds its port (`port_claims`) for as
long as it listens, so a second local mode, or a gateway, cannot take it meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable

from noctaya.core.values.listen_address import parse_listen_address
from noctaya.gateway.process.addresses import with_port
from noctaya.gateway.process.config import GatewayConfig
from noctaya.gateway.server.hypercorn_config import hypercorn_config
from noctaya.gateway.server.listen_socket import listen_socket, serve_on
from noctaya.local.admission import Admitted
from noctaya.local.errors import LocalRunError
from noctaya.local.port_claims import PortClaims, PortUse, endpoint_use, own_endpoint_use
from noctaya.local.router import LocalEndpoint
from noctaya.local.routes import RouteTable
from noctaya.local.workloads import client_host_port


class Endpoint:
    """One listening endpoint served by hypercorn."""

    def __init__(self, app: LocalEndpoint, listen: str) -> None:
        self.app = app
        self.listen = listen
        self.url = ""
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        try:
            sock = listen_socket(self.listen)
        except OSError as error:
            raise LocalRunError(str(error)) from None
        bound = with_port(self.listen, sock.getsockname()[1])
        self.url = f"http://{client_host_port(bound)}/v1"
        config = hypercorn_config(GatewayConfig(backend_url="http://127.0.0.1"))
        self._task = serve_on(sock, self.app, config, self._stop.wait)

    def begin_stop(self) -> None:
        self._stop.set()

    async def stopped(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task


class Endpoints:
    """The shared endpoint and the services' own, all answering from one route table."""

    def __init__(
        self,
        routes: RouteTable,
        metrics: Callable[[], Awaitable[str]],
        listen: str,
        api_key_file: str | None,
    ) -> None:
        self._routes = routes
        self._metrics = metrics
        self._api_key_file = api_key_file
        self.shared = Endpoint(LocalEndpoint(routes, metrics, api_key_file=api_key_file), listen)
        self._claims = PortClaims()
        self._own: dict[str, tuple[Endpoint, PortClaims]] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def start_shared(self, files: str) -> None:
        """Claim the shared endpoint's port (unless it is chosen at bind) and listen."""
        listen = self.shared.listen
        _, port = parse_listen_address(listen)
        if port:
            self._claims.claim(port, PortUse("", endpoint_use(listen), os.getpid(), files))
        self.shared.start()

    def url_of(self, name: str) -> str:
        """The URL a client of service `name` uses: its own endpoint's, else the shared one's."""
        own = self._own.get(name)
        return own[0].url if own is not None else self.shared.url

    def open_own(self, admitted: Admitted) -> None:
        """Each service's own endpoint as `admitted` has it: new ones listening, moved ones
        moved, dropped ones closing; if one cannot listen (LocalRunError), those opened here
        close again."""
        opened: list[str] = []
        try:
            for name, plan in admitted.plans.items():
                current = self._own.get(name)
                if current is not None and current[0].listen == plan.own_listen:
                    continue
                if plan.own_listen is not None:
                    endpoint = self._open(name, plan.own_listen, admitted.sources[name])
                    self.close_own(name)
                    self._own[name] = endpoint
                    opened.append(name)
                else:
                    self.close_own(name)
        except LocalRunError:
            for name in opened:
                self.close_own(name)
            raise

    def _open(self, name: str, listen: str, source: str) -> tuple[Endpoint, PortClaims]:
        claims = PortClaims()
        _, port = parse_listen_address(listen)
        claims.claim(port, PortUse(name, own_endpoint_use(listen), os.getpid(), source))
        app = LocalEndpoint(
            self._routes, self._metrics, service=name, api_key_file=self._api_key_file
        )
        endpoint = Endpoint(app, listen)
        try:
            endpoint.start()
        except LocalRunError:
            claims.release()
            raise
        return endpoint, claims

    def close_own(self, name: str) -> None:
        """Stop service `name`'s own endpoint, if it has one, releasing its port once closed."""
        current = self._own.pop(name, None)
        if current is None:
            return
        endpoint, claims = current

        async def close() -> None:
            await endpoint.stopped()
            claims.release()

        task = asyncio.ensure_future(close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def phases_changed(self) -> None:
        """Held streams on every endpoint hear what their service is doing now."""
        self.shared.app.phases_changed()
        for endpoint, _ in self._own.values():
            endpoint.app.phases_changed()

    def begin_stop(self) -> None:
        """Stop accepting on every endpoint; requests in progress go on."""
        self.shared.begin_stop()
        for endpoint, _ in self._own.values():
            endpoint.begin_stop()

    async def close(self) -> None:
        """Every endpoint stopped and every port released."""
        await self.shared.stopped()
        for name in list(self._own):
            self.close_own(name)
        while self._closing:
            await asyncio.wait(set(self._closing))
        self._claims.release()
