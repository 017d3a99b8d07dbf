"""The model cache (strategy, volume, PVC, readiness marker) and the prewarm / OCI staging Job.

A cache strategy decides where downloaded weights persist, who may write them, and whether
serving must wait for a readiness marker; the source decides whether a Job fills the cache
first. Everything here is vendor-neutral: the renderer turns it into volumes, mounts, a PVC,
an init container and a Job.
"""

from __future__ import annotations

from dataclasses import dataclass

from noctaya.core.errors import NoctayaError
from noctaya.core.model_source import LiteralEnv, ResolvedModel, SourceKind
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
PREWARM_ENV = (*CACHE_ENV, LiteralEnv("TORCH_DEVICE_BACKEND_AUTOLOAD", "0"))
"""A prewarm Job has no accelerator; stop torch from probing for device backends."""

ORAS_IMAGE = "ghcr.io/oras-project/oras:v1.3.0"
OCI_STAGING_VOLUME_NAME = "oci-staging"
OCI_STAGING_PATH = "/staging/model"
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
    """If set, a `wait-for-prewarm` init container blocks serving until this file exists."""

    @property
    def serving_env(self) -> tuple[LiteralEnv, ...]:
        return CACHE_ENV if self.volume is not None else ()


@dataclass(frozen=True, slots=True)
class OciStaging:
    """The `pull-oci-model` init container: ORAS pulls the artifact into an emptyDir."""

    reference: str
    secret_name: str | None

    @property
    def pull_args(self) -> tuple[str, ...]:
        """Credentials travel in a mounted file, never in the arguments."""
        args = ("pull", self.reference, "--output", OCI_STAGING_PATH, "--no-tty")
        if self.secret_name is None:
            return args
        return (*args, "--registry-config", f"{REGISTRY_AUTH_DIR}/{REGISTRY_AUTH_FILE}")


@dataclass(frozen=True, slots=True)
class PrewarmPlan:
    """The `<svc>-prewarm` Job's `prewarm` container; it mounts `volume` read-write."""

    volume: CacheVolume
    env: tuple[LiteralEnv, ...]
    command: tuple[str, ...]
    staging: OciStaging | None


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


def plan_prewarm(cache: CachePlan, model: ResolvedModel) -> PrewarmPlan | None:
    """The prewarm / staging Job, if one is needed; OCI without a cache is a `Prewarm` error.

    Mounted (`pvc://`) weights never need one; OCI artifacts always do; hub models only when
    `cache.prewarm` asks for it and there is a persistent cache to fill.
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
    staging = None
    if oci:
        assert model.oci_reference is not None
        staging = OciStaging(model.oci_reference, model.oci_secret_name)
        program = oci_promotion_program(model.path)
    else:
        program = hub_download_program(model, touch_shared_marker=cache.strategy == SHARED_PVC)
    return PrewarmPlan(
        volume=cache.volume,
        env=(*PREWARM_ENV, *model.env),
        command=python_command(program),
        staging=staging,
    )


def python_command(program: str) -> tuple[str, ...]:
    return ("python3", "-c", program)


def hub_download_program(model: ResolvedModel, *, touch_shared_marker: bool) -> str:
    """Download a hub repo into the cache; on a shared cache, then mark it complete."""
    hub = "modelscope" if model.kind is SourceKind.MODELSCOPE else "huggingface_hub"
    program = f"from {hub} import snapshot_download; snapshot_download({go_quote(model.path)})"
    if touch_shared_marker:
        program += f"; from pathlib import Path; Path({go_quote(SHARED_READY_MARKER)}).touch()"
    return program


def wait_for_marker_program(marker: str) -> str:
    """The `wait-for-prewarm` init container: block until the marker is a regular file."""
    return f"import os,time\nwhile not os.path.isfile({go_quote(marker)}): time.sleep(2)"


def oci_promotion_program(destination: str, *, staging: str = OCI_STAGING_PATH) -> str:
    """Promote a pulled OCI artifact into the cache atomically, then write its marker.

    Backends wait for the marker, so they see either nothing or the complete tree: the copy
    goes to `<destination>.partial` and `os.replace` renames it into place. Symbolic links
    could point outside the artifact, so any link fails the Job before anything is written.
    """
    return "\n".join(
        [
            "import os, shutil, sys",
            f"src = {go_quote(staging)}",
            f"dst = {go_quote(destination)}",
            'marker = os.path.join(dst, ".noctaya-ready")',
            "if os.path.isfile(marker):",
            "    sys.exit(0)",
            "for root, dirs, files in os.walk(src):",
            "    for entry in dirs + files:",
            "        if os.path.islink(os.path.join(root, entry)):",
            '            sys.exit("OCI model artifacts must not contain symbolic links: "',
            "                     + os.path.join(root, entry))",
            "os.makedirs(os.path.dirname(dst), exist_ok=True)",
            'partial = dst + ".partial"',
            "if os.path.lexists(partial):",
            "    shutil.rmtree(partial)",
            "shutil.copytree(src, partial, symlinks=True)",
            "if os.path.lexists(dst):",
            "    shutil.rmtree(dst)",
            "os.replace(partial, dst)",
            'open(marker, "a").close()',
        ]
    )
