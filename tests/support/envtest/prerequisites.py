"""Test prerequisites that hack/ scripts build or fetch into a cache outside the work tree.

Each script owns its versions and its cache layout; asking it (`--print-dir` never builds or
fetches) keeps one place that decides both.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]


class PrerequisiteMissing(Exception):
    """A prerequisite is not in its cache; the message names the command that provides it."""


def cached_folder(script: Path) -> Path:
    """The folder the hack/ script fills, whether or not it has run yet."""
    return Path(
        subprocess.run(
            ["bash", str(script), "--print-dir"],
            check=True,
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    )
