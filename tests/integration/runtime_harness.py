"""Helpers for the controller-runtime tests: a manager on a thread, a reconcile recorder."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s_client
from noctaya.k8s.runtime import InformerTiming, Manager, ObjectKey

FAST = InformerTiming(retry_initial=0.05, retry_max=0.5, absent_kind_retry=0.3)
WAIT = 30.0
_POLL = 0.01


def wait_until(condition: Callable[[], bool], timeout: float = WAIT) -> None:
    """Poll `condition` until it holds; fail the test after `timeout`."""
    pause = threading.Event()
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        pause.wait(_POLL)


def config_map(name: str, data: dict[str, str], labels: dict[str, str] | None = None) -> Any:
    return k8s_client.V1ConfigMap(
        metadata=k8s_client.V1ObjectMeta(name=name, labels=labels), data=data
    )


@dataclass(frozen=True)
class Reconcile:
    key: ObjectKey
    by: str
    started: float
    ended: float


class Reconciles:
    """A reconciler that records every call (who, which key, when) and can be slowed down."""

    def __init__(self, hold: float = 0.0) -> None:
        self.calls: list[Reconcile] = []
        self.hold = hold
        self._changed = threading.Condition()

    def reconciler(self, by: str, also: Callable[[ObjectKey], None] = lambda key: None) -> Any:
        """The reconcile callable for the manager named `by`; `also` runs inside it (may raise)."""

        def reconcile(key: ObjectKey) -> None:
            started = time.monotonic()
            try:
                if self.hold:
                    threading.Event().wait(self.hold)
                also(key)
            finally:
                with self._changed:
                    self.calls.append(Reconcile(key, by, started, time.monotonic()))
                    self._changed.notify_all()

        return reconcile

    def keys(self, by: str | None = None) -> list[ObjectKey]:
        with self._changed:
            return [call.key for call in self.calls if by is None or call.by == by]

    def wait_for(self, condition: Callable[[list[Reconcile]], bool]) -> list[Reconcile]:
        with self._changed:
            met = self._changed.wait_for(lambda: condition(self.calls), timeout=WAIT)
            assert met, f"reconciles never met the condition; got {self.calls}"
            return list(self.calls)

    def wait_for_key(self, key: ObjectKey, by: str | None = None, times: int = 1) -> None:
        self.wait_for(
            lambda calls: sum(c.key == key and by in (None, c.by) for c in calls) >= times
        )


class RunningManager:
    """`Manager.run` on a thread; `stop` returns whatever `run` raised."""

    def __init__(self, manager: Manager, reconcile: Callable[[ObjectKey], None]) -> None:
        self.manager = manager
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(reconcile,), daemon=True)
        self.finished = threading.Event()

    def start(self) -> RunningManager:
        self._thread.start()
        return self

    def stop(self, timeout: float = WAIT) -> BaseException | None:
        self.manager.stop()
        return self.join(timeout)

    def join(self, timeout: float = WAIT) -> BaseException | None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"Manager.run still running after {timeout}s"
        return self.error

    def _run(self, reconcile: Callable[[ObjectKey], None]) -> None:
        try:
            self.manager.run(reconcile, handle_signals=False)
        except BaseException as error:  # handed to the test through stop()/join()
            self.error = error
        finally:
            self.finished.set()
