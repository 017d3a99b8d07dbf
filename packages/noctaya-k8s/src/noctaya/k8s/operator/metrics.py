"""The controller's Prometheus metrics, under controller-runtime's names.

Dashboards and alerts written for kubebuilder operators (`controller_runtime_reconcile_total`,
`workqueue_depth`, `leader_election_master_status`) work unchanged. A registry of its own keeps
what `/metrics` serves to exactly these series plus the process collector.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from noctaya.k8s.runtime import LEADER_ELECTION_ID, Manager, ObjectKey, Reconciler
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

CONTROLLER = "llmservice"
# Reconcile-time buckets, 5 ms to 60 s: those the dashboards above were written against.
RECONCILE_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8,
    0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30,
    40, 50, 60,
)  # fmt: skip


class ControllerMetrics:
    def __init__(self, controller: str = CONTROLLER) -> None:
        self.controller = controller
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        self._total = Counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            ("controller", "result"),
            registry=self.registry,
        )
        self._errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            ("controller",),
            registry=self.registry,
        )
        self._seconds = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ("controller",),
            buckets=RECONCILE_BUCKETS,
            registry=self.registry,
        )
        self._depth = Gauge(
            "workqueue_depth", "Current depth of workqueue", ("name",), registry=self.registry
        )
        self._leader = Gauge(
            "leader_election_master_status",
            "Whether this replica leads (1) or stands by (0)",
            ("name",),
            registry=self.registry,
        )
        for result in ("success", "error"):
            self._total.labels(controller, result)  # both series exist from the start at 0
        self._errors.labels(controller)

    def instrument(self, reconcile: Reconciler) -> Reconciler:
        """`reconcile`, counted by result and timed; exceptions pass through to the manager."""
        total = self._total.labels(self.controller, "success")
        failed = self._total.labels(self.controller, "error")
        errors = self._errors.labels(self.controller)
        seconds = self._seconds.labels(self.controller)

        def instrumented(key: ObjectKey) -> None:
            started = time.perf_counter()
            try:
                reconcile(key)
            except Exception:
                failed.inc()
                errors.inc()
                raise
            else:
                total.inc()
            finally:
                seconds.observe(time.perf_counter() - started)

        return instrumented

    def observe_manager(self, manager: Manager, lease_name: str = LEADER_ELECTION_ID) -> None:
        """Queue depth and leadership, read from the manager whenever metrics are collected."""
        self._depth.labels(self.controller).set_function(_as_float(lambda: len(manager.queue)))
        self._leader.labels(lease_name).set_function(_as_float(lambda: manager.is_leader))

    def reconciles(self, result: str) -> float:
        """How many reconciles ended with `result` ("success" or "error") so far."""
        value = self.registry.get_sample_value(
            "controller_runtime_reconcile_total", {"controller": self.controller, "result": result}
        )
        return value or 0.0


def _as_float(read: Callable[[], int | bool]) -> Callable[[], float]:
    return lambda: float(read())
