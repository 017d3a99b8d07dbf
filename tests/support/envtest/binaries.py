"""Where the built etcd and kube-apiserver live."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .prerequisites import REPO_ROOT, PrerequisiteMissing, cached_folder

BUILD_SCRIPT = REPO_ROOT / "hack" / "build-control-plane.sh"
BUILD_COMMAND = "bash hack/build-control-plane.sh"


class BinariesMissing(PrerequisiteMissing):
    """The control-plane binaries are not built; the message names the build command."""


@dataclass(frozen=True)
class Binaries:
    etcd: Path
    kube_apiserver: Path


def locate_binaries() -> Binaries:
    folder = cached_folder(BUILD_SCRIPT)
    binaries = Binaries(etcd=folder / "etcd", kube_apiserver=folder / "kube-apiserver")
    missing = [str(p) for p in (binaries.etcd, binaries.kube_apiserver) if not _executable(p)]
    if missing:
        raise BinariesMissing(
            f"control-plane binaries not built ({', '.join(missing)} missing); "
            f"run `{BUILD_COMMAND}` (or `make control-plane`) first"
        )
    return binaries


def _executable(path: Path) -> bool:
    return path.is_file() and path.stat().st_mode & 0o111 != 0
