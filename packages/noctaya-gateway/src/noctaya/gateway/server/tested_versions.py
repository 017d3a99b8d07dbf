"""The releases of hypercorn, h2 and h11 the gateway's server patches were written against and
tested with (see `server_patches` and the ledger beside them).

The patches subclass and override private methods of all three, which may change in any
release: on another release line they refuse to install, with a message saying what to install,
rather than misbehave under load. The packages' declared ranges are these same lines.
"""

from __future__ import annotations

import os
import re
import sys

TESTED_LINES = {"hypercorn": (0, 18), "h2": (4, 4), "h11": (0, 16)}
"""Each library's tested release line: (major, minor), any patch release of it."""


def requirement_for(name: str) -> str:
    """The requirement admitting exactly the tested line of `name`, e.g. `h2>=4.4,<4.5`."""
    major, minor = TESTED_LINES[name]
    return f"{name}>={major}.{minor},<{major}.{minor + 1}"


class UntestedServerLibrary(RuntimeError):
    """hypercorn, h2 or h11 is installed at a release the patches were not tested with."""


def installed_version(distribution: str) -> str | None:
    """The version of an installed distribution, or None: the name of its first
    `<name>-<version>.dist-info` folder on `sys.path`, which is where importlib.metadata reads
    it for an installed wheel. importlib.metadata itself brings the email, zipfile and csv
    modules: 1.5 MiB of every gateway's resident memory, for two version strings."""
    prefix = re.sub(r"[-_.]+", "_", distribution).lower() + "-"
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.endswith(".dist-info") and name.lower().startswith(prefix):
                return name[len(prefix) : -len(".dist-info")]
    return None


def installed_versions() -> dict[str, str]:
    """The installed release of each library the patches change ("unknown" if not found)."""
    return {name: installed_version(name) or "unknown" for name in TESTED_LINES}


def require_tested_versions() -> None:
    """Raise UntestedServerLibrary unless each library is on its tested line."""
    for name, found in installed_versions().items():
        if _line(found) != TESTED_LINES[name]:
            raise UntestedServerLibrary(
                f"{name} {found} is installed, but the gateway's server patches are tested only "
                f"with {requirement_for(name)}; install a version in that range"
            )


def _line(version: str) -> tuple[int, int] | None:
    """(major, minor) of a final release; None for anything else (a pre-release, garbage)."""
    match = re.fullmatch(r"(\d+)\.(\d+)(?:\.\d+)*", version)
    return (int(match.group(1)), int(match.group(2))) if match else None
