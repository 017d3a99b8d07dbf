"""The hypercorn line the gateway's protocol patches were written against and tested with.

The patches subclass and override private hypercorn methods, which may change in any release:
on another line they refuse to install, with a message saying what to install, rather than
misbehave under load.
"""

from __future__ import annotations

from importlib.metadata import version

TESTED_LINE = (0, 18)
TESTED_RANGE = "hypercorn>=0.18,<0.19"


class UntestedHypercorn(RuntimeError):
    """The installed hypercorn is not the line the patches were tested with."""


def installed_hypercorn() -> str:
    return version("hypercorn")


def require_tested_hypercorn() -> None:
    """Raise UntestedHypercorn unless the installed hypercorn is on the tested line."""
    found = installed_hypercorn()
    parts = found.split(".")
    try:
        line = (int(parts[0]), int(parts[1]))
    except (IndexError, ValueError):
        line = None
    if line != TESTED_LINE:
        raise UntestedHypercorn(
            f"hypercorn {found} is installed, but the gateway's hypercorn patches are tested only "
            f"with {TESTED_RANGE}; install a version in that range"
        )
