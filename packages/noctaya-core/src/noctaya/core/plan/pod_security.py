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

from noctaya.core.plan.container import HealthCheck, HostPathVolume, Volume

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


def backend_security(
    volumes: Iterable[Volume], cache: Volume | None, checks: Iterable[HealthCheck]
) -> PodSecurity:
    """The serving pod's level: host folders and probed hosts keep it from baseline."""
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
    return PodSecurity(
        Level.BASELINE, "the serving container runs with its image's own user and privileges"
    )


def _checks_a_host(check: HealthCheck) -> bool:
    http, tcp = check.http_get, check.tcp_socket
    return bool((http is not None and http.host) or (tcp is not None and tcp.host))
