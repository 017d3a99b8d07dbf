"""What the fault tests look for in a timeline: a fault as the kubelet shows it in a pod's
status (or, for a volume, in its event), the status and Event the operator wrote about it, and
the seconds in between, collected into the table the session prints at its end."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from .timeline import Entry, Obj, Timeline

OPERATOR_EVENTS = "llmservice-controller"
BACKEND_LABEL = "serving.noctaya.io/llmservice"
RUNTIME_LABEL = "serving.noctaya.io/runtime"
GATEWAY_LABEL = "serving.noctaya.io/gateway"
REPORT_WITHIN = 15.0
"""Seconds the operator may take from a fault it can see to the status that reports it: it
acts on watch events, so it is normally well under one; the rest is room for a busy machine."""

FaultCheck = Callable[[Obj], bool]


@dataclass(frozen=True)
class FaultTiming:
    fault: str
    reported: str
    seconds: float


_TABLE = pytest.StashKey[list[FaultTiming]]()


def record_timing(config: pytest.Config, timing: FaultTiming) -> None:
    config.stash.setdefault(_TABLE, []).append(timing)


def timing_table(config: pytest.Config) -> list[str]:
    timings = config.stash.get(_TABLE, [])
    if not timings:
        return []
    rows = [("fault", "condition/reason seen", "seconds from fault to status")]
    rows += [(t.fault, t.reported, f"{t.seconds:.2f}") for t in timings]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return [" | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]


def container(pod: Obj, name: str) -> Obj:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return next((c for c in statuses if c.get("name") == name), {})


def waiting(name: str, *reasons: str) -> FaultCheck:
    return lambda pod: (
        ((container(pod, name).get("state") or {}).get("waiting") or {}).get("reason") in reasons
    )


def terminated_by(name: str, reason: str) -> FaultCheck:
    def check(pod: Obj) -> bool:
        found = container(pod, name)
        states = (found.get("state") or {}, found.get("lastState") or {})
        return any((state.get("terminated") or {}).get("reason") == reason for state in states)

    return check


def restarted(name: str, times: int) -> FaultCheck:
    return lambda pod: int(container(pod, name).get("restartCount") or 0) >= times


def unschedulable(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions
    )


def condition(service: Obj, kind: str) -> tuple[str, str, str]:
    for item in (service.get("status") or {}).get("conditions") or []:
        if item["type"] == kind:
            return item["status"], item.get("reason", ""), item.get("message", "")
    return "", "", ""


@dataclass
class Watched:
    """One service in a timeline: its pods' faults, its status and the operator's Events."""

    timeline: Timeline
    service: str
    config: pytest.Config

    def backend_pod(self, entry: Entry) -> bool:
        labels = entry.obj["metadata"].get("labels") or {}
        return (
            entry.kind == "Pod"
            and labels.get(BACKEND_LABEL) == self.service
            and RUNTIME_LABEL in labels
        )

    def gateway_pod(self, entry: Entry) -> bool:
        labels = entry.obj["metadata"].get("labels") or {}
        return entry.kind == "Pod" and labels.get(GATEWAY_LABEL) == self.service

    def status(self, entry: Entry) -> Obj | None:
        is_ours = entry.kind == "LLMService" and entry.name == self.service
        return entry.obj if is_ours else None

    def fault(self, what: str, check: FaultCheck, *, gateway: bool = False) -> Entry:
        tier = self.gateway_pod if gateway else self.backend_pod
        return self.timeline.wait(what, lambda e: tier(e) and check(e.obj))

    def reported(
        self,
        fault: Entry,
        what: str,
        *,
        kind: str,
        reason: str,
        status: str,
        phase: str | None,
        after: Entry | None = None,
    ) -> Obj:
        """The first status at or after `after` with condition `kind` at (`status`, `reason`)
        and the phase (None: any); checks it came within REPORT_WITHIN of the fault and records
        the timing."""
        since = after.at if after is not None else 0.0

        def matches(entry: Entry) -> bool:
            found = self.status(entry)
            return (
                found is not None
                and entry.at >= since
                and condition(found, kind)[:2] == (status, reason)
                and phase in (None, (found.get("status") or {}).get("phase"))
            )

        entry = self.timeline.wait(f"{self.service} to report {kind} {reason}", matches)
        seconds = max(0.0, entry.at - fault.at)
        record_timing(self.config, FaultTiming(what, f"{kind}={status}/{reason}", seconds))
        assert seconds <= REPORT_WITHIN, f"{reason} reported {seconds:.1f}s after the fault"
        return entry.obj

    def operator_event(self, entry: Entry) -> bool:
        """An Event the operator recorded about this service."""
        event = entry.obj
        return (
            entry.kind == "Event"
            and event.get("reportingComponent") == OPERATOR_EVENTS
            and (event.get("involvedObject") or {}).get("name") == self.service
        )

    def event(self, reason: str, type_: str = "Warning", after: float = 0.0) -> Obj:
        """The operator's Event about the service with this reason (seen at or after `after`)."""

        def matches(entry: Entry) -> bool:
            return (
                self.operator_event(entry)
                and entry.at >= after
                and entry.obj.get("reason") == reason
                and entry.obj.get("type") == type_
            )

        return self.timeline.wait(f"a {type_} {reason} Event on {self.service}", matches).obj

    def operator_warnings(self) -> list[str]:
        return [
            str(entry.obj.get("reason"))
            for entry in self.timeline.entries()
            if self.operator_event(entry) and entry.obj.get("type") == "Warning"
        ]

    def serves_again(self, after: float) -> Obj:
        """`Degraded=False` and an available gateway again (Ready's reason is no longer
        GatewayUnavailable), whatever the backend does meanwhile."""

        def matches(entry: Entry) -> bool:
            found = self.status(entry)
            return (
                found is not None
                and entry.at >= after
                and condition(found, "Degraded")[0] == "False"
                and condition(found, "Ready")[1] not in ("", "GatewayUnavailable")
            )

        return self.timeline.wait(f"{self.service}'s gateway serving", matches, timeout=300).obj

    def settles(self, phase: str, ready: tuple[str, str], after: float) -> Obj:
        """The service back to `phase`, `Ready` at `ready` and `Degraded=False`."""

        def matches(entry: Entry) -> Any:
            found = self.status(entry)
            return (
                found is not None
                and entry.at >= after
                and (found.get("status") or {}).get("phase") == phase
                and condition(found, "Ready")[:2] == ready
                and condition(found, "Degraded")[0] == "False"
            )

        return self.timeline.wait(f"{self.service} back to {phase}", matches, timeout=300).obj
