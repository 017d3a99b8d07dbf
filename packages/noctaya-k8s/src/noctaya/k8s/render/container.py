"""The core's typed container values in the form the API server stores them.

Rendering what the server keeps (rather than what a user spelled) lets the operator see that a
live object already matches, so an unchanged service causes no write: empty strings and lists
are left out, as the API server leaves them out of what it stores, and so is a probe timing of
zero, which means "the default" to Kubernetes.
"""

from __future__ import annotations

from typing import Any

from noctaya.core.api import ApiModel
from noctaya.core.plan.container import (
    ClaimVolume,
    Env,
    HealthCheck,
    HostPathVolume,
    MemoryVolume,
    Mount,
    ScratchVolume,
    Toleration,
    Volume,
)
from noctaya.core.plan.pod_security import PodSecurityContext
from noctaya.k8s.render.objects import Obj, mount

_PROBE_TIMINGS = (
    ("initialDelaySeconds", "initial_delay_seconds"),
    ("timeoutSeconds", "timeout_seconds"),
    ("periodSeconds", "period_seconds"),
    ("successThreshold", "success_threshold"),
    ("failureThreshold", "failure_threshold"),
)


def server_form(value: Any) -> Any:
    """`value` without the empty strings and lists the API server would not keep."""
    if isinstance(value, dict):
        return {k: server_form(v) for k, v in value.items() if v != "" and v != []}
    if isinstance(value, list):
        return [server_form(v) for v in value]
    return value


def _present(**fields: Any) -> Obj:
    return {key: value for key, value in fields.items() if value is not None}


def env_var(entry: Env) -> Obj:
    wire = _present(name=entry.name, value=entry.value)
    if entry.source is not None:
        wire["valueFrom"] = entry.source.to_wire()
    return dict(server_form(wire))


def probe(check: HealthCheck) -> Obj:
    wire: Obj = {}
    if check.exec is not None:
        wire["exec"] = {"command": list(check.exec.command)}
    if check.http_get is not None:
        http = check.http_get
        action = _present(path=http.path, port=http.port, host=http.host, scheme=http.scheme)
        if http.headers:
            action["httpHeaders"] = [{"name": name, "value": value} for name, value in http.headers]
        wire["httpGet"] = action
    if check.tcp_socket is not None:
        wire["tcpSocket"] = _present(port=check.tcp_socket.port, host=check.tcp_socket.host)
    if check.grpc is not None:
        wire["grpc"] = _present(port=check.grpc.port, service=check.grpc.service)
    for key, attribute in _PROBE_TIMINGS:
        seconds = getattr(check, attribute)
        if seconds:  # zero is the Kubernetes default, written by leaving the field out
            wire[key] = seconds
    if check.termination_grace_period_seconds is not None:
        wire["terminationGracePeriodSeconds"] = check.termination_grace_period_seconds
    return dict(server_form(wire))


def volume(planned: Volume) -> Obj:
    if isinstance(planned, MemoryVolume):
        return {"name": planned.name, "emptyDir": {"medium": "Memory"}}
    if isinstance(planned, ScratchVolume):
        return {"name": planned.name, "emptyDir": {}}
    if isinstance(planned, ClaimVolume):
        claim: Obj = {"claimName": planned.claim}
        if planned.read_only:
            claim["readOnly"] = True
        return {"name": planned.name, "persistentVolumeClaim": claim}
    assert isinstance(planned, HostPathVolume)
    host: Obj = {"path": planned.path}
    if planned.type:
        host["type"] = planned.type
    return {"name": planned.name, "hostPath": host}


def volume_mount(planned: Mount) -> Obj:
    return mount(planned.volume, planned.path, planned.read_only)


def copied(declared: ApiModel) -> Obj:
    """Part of a runtime copied into a pod (a security context), as the API server keeps it."""
    return dict(server_form(declared.to_wire()))


def pod_security_context(planned: PodSecurityContext) -> Obj:
    """The pod-level fields derived from the serving container's context; a claim is handed to
    the fsGroup only when its root does not already belong to it."""
    wire: Obj = {}
    if planned.run_as_non_root:
        wire["runAsNonRoot"] = True
    if planned.seccomp_profile is not None:
        wire["seccompProfile"] = copied(planned.seccomp_profile)
    if planned.fs_group is not None:
        wire["fsGroup"] = planned.fs_group
        wire["fsGroupChangePolicy"] = "OnRootMismatch"
    return wire


def toleration(planned: Toleration) -> Obj:
    wire = _present(
        key=planned.key,
        operator=planned.operator,
        value=planned.value,
        effect=planned.effect,
        tolerationSeconds=planned.toleration_seconds,
    )
    return dict(server_form(wire))
