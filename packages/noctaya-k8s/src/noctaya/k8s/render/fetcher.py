"""The fetcher's container (`noctaya-fetch` from the Noctaya image) and who it writes the cache
as: the prewarm / staging Job runs it, and so does each backend pod of a cache kept on every
node apart (a host folder)."""

from __future__ import annotations

from noctaya.core.cache_planning import (
    CACHE_MOUNT_PATH,
    CACHE_VOLUME_NAME,
    REGISTRY_AUTH_DIR,
    REGISTRY_AUTH_FILE,
    REGISTRY_AUTH_SECRET_KEY,
    REGISTRY_AUTH_VOLUME_NAME,
    SCRATCH_MOUNT_PATH,
    SCRATCH_VOLUME_NAME,
    CacheVolume,
    HostPathCache,
    PrewarmPlan,
)
from noctaya.core.plan.backend import secret_env
from noctaya.core.plan.container import Env, ScratchVolume
from noctaya.k8s.render.container import env_var, volume
from noctaya.k8s.render.objects import (
    RESTRICTED_CONTAINER_SECURITY,
    RESTRICTED_POD_SECURITY,
    Obj,
    mount,
    secret_volume,
)

_REGISTRY_AUTH_MODE = 0o400
_HOST_FOLDER_WRITER: Obj = {"runAsUser": 0, "runAsGroup": 0}


def fetch_container(prewarm: PrewarmPlan, name: str) -> tuple[Obj, list[Obj]]:
    """`noctaya-fetch` writing the cache (mounted read-write), and the volumes it needs besides
    the cache: a scratch volume, and the registry credentials when the service names a Secret.
    The Job's container, and the `fetch-model` init container of a backend whose cache is a
    host folder (`CachePlan.fetched_on_each_node`)."""
    volumes = [volume(ScratchVolume(SCRATCH_VOLUME_NAME))]
    container: Obj = {
        "name": name,
        "image": prewarm.image,
        "command": list(prewarm.command),
        "env": [env_var(e) for e in _prewarm_env(prewarm)],
        "securityContext": RESTRICTED_CONTAINER_SECURITY,
        "volumeMounts": [
            mount(CACHE_VOLUME_NAME, CACHE_MOUNT_PATH),
            mount(SCRATCH_VOLUME_NAME, SCRATCH_MOUNT_PATH),
        ],
    }
    if prewarm.registry_secret_name:
        items = [{"key": REGISTRY_AUTH_SECRET_KEY, "path": REGISTRY_AUTH_FILE}]
        volumes.append(
            secret_volume(
                REGISTRY_AUTH_VOLUME_NAME,
                prewarm.registry_secret_name,
                _REGISTRY_AUTH_MODE,
                items,
            )
        )
        container["volumeMounts"].append(
            mount(REGISTRY_AUTH_VOLUME_NAME, REGISTRY_AUTH_DIR, read_only=True)
        )
    return container, volumes


def _prewarm_env(prewarm: PrewarmPlan) -> list[Env]:
    """The Job's own env, the serving container's hub steering, then the hub token (last, so
    it wins over a runtime's)."""
    env = [Env(item.name, item.value) for item in prewarm.env]
    env += prewarm.runtime_env
    if prewarm.token_env is not None:
        env.append(secret_env(prewarm.token_env))
    return env


def fetcher_root_identity() -> Obj:
    """The `fetch-model` init container's own context in a backend pod: root, as the Job's pod
    on a host folder (see `fetcher_pod_identity`), whatever the runtime's pod context asks of its
    serving container, with every capability dropped and no way to gain one."""
    return {
        **RESTRICTED_CONTAINER_SECURITY,
        **_HOST_FOLDER_WRITER,
        "runAsNonRoot": False,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def fetcher_pod_identity(cache: CacheVolume) -> Obj:
    """Who the fetcher writes the cache as; the Noctaya image runs as an unprivileged user.

    On a claim, fsGroup lets that user write a fresh volume's root and read the 0400
    credentials (the kubelet gives a secret volume's files to the group). A hostPath folder is
    created root-owned and fsGroup does not apply to it, so there the fetcher runs as root, as
    the serving images do, still with every capability dropped and no way to gain one.
    """
    if isinstance(cache, HostPathCache):
        return {**_HOST_FOLDER_WRITER, "seccompProfile": {"type": "RuntimeDefault"}}
    return {**RESTRICTED_POD_SECURITY, "fsGroupChangePolicy": "OnRootMismatch"}
