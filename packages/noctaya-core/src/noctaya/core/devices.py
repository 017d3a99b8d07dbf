"""Listing this machine's accelerators with the vendor's own tool, for `LocalDevices` adapters.

The tools (`nvidia-smi`, `npu-smi`) ship with the drivers: where one is missing or fails, the
machine's devices are unknown (None), never guessed.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

TOOL_TIMEOUT = 15.0
"""A driver tool that hangs (a wedged device) must not hold local mode's start-up."""


def tool_output(argv: Sequence[str], timeout: float = TOOL_TIMEOUT) -> str | None:
    """What `argv` prints, or None if it cannot run, fails or takes longer than `timeout`."""
    try:
        done = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None
