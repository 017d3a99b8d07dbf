"""Python code run in an interpreter of its own, for what happens once per process: how and
what a module imports."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path


def printed_by(code: str, cwd: Path | None = None) -> str:
    """What `code` (dedented) prints; the test fails with its stderr if it fails."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def json_printed_by(code: str, cwd: Path | None = None) -> object:
    """The JSON document `code` prints."""
    return json.loads(printed_by(code, cwd))
