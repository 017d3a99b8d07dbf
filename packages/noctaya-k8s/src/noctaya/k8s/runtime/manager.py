"""The controller process: informers -> event handlers -> work queue -> reconcile workers.

Threads, not asyncio: the `kubernetes` client is synchronous (every call blocks a thread, and
its watches are blocking reads), and so is the reconciler written against it. With asyncio
every API call would go through `to_thread` anyway; plain threads (one per informer, N
workers, the elector and the probe server) say the same thing with less machinery.

Lifecycle of `run`:
1. Probe server up; informers start at once, also on standby replicas, so that a replica that
   wins the election already has warm caches and a queue holding every key.
2. With leader election, wait for the Lease; then wait until every cache has synced; then start
   the workers.
3. On `stop()` (SIGTERM/SIGINT): stop the watches, let workers finish the key in hand (no new
   ones), and only then release the Lease (renewing it meanwhile), so the standby starts right
   away but never while this replica is still writing.
4. Leadership lost (no renewal within the renew deadline): workers take no new key at once, the
   process shuts down as above (without releasing), and `run` raises `LeadershipLost` for the
   entry point to exit non-zero: the container restarts as a standby, with nothing kept from
   its time as leader.
"""

from __future__ import annotations

import copy
import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType

from kubernetes.client import ApiClient

from .handlers import EnqueueMapped, Mapper, UpdatePredicate, own_key
from .health import HealthServer, parse_probe_address
from .informer import Informer, InformerTiming, WatchTarget
from .leader_election import LeaderElectionConfig, LeaderElector
from .resources import ResourceKind, ResourceResolver
from .store import ObjectKey, Store
from .workqueue import DEFAULT_BASE_DELAY, DEFAULT_MAX_DELAY, ExponentialBackoff, WorkQueue

log = logging.getLogger(__name__)

Reconciler = Callable[[ObjectKey], None]
"""Brings the world in line with the object at `(namespace, name)`; raise to retry with backoff."""

INFORMER_STOP_TIMEOUT = 10.0  # for all of them together
WATCH_CONNECTIONS = 64  # room for one long-lived connection per watch; each worker adds one
DEFAULT_WORKERS = 8
"""Reconciles run at once: each mostly waits on the API server, so more than the cores help."""


class LeadershipLost(Exception):
    """The Lease could not be renewed in time; this replica stopped reconciling."""


@dataclass(frozen=True)
class ManagerOptions:
    workers: int = DEFAULT_WORKERS
    leader_election: LeaderElectionConfig | None = None
    health_probe_address: str = ":8081"  # host:port, no host for all interfaces; "0" disables
    informer_timing: InformerTiming = field(default_factory=InformerTiming)
    retry_base_delay: float = DEFAULT_BASE_DELAY
    retry_max_delay: float = DEFAULT_MAX_DELAY
    shutdown_timeout: float = 30.0  # how long workers may take to finish their key

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, got {self.workers}")
        parse_probe_address(self.health_probe_address)  # raises ValueError naming the address


class Manager:
    """Register watches with `watch`, then `run(reconcile)` until stopped."""

    def __init__(self, api_client: ApiClient, options: ManagerOptions | None = None) -> None:
        self.options = options or ManagerOptions()
        self.api_client = _client_for_watches(api_client, self.options.workers)
        # Discovery for the watches, and for the reconciler's own DynamicClient calls: the
        # DynamicClient's discovery cache is not thread-safe, the resolver serializes it.
        self.resolver = ResourceResolver(
            self.api_client, not_served_ttl=self.options.informer_timing.absent_kind_retry
        )
        self.queue: WorkQueue[ObjectKey] = WorkQueue(
            ExponentialBackoff(self.options.retry_base_delay, self.options.retry_max_delay)
        )
        self._informers: dict[WatchTarget, Informer] = {}
        self._state = threading.Condition()
        self._stop_requested = False
        self._lost = False
        self._started = False
        self._leading = self.options.leader_election is None  # no election: always leads
        self.reconciling = threading.Event()  # set while workers take keys
        self._health: HealthServer | None = None
        self._elector: LeaderElector | None = None
        if self.options.leader_election is not None:
            self._elector = LeaderElector(
                self.api_client,
                self.options.leader_election,
                on_started_leading=self._on_started_leading,
                on_lost_leadership=self._on_lost_leadership,
            )

    @property
    def identity(self) -> str | None:
        """The leader-election identity (`<hostname>_<uuid>`), None without leader election."""
        return None if self._elector is None else self._elector.identity

    @property
    def is_leader(self) -> bool:
        return self._elector is None or self._elector.is_leader

    @property
    def probe_port(self) -> int | None:
        """The port serving /healthz and /readyz while running (useful with a `:0` address)."""
        return None if self._health is None else self._health.port

    def watch(
        self,
        api_version: str,
        kind: str,
        *,
        to_keys: Mapper = own_key,
        update_predicate: UpdatePredicate | None = None,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        forbidden_is_empty: bool = False,
    ) -> Store:
        """Watch `kind` and enqueue `to_keys(obj)` for each add, update and delete.

        Updates rejected by `update_predicate(old, new)` enqueue nothing. Watches of the same
        kind, namespace and selectors share one informer. Returns its cache for lookups, e.g. in
        a mapper or the reconciler. `forbidden_is_empty`: a kind the client may be refused to
        list reads as empty rather than holding up the start (`WatchTarget`).
        """
        if self._started:
            raise RuntimeError("register watches before Manager.run")
        target = WatchTarget(
            ResourceKind(api_version, kind),
            namespace,
            label_selector,
            field_selector,
            forbidden_is_empty,
        )
        informer = self._informers.get(target)
        if informer is None:
            informer = Informer(self.resolver, target, self.options.informer_timing)
            self._informers[target] = informer
        informer.add_handler(EnqueueMapped(self.queue, to_keys, update_predicate))
        return informer.store

    def stop(self) -> None:
        """Ask `run` to shut down gracefully; safe from signal handlers and other threads."""
        with self._state:
            self._stop_requested = True
            self._state.notify_all()

    def run(self, reconcile: Reconciler, *, handle_signals: bool = True) -> None:
        """Reconcile until `stop()` or SIGTERM/SIGINT; raise LeadershipLost if the Lease is lost."""
        if self._started:
            raise RuntimeError("a Manager runs once")
        self._started = True
        restore_signals = self._install_signal_handlers() if handle_signals else None
        elector_stop = threading.Event()
        elector_thread: threading.Thread | None = None
        workers: list[threading.Thread] = []
        try:
            self._health = self._start_health_server()
            for informer in self._informers.values():
                informer.start()
            if self._elector is not None:
                elector_thread = threading.Thread(
                    target=self._elector.run, args=(elector_stop,), name="leader election"
                )
                elector_thread.start()
                log.info("waiting for leadership as %s", self._elector.identity)
            if self._wait_for(lambda: self._leading) and self._wait_for_caches():
                workers = [
                    threading.Thread(target=self._work, args=(reconcile,), name=f"worker {n}")
                    for n in range(self.options.workers)
                ]
                for worker in workers:
                    worker.start()
                self.reconciling.set()
                log.info("reconciling with %d workers", len(workers))
                self._wait_for(lambda: False)
        finally:
            self._shut_down(workers, elector_stop, elector_thread)
            if self._health is not None:
                self._health.stop()
                self._health = None
            if restore_signals is not None:
                restore_signals()
        if self._lost:
            raise LeadershipLost("leader election lost: the Lease was not renewed in time")

    def _shut_down(
        self,
        workers: list[threading.Thread],
        elector_stop: threading.Event,
        elector_thread: threading.Thread | None,
    ) -> None:
        log.info("shutting down: stopping watches and draining workers")
        self.queue.shut_down()
        deadline = time.monotonic() + INFORMER_STOP_TIMEOUT
        for informer in self._informers.values():
            informer.stop(max(0.0, deadline - time.monotonic()))
        for worker in workers:
            worker.join(self.options.shutdown_timeout)
            if worker.is_alive():
                log.warning(
                    "%s still reconciling after %.0fs", worker.name, self.options.shutdown_timeout
                )
        self.reconciling.clear()
        elector_stop.set()
        if elector_thread is not None:
            elector_thread.join()
        # A worker stuck past the timeout may still write: then let the Lease expire instead.
        if self._elector is not None and not any(worker.is_alive() for worker in workers):
            self._elector.release()

    def _work(self, reconcile: Reconciler) -> None:
        while (key := self.queue.get()) is not None:
            try:
                reconcile(key)
            except Exception:
                log.exception(
                    "reconcile of %s/%s failed (failure %d); retrying with backoff",
                    key[0],
                    key[1],
                    self.queue.failures(key) + 1,
                )
                self.queue.add_rate_limited(key)
            else:
                self.queue.forget(key)
            finally:
                self.queue.done(key)

    def _wait_for(self, condition: Callable[[], bool]) -> bool:
        """Block until `condition()` or a stop; False when stopping."""
        with self._state:
            self._state.wait_for(lambda: condition() or self._stop_requested)
            return not self._stop_requested

    def _wait_for_caches(self) -> bool:
        for informer in self._informers.values():
            while not informer.wait_synced(0.1):
                with self._state:
                    if self._stop_requested:
                        return False
        return True

    def _on_started_leading(self) -> None:
        with self._state:
            self._leading = True
            self._state.notify_all()

    def _on_lost_leadership(self) -> None:
        self.queue.shut_down()  # fail-safe: no new reconcile starts from this moment
        with self._state:
            self._lost = True
            self._stop_requested = True
            self._state.notify_all()

    def _start_health_server(self) -> HealthServer | None:
        if parse_probe_address(self.options.health_probe_address) is None:
            return None
        server = HealthServer(self.options.health_probe_address)
        server.start()
        return server

    def _install_signal_handlers(self) -> Callable[[], None] | None:
        if threading.current_thread() is not threading.main_thread():
            return None

        def request_stop(signum: int, _frame: FrameType | None) -> None:
            log.info("received %s; shutting down", signal.Signals(signum).name)
            self.stop()

        previous = {
            sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)
        }

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore


def _client_for_watches(api_client: ApiClient, workers: int) -> ApiClient:
    """A client like `api_client` with a kept connection for every watch and worker, and TCP
    keepalive: past the pool's size urllib3 opens and then drops a connection per request."""
    configuration = copy.deepcopy(api_client.configuration)
    configuration.connection_pool_maxsize = max(
        configuration.connection_pool_maxsize or 0, WATCH_CONNECTIONS + workers
    )
    configuration.keep_alive = True
    return ApiClient(configuration)
