"""Where the built etcd and kube-apiserver live, and which Kubernetes release they are."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .prerequisites import REPO_ROOT, PrerequisiteMissing, cached_folder

BUILD_SCRIPT = REPO_ROOT / "hack" / "build-control-plane.sh"
BUILD_COMMAND = "bash hack/build-control-plane.sh"
PINS = REPO_ROOT / "hack" / "control-plane-versions.env"
VERSION_ENV = "NOCTAYA_KUBERNETES_VERSION"
"""A release of the support matrix to run against instead of the pinned one (the build script
reads the same variable, so both find the same folder)."""


class BinariesMissing(PrerequisiteMissing):
    """The control-plane binaries are not built; the message names the build command."""


@dataclass(frozen=True)
class Binaries:
    etcd: Path
    kube_apiserver: Path


def pinned_kubernetes_version() -> str:
    pins = dict(
        line.split("=", 1) for line in PINS.read_text().splitlines() if line and line[0] != "#"
    )
    return pins["KUBERNETES_VERSION"].strip()


def kubernetes_version() -> str:
    """The release this session runs: a matrix run's, else the pinned one."""
    return os.environ.get(VERSION_ENV) or pinned_kubernetes_version()


def locate_binaries() -> Binaries:
    folder = cached_folder(BUILD_SCRIPT)
    binaries = Binaries(etcd=folder / "etcd", kube_apiserver=folder / "kube-apiserver")
    missing = [str(p) for p in (binaries.etcd, binaries.kube_apiserver) if not _executable(p)]
    if missing:
        command = BUILD_COMMAND
        if os.environ.get(VERSION_ENV):
            command = f"{VERSION_ENV}={os.environ[VERSION_ENV]} {BUILD_COMMAND}"
        raise BinariesMissing(
            f"control-plane binaries not built ({', '.join(missing)} missing); "
            f"run `{command}` (or `make control-plane`) first"
        )
    return binaries


def _executable(path: Path) -> bool:
    return path.is_file() and path.stat().st_mode & 0o111 != 0
