"""Hostile manifest YAML, and a command run on it with capped memory and a deadline.

A reader that expands aliases or recurses without bounds turns these kilobytes into gigabytes or
a RecursionError; a bounded one refuses them at once, well inside the cap.
"""

from __future__ import annotations

import resource
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

MEMORY_CAP = 512 << 20
"""Address space for a command that must refuse its file cheaply (a refusal needs ~70 MiB)."""
COMMAND_DEADLINE = 60.0


def laughs(levels: int = 9) -> str:
    """A "billion laughs" mapping under 1 KB, indented to sit under a key: each anchored list
    holds nine aliases of the one before."""
    lines = ['  l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels + 1):
        aliases = ", ".join([f"*l{level - 1}"] * 9)
        lines.append(f"  l{level}: &l{level} [{aliases}]")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class CappedRun:
    returncode: int
    stdout: str
    stderr: str
    elapsed: float


def run_capped(argv: Sequence[str]) -> CappedRun:
    """`argv` as a process limited to MEMORY_CAP of address space, killed at COMMAND_DEADLINE."""
    started = time.monotonic()
    result = subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        timeout=COMMAND_DEADLINE,
        check=False,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP)),
    )
    return CappedRun(result.returncode, result.stdout, result.stderr, time.monotonic() - started)
