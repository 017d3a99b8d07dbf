"""The version every mode logs and `--version` prints, read from the installed distribution."""

from __future__ import annotations

from noctaya.gateway.server.tested_versions import installed_version


def gateway_version() -> str:
    return installed_version("noctaya-gateway") or "dev"
