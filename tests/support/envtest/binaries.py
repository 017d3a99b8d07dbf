"""Where the built etcd and kube-apiserver live.

The build script owns the versions and the cache layout; asking it (`--print-dir` never builds)
keeps one place that decides both.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
BUILD_SCRIPT = REPO_ROOT / "hack" / "build-control-plane.sh"
BUILD_COMMAND = "bash hack/build-control-plane.sh"


class BinariesMissing(Exception):
    """The control-plane binaries are not built; the message names the build command."""


@dataclass(frozen=True)
class Binaries:
    etcd: Path
    kube_apiserver: Path


def locate_binaries() -> Binaries:
    folder = Path(
        subprocess.run(
            ["bash", str(BUILD_SCRIPT), "--print-dir"],
            check=True,
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    )
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
