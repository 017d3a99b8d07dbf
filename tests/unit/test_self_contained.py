"""The repository is self-contained: no tracked file reads from a folder beside the checkout.

A clone from a repository host has nothing beside it; test data lives in the repository or is
fetched by a hack/ script at a pinned version.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The sibling test-data folder named by a relative path string or by path joins; the character
# classes keep the pattern from matching its own source.
OUTSIDE_REFERENCE = re.compile(
    rb"""[.][.]/shared\b|/\s*["']shared["']|shared["']?\s*/\s*["']?testdata"""
)


def tracked_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True, timeout=30
    ).stdout
    return [REPO / name for name in listed.decode().split("\0") if name]


def test_the_listing_covers_the_repository() -> None:
    """Guards the check below against an empty or partial listing passing vacuously."""
    names = {path.relative_to(REPO).as_posix() for path in tracked_files()}
    assert {"Makefile", "hack/fetch-keda-crds.sh", "tests/support/control_plane.py"} <= names


def found_in_tracked_files(pattern: re.Pattern[bytes]) -> list[str]:
    return [
        f"{path.relative_to(REPO)}: {found.group().decode()}"
        for path in tracked_files()
        if path.is_file()
        for found in pattern.finditer(path.read_bytes())
    ]


def test_no_tracked_file_refers_to_a_folder_beside_the_repository() -> None:
    assert found_in_tracked_files(OUTSIDE_REFERENCE) == []


def test_no_tracked_file_names_this_machines_checkout_or_home_folder() -> None:
    folders = [REPO] + ([Path.home()] if Path.home() != Path("/") else [])
    machine_path = re.compile(b"|".join(re.escape(f"{folder}/".encode()) for folder in folders))
    assert found_in_tracked_files(machine_path) == []
