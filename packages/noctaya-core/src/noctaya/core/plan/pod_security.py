"""The Pod Security Standards level each planned pod meets, and why it meets no stricter one.

A namespace that enforces a level (`pod-security.kubernetes.io/enforce`) admits only pods that
meet it. The plan states the level of every pod it makes, so a rejection is explained with the
label that admits the pod, and tests hold each rendered pod to its statement against the API
server's own admission. The statement follows the rules the planned pods can touch: hostPath
volumes and probe hosts (baseline), and the serving container's security context (restricted).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from noctaya.core.plan.container import HealthCheck, HostPathVolume, Volume

if TYPE_CHECKING:  # the API models are only read here, never needed to use a plan
    from noctaya.core.api.security_context import SeccompProfile, SecurityContext

ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
"""The namespace label whose level Kubernetes' Pod Security admission enforces."""


class Level(StrEnum):
    """The three Pod Security Standards, from the most permissive."""

    PRIVILEGED = "privileged"
    BASELINE = "baseline"
    RESTRICTED = "restricted"


@dataclass(frozen=True, slots=True)
class PodSecurity:
    """The strictest level a pod meets, and `because`: why it meets no stricter one."""

    level: Level
    because: str = ""

    def admission_advice(self) -> str:
        """What to tell a user whose namespace rejected the pod."""
        why = f" ({self.because})" if self.because else ""
        return (
            f'they meet the "{self.level}" level{why}: '
            f"label the namespace {ENFORCE_LABEL}={self.level} to admit them"
        )


RESTRICTED = PodSecurity(Level.RESTRICTED)
"""Pods of the Noctaya image: non-root, no privilege escalation, no capabilities, RuntimeDefault
seccomp, only emptyDir, Secret and claim volumes."""


HOST_PATH_CACHE = "the HostPath cache"


def host_folder_security(folders: Sequence[str]) -> PodSecurity:
    """A pod that mounts folders of the node (`folders`, described) meets only privileged."""
    noun = "volume" if len(folders) == 1 else "volumes"
    return PodSecurity(
        Level.PRIVILEGED, f"hostPath {noun} {', '.join(folders)}, which baseline forbids"
    )


@dataclass(frozen=True, slots=True)
class PodSecurityContext:
    """The pod-level fields derived from the serving container's security context, so that
    every container of the pod (the init container, a debugging one) shares them."""

    run_as_non_root: bool
    seccomp_profile: SeccompProfile | None
    fs_group: int | None
    """The container's runAsGroup, when it runs as non-root: it can then write a fresh claim."""


def pod_security_context(container: SecurityContext | None) -> PodSecurityContext | None:
    """What the pod takes over from the serving container's context, if anything."""
    if container is None:
        return None
    non_root = _non_root(container)
    fs_group = container.run_as_group if non_root and container.run_as_group else None
    if not (non_root or container.seccomp_profile or fs_group):
        return None
    return PodSecurityContext(non_root, container.seccomp_profile, fs_group)


def backend_security(
    runtime: str,
    container: SecurityContext | None,
    volumes: Iterable[Volume],
    cache: Volume | None,
    checks: Iterable[HealthCheck],
) -> PodSecurity:
    """The serving pod's level: host folders and probed hosts keep it from baseline, the
    runtime's security context decides whether it meets restricted."""
    folders = [f'"{volume.name}"' for volume in volumes if isinstance(volume, HostPathVolume)]
    if isinstance(cache, HostPathVolume):
        folders.append(f'"{cache.name}" ({HOST_PATH_CACHE})')
    if folders:
        return host_folder_security(folders)
    if any(_checks_a_host(check) for check in checks):
        return PodSecurity(
            Level.PRIVILEGED,
            "a health check of the runtime names a host, which baseline forbids from "
            "Kubernetes 1.34",
        )
    if container is None:
        return PodSecurity(
            Level.BASELINE, f'InferenceRuntime "{runtime}" sets no spec.container.securityContext'
        )
    gaps = restricted_gaps(container)
    if gaps:
        return PodSecurity(
            Level.BASELINE,
            f'the spec.container.securityContext of InferenceRuntime "{runtime}": '
            + ", ".join(gaps),
        )
    return RESTRICTED


def restricted_gaps(container: SecurityContext) -> list[str]:
    """What keeps a container with this context (and its pod, as derived) from restricted;
    what breaks baseline is refused when the runtime is written."""
    gaps = []
    if container.allow_privilege_escalation is not False:
        gaps.append("allowPrivilegeEscalation is not false")
    capabilities = container.capabilities
    if capabilities is None or "ALL" not in (capabilities.drop or ()):
        gaps.append("capabilities.drop does not hold ALL")
    if capabilities is not None and set(capabilities.add or ()) - {"NET_BIND_SERVICE"}:
        gaps.append("capabilities.add holds more than NET_BIND_SERVICE")
    if container.run_as_user == 0:
        gaps.append("runAsUser is 0")
    if container.run_as_non_root is False:
        gaps.append("runAsNonRoot is false")
    elif container.run_as_non_root is None and container.run_as_user is None:
        gaps.append("neither runAsNonRoot nor runAsUser is set")
    if container.seccomp_profile is None:
        gaps.append("seccompProfile is not set")
    return gaps


def _non_root(container: SecurityContext) -> bool:
    """Whether the container says it runs as non-root: runAsNonRoot, or a user other than 0
    where runAsNonRoot is left out."""
    if container.run_as_non_root is not None:
        return container.run_as_non_root
    return bool(container.run_as_user)


def _checks_a_host(check: HealthCheck) -> bool:
    http, tcp = check.http_get, check.tcp_socket
    return bool((http is not None and http.host) or (tcp is not None and tcp.host))
