"""The model cache (strategy, volume, PVC, readiness marker) and the prewarm / OCI staging Job.

A cache strategy decides where downloaded weights persist, who may write them, and whether
serving must wait for a readiness marker; the source decides whether a Job fills the cache
first. Everything here is vendor-neutral: the renderer turns it into volumes, mounts, a PVC,
an init container and a Job.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from noctaya.core.errors import NoctayaError
from noctaya.core.model_source import LiteralEnv, ResolvedModel, SecretEnv, SourceKind
from noctaya.core.plan.container import Env
from noctaya.core.plan.pod_security import (
    HOST_PATH_CACHE,
    RESTRICTED,
    PodSecurity,
    host_folder_security,
)
from noctaya.core.values import Quantity
from noctaya.core.values.go_text import go_quote

NONE = "None"
BAKED_IMAGE = "BakedImage"
HOST_PATH = "HostPath"
NODE_LOCAL_PVC = "NodeLocalPVC"
SHARED_PVC = "SharedPVC"

CACHE_VOLUME_NAME = "model-cache"
CACHE_MOUNT_PATH = "/cache"
DEFAULT_CACHE_SIZE = Quantity.parse("50Gi")
HOST_PATH_ROOT = "/var/lib/noctaya/cache"
SHARED_READY_MARKER = f"{CACHE_MOUNT_PATH}/.noctaya-ready"
CACHE_ENV = (
    LiteralEnv("HF_HOME", f"{CACHE_MOUNT_PATH}/hf"),
    LiteralEnv("MODELSCOPE_CACHE", f"{CACHE_MOUNT_PATH}/modelscope"),
)
SCRATCH_VOLUME_NAME = "scratch"
SCRATCH_MOUNT_PATH = "/tmp"
SCRATCH_ENV = (
    LiteralEnv("HOME", SCRATCH_MOUNT_PATH),
    LiteralEnv("TMPDIR", SCRATCH_MOUNT_PATH),
    LiteralEnv("XDG_CACHE_HOME", f"{SCRATCH_MOUNT_PATH}/.cache"),
)
"""Where the fetch clients keep what is not the model (huggingface-hub's and modelscope's
per-user files, Python's temporary files, the OCI client's credential lookup): the Job's scratch
volume, as the image's root filesystem is read-only."""
PREWARM_ENV = (*CACHE_ENV, *SCRATCH_ENV, LiteralEnv("TORCH_DEVICE_BACKEND_AUTOLOAD", "0"))
"""A prewarm Job has no accelerator; stop torch from probing for device backends."""
_HUB_STEERING_ENV = re.compile(r"HF_ENDPOINT|HF_HUB_\w+|MODELSCOPE_\w+|(?i:https?_proxy|no_proxy)")
"""Runtime env that steers hub and HTTP clients (mirrors, proxies, hub client settings), which
the prewarm Job needs as much as the serving container."""

FETCH_COMMAND = "noctaya-fetch"
"""The fetcher the prewarm / staging Job runs from the Noctaya image (which has no shell)."""
FETCH_PERMANENT_FAILURE = 2
"""The fetcher's exit status when retrying cannot help (not found, refused, unsafe artifact)."""
FETCH_USER = 65532
"""The Noctaya image's unprivileged user; the Job's fsGroup, so it can write a fresh PVC."""

REGISTRY_AUTH_VOLUME_NAME = "oci-registry-auth"
REGISTRY_AUTH_DIR = "/var/run/noctaya/registry-auth"
REGISTRY_AUTH_SECRET_KEY = ".dockerconfigjson"
REGISTRY_AUTH_FILE = "config.json"


@dataclass(frozen=True, slots=True)
class HostPathCache:
    path: str
    type: str = "DirectoryOrCreate"


@dataclass(frozen=True, slots=True)
class PvcCache:
    """The cache PVC (`<svc>-cache`), created once and never updated."""

    claim_name: str
    access_mode: str
    size: Quantity
    storage_class_name: str | None = None


CacheVolume = HostPathCache | PvcCache


@dataclass(frozen=True, slots=True)
class CachePlan:
    strategy: str
    """The effective strategy (an empty request means `NodeLocalPVC`)."""
    prewarm: bool
    volume: CacheVolume | None
    """The `model-cache` volume, mounted at `/cache`; None for strategy `None`."""
    serving_read_only: bool
    """Whether the serving container (and the PVC volume source) mounts the cache read-only."""
    readiness_marker: str | None
    """If set, serving does not start before this file exists: a `wait-for-prewarm` init
    container waits for it, or, where `fetched_on_each_node`, a `fetch-model` one makes it."""

    @property
    def serving_env(self) -> tuple[LiteralEnv, ...]:
        return CACHE_ENV if self.volume is not None else ()

    @property
    def fetched_on_each_node(self) -> bool:
        """A host folder is one node's own: a marker the Job wrote on another node is never
        seen here, and a pod waiting for it would wait forever. So each serving pod runs the
        Job's fetcher itself before serving, with the same one-owner lock: it returns at once
        where the node's copy is verified and marked, waits where another pod of the node is
        fetching, and fetches otherwise; the Job warms the node it ran on."""
        return isinstance(self.volume, HostPathCache) and self.readiness_marker is not None


@dataclass(frozen=True, slots=True)
class PrewarmPlan:
    """The `<svc>-prewarm` Job's `prewarm` container; it mounts `volume` read-write."""

    image: str
    """The Noctaya image, which carries `noctaya-fetch`."""
    volume: CacheVolume
    env: tuple[LiteralEnv, ...]
    runtime_env: tuple[Env, ...]
    """The serving container's hub-steering env, copied."""
    token_env: SecretEnv | None
    """The hub token from the model's `secretRef`, last, so it wins over a runtime's."""
    command: tuple[str, ...]
    registry_secret_name: str | None
    """The dockerconfigjson Secret mounted read-only for `--registry-config`, if any."""
    pod_security: PodSecurity
    """The Pod Security level the Job's pod meets."""


def plan_cache(
    *,
    strategy: str | None,
    size: Quantity | None,
    storage_class_name: str | None,
    prewarm: bool,
    model: ResolvedModel,
    service_name: str,
    namespace: str,
) -> CachePlan:
    """The cache for one service; an unsupported strategy is a `Render` error."""
    effective = str(strategy or NODE_LOCAL_PVC)
    volume = _cache_volume(
        effective, size or DEFAULT_CACHE_SIZE, storage_class_name, service_name, namespace
    )
    oci = model.kind is SourceKind.OCI
    shared_prewarm = effective == SHARED_PVC and prewarm
    marker = None
    if volume is not None:
        marker = model.ready_path if oci else (SHARED_READY_MARKER if shared_prewarm else None)
    return CachePlan(
        strategy=effective,
        prewarm=prewarm,
        volume=volume,
        serving_read_only=oci or shared_prewarm,
        readiness_marker=marker,
    )


def _cache_volume(
    strategy: str, size: Quantity, storage_class_name: str | None, service: str, namespace: str
) -> CacheVolume | None:
    claim = f"{service}-cache"
    storage_class = storage_class_name or None
    if strategy == NONE:
        return None
    if strategy == HOST_PATH:
        return HostPathCache(f"{HOST_PATH_ROOT}/{namespace}-{service}")
    if strategy == NODE_LOCAL_PVC:
        return PvcCache(claim, "ReadWriteOnce", size, storage_class)
    if strategy == SHARED_PVC:
        return PvcCache(claim, "ReadWriteMany", size, storage_class)
    if strategy == BAKED_IMAGE:
        raise NoctayaError("Render", f"cache strategy {go_quote(strategy)} is not supported yet")
    raise NoctayaError("Render", f"cache strategy {go_quote(strategy)} is not supported in v0")


def plan_prewarm(
    cache: CachePlan,
    model: ResolvedModel,
    image: str,
    serving_env: Iterable[Env] = (),
    *,
    plain_http: bool = False,
) -> PrewarmPlan | None:
    """The prewarm / staging Job, if one is needed; OCI without a cache is a `Prewarm` error.

    Mounted (`pvc://`) weights never need one; OCI artifacts always do; hub models only when
    `cache.prewarm` asks for it and there is a persistent cache to fill. `serving_env` is the
    serving container's env, whose hub-steering entries the Job gets too. `plain_http`: the
    OCI registry is reached without TLS.
    """
    oci = model.kind is SourceKind.OCI
    if model.kind is SourceKind.PVC or not (cache.prewarm or oci):
        return None
    if cache.volume is None:
        if oci:
            raise NoctayaError(
                "Prewarm", "oci:// model sources require a persistent cache strategy"
            )
        return None
    return PrewarmPlan(
        image=image,
        volume=cache.volume,
        env=(*PREWARM_ENV, *model.env),
        runtime_env=hub_steering_env(serving_env, model),
        token_env=model.token_env,
        command=fetch_command(model, cache, plain_http=plain_http),
        registry_secret_name=model.oci_secret_name if oci else None,
        pod_security=fetcher_security(cache.volume),
    )


def fetcher_security(volume: CacheVolume) -> PodSecurity:
    """The fetcher runs as the Noctaya image's unprivileged user with nothing to escalate to,
    except where the node creates the cache folder root-owned: there it writes as root, and
    the host folder alone keeps the Job from baseline."""
    if isinstance(volume, HostPathCache):
        return host_folder_security([f'"{CACHE_VOLUME_NAME}" ({HOST_PATH_CACHE})'])
    return RESTRICTED


def is_hub_steering(name: str) -> bool:
    """`HF_ENDPOINT`, `HF_HUB_*`, `MODELSCOPE_*`, `HTTP(S)_PROXY` and `NO_PROXY` (any case)."""
    return _HUB_STEERING_ENV.fullmatch(name) is not None


def hub_steering_env(env: Iterable[Env], model: ResolvedModel) -> tuple[Env, ...]:
    """The hub-steering entries of `env`, without those the Job sets itself (the cache homes,
    the model's env and its token)."""
    own = {item.name for item in (*PREWARM_ENV, *model.env)}
    if model.token_env is not None:
        own.add(model.token_env.name)
    return tuple(item for item in env if is_hub_steering(item.name) and item.name not in own)


def fetch_uri(model: ResolvedModel) -> str:
    """The URI `noctaya-fetch` reads: the scheme spelled canonically, OCI without its secret."""
    if model.kind is SourceKind.OCI:
        return f"oci://{model.oci_reference}"
    return f"{model.kind.value}://{model.path}"


def fetch_command(
    model: ResolvedModel, cache: CachePlan, *, plain_http: bool = False
) -> tuple[str, ...]:
    """`noctaya-fetch` into `/cache`; credentials travel in a mounted file, never in arguments.

    The fetcher writes an OCI artifact's own marker itself; a hub model on a shared cache also
    needs the cache-wide marker the serving pods wait for, written last.
    """
    command: tuple[str, ...] = (FETCH_COMMAND, fetch_uri(model), "--cache", CACHE_MOUNT_PATH)
    if model.kind is SourceKind.OCI and model.oci_secret_name:
        command += ("--registry-config", f"{REGISTRY_AUTH_DIR}/{REGISTRY_AUTH_FILE}")
    if model.kind is SourceKind.OCI and plain_http:
        command += ("--plain-http",)
    if cache.readiness_marker and cache.readiness_marker != model.ready_path:
        command += ("--ready-marker", cache.readiness_marker)
    return command


def python_command(program: str) -> tuple[str, ...]:
    return ("python3", "-c", program)


def wait_for_marker_program(marker: str) -> str:
    """The `wait-for-prewarm` init container: block until the marker is a regular file."""
    return f"import os,time\nwhile not os.path.isfile({go_quote(marker)}): time.sleep(2)"
