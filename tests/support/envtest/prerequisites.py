"""Test prerequisites that hack/ scripts build or fetch into a cache outside the work tree.

Each script owns its versions and its cache layout; asking it (`--print-dir` never builds or
fetches) keeps one place that decides both.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
_Found = TypeVar("_Found")


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


def required(locate: Callable[[], _Found]) -> _Found:
    """What `locate` finds; a missing prerequisite skips the test locally and fails it under
    CI=true, so CI never turns green by skipping."""
    try:
        return locate()
    except PrerequisiteMissing as missing:
        if os.environ.get("CI", "").lower() in {"true", "1"}:
            pytest.fail(f"{missing}. CI=true: tests fail instead of skipping.", pytrace=False)
        pytest.skip(str(missing))
