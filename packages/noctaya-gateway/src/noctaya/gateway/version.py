"""The version every mode logs and `--version` prints, read from the installed distribution."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def gateway_version() -> str:
    try:
        return version("noctaya-gateway")
    except PackageNotFoundError:
        return "dev"
