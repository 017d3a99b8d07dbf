"""What a planned serving container is made of, as typed values: env, health checks, volumes,
mounts and tolerations.

They say what the runtime profile and the service declare, nothing more: an unset field is
None, never a platform default. Each platform gives them its own shape: `noctaya.k8s.render`
writes Pod fields (and applies the API server's defaulting and omission rules there), local mode
sets a process's environment and runs the readiness check itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the API models are only read here, never needed to use a plan
    from noctaya.core.api import Probe
    from noctaya.core.api import Toleration as ApiToleration
    from noctaya.core.api.kubernetes import EnvVarSource


@dataclass(frozen=True, slots=True)
class Env:
    """One environment variable: a literal `value`, or a `source` the platform resolves.

    A source (a Secret or ConfigMap key, a field of the running workload) is kept exactly as
    the runtime declared it, unknown kinds of source included: only the platform knows how, or
    whether, it can supply one.
    """

    name: str
    value: str | None = None
    source: EnvVarSource | None = None


def last_wins(env: Iterable[Env]) -> tuple[Env, ...]:
    """One entry per name, the last: the service's own settings (its token, the cache homes)
    override a runtime's, and a container cannot hold a name twice."""
    entries = list(env)
    last = {entry.name: index for index, entry in enumerate(entries)}
    return tuple(entry for index, entry in enumerate(entries) if last[entry.name] == index)


@dataclass(frozen=True, slots=True)
class HttpGet:
    port: int | str
    """A port number, or the name of the serving container's port."""
    path: str | None = None
    host: str | None = None
    scheme: str | None = None
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class TcpSocket:
    port: int | str
    host: str | None = None


@dataclass(frozen=True, slots=True)
class GrpcCheck:
    port: int
    service: str | None = None


@dataclass(frozen=True, slots=True)
class ExecCheck:
    command: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HealthCheck:
    """A readiness, startup or liveness check with its timing; None fields mean the default."""

    http_get: HttpGet | None = None
    tcp_socket: TcpSocket | None = None
    grpc: GrpcCheck | None = None
    exec: ExecCheck | None = None
    initial_delay_seconds: int | None = None
    timeout_seconds: int | None = None
    period_seconds: int | None = None
    success_threshold: int | None = None
    failure_threshold: int | None = None
    termination_grace_period_seconds: int | None = None


def health_check(probe: Probe) -> HealthCheck:
    """A runtime's probe as a typed check."""
    http = probe.http_get
    tcp = probe.tcp_socket
    return HealthCheck(
        http_get=(
            HttpGet(
                port=http.port,
                path=http.path,
                host=http.host,
                scheme=http.scheme,
                headers=tuple((header.name, header.value) for header in http.http_headers or ()),
            )
            if http is not None
            else None
        ),
        tcp_socket=TcpSocket(tcp.port, tcp.host) if tcp is not None else None,
        grpc=GrpcCheck(probe.grpc.port, probe.grpc.service) if probe.grpc is not None else None,
        exec=ExecCheck(tuple(probe.exec.command)) if probe.exec is not None else None,
        initial_delay_seconds=probe.initial_delay_seconds,
        timeout_seconds=probe.timeout_seconds,
        period_seconds=probe.period_seconds,
        success_threshold=probe.success_threshold,
        failure_threshold=probe.failure_threshold,
        termination_grace_period_seconds=probe.termination_grace_period_seconds,
    )


@dataclass(frozen=True, slots=True)
class MemoryVolume:
    """Scratch space in memory (the serving container's `/dev/shm`)."""

    name: str


@dataclass(frozen=True, slots=True)
class ScratchVolume:
    """Scratch space on the node's disk, emptied with the pod (a fetcher's temporary files)."""

    name: str


@dataclass(frozen=True, slots=True)
class ClaimVolume:
    """A persistent volume claim; `read_only` also marks the claim itself read-only."""

    name: str
    claim: str
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class HostPathVolume:
    """A folder of the node; `type` is the check or creation the node applies to it, if any."""

    name: str
    path: str
    type: str | None = None


Volume = MemoryVolume | ScratchVolume | ClaimVolume | HostPathVolume


@dataclass(frozen=True, slots=True)
class Mount:
    volume: str
    path: str
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None


def toleration(declared: ApiToleration) -> Toleration:
    return Toleration(
        key=declared.key,
        operator=declared.operator,
        value=declared.value,
        effect=declared.effect,
        toleration_seconds=declared.toleration_seconds,
    )


@dataclass(frozen=True, slots=True)
class Scheduling:
    """Where the serving workload may run, from the runtime's accelerator section."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    scheduler_name: str | None = None
    volcano_queue: str | None = None
