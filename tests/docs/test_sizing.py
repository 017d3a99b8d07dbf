"""Sizing gives the command behind each figure: each one exists and takes the flags shown."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "operations" / "sizing.md"


def commands() -> list[str]:
    return sorted(set(re.findall(r"\| `(\.venv/bin/python [^`]+)` \|", PAGE.read_text())))


def test_the_page_names_a_command_for_the_gateway_and_the_operator() -> None:
    assert any("benchmarks.gateway" in command for command in commands())
    assert any("benchmarks/operator/run.py" in command for command in commands())


@pytest.mark.parametrize("command", commands())
def test_each_command_accepts_its_flags(command: str) -> None:
    """argparse reads the flags in order, so a wrong one fails before `--help` is reached."""
    done = subprocess.run(
        [*shlex.split(command), "--help"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout
