"""The repository is self-contained: no tracked file reads from a folder beside the checkout,
and no comment leans on a document the repository does not hold.

A clone from a repository host has nothing beside it; test data lives in the repository or is
fetched by a hack/ script at a pinned version.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# The sibling test-data folder named by a relative path string or by path joins; the character
# classes keep the pattern from matching its own source.
OUTSIDE_REFERENCE = re.compile(
    rb"""[.][.]/shared\b|/\s*["']shared["']|shared["']?\s*/\s*["']?testdata"""
)
# A section sign (UTF-8, escaped so this line does not match) before a number, unless it cites a
# public standard the reader can look up ("RFC 9112" and the section).
SECTION_OF_AN_OUTSIDE_DOCUMENT = re.compile(rb"(?<!RFC \d{4} )\xc2\xa7\d")


def tracked_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True, timeout=30
    ).stdout
    return [REPO / name for name in listed.decode().split("\0") if name]


def test_the_listing_covers_the_repository() -> None:
    """Guards the check below against an empty or partial listing passing vacuously."""
    names = {path.relative_to(REPO).as_posix() for path in tracked_files()}
    assert {"Makefile", "hack/fetch-keda-crds.sh", "tests/support/control_plane.py"} <= names


def found_in_tracked_files(pattern: re.Pattern[bytes], *, skip_suffix: str = "") -> list[str]:
    """`file:line: match` for every match, files ending in `skip_suffix` left out."""
    found_at = []
    for path in tracked_files():
        if not path.is_file() or (skip_suffix and path.name.endswith(skip_suffix)):
            continue
        text = path.read_bytes()
        for found in pattern.finditer(text):
            line = text.count(b"\n", 0, found.start()) + 1
            found_at.append(f"{path.relative_to(REPO)}:{line}: {found.group().decode()}")
    return found_at


def test_no_tracked_file_refers_to_a_folder_beside_the_repository() -> None:
    assert found_in_tracked_files(OUTSIDE_REFERENCE) == []


def test_no_tracked_file_names_this_machines_checkout_or_home_folder() -> None:
    folders = [REPO] + ([Path.home()] if Path.home() != Path("/") else [])
    machine_path = re.compile(b"|".join(re.escape(f"{folder}/".encode()) for folder in folders))
    assert found_in_tracked_files(machine_path) == []


def test_no_comment_cites_a_section_of_a_document_outside_the_repository() -> None:
    """A reader of the code has only the repository: a comment states the rule it follows, not
    where some other document numbers it. The manual (Markdown) may cite its own sections."""
    assert found_in_tracked_files(SECTION_OF_AN_OUTSIDE_DOCUMENT, skip_suffix=".md") == []


@pytest.mark.parametrize(
    ("citation", "outside"),
    [
        ("RFC 9112 {}6.3", False),
        ("RFC 9113 {}8.1.1", False),
        ("see {}2.6", True),
        ("reference {}8", True),
    ],
)
def test_the_section_pattern_passes_standards_and_catches_the_rest(
    citation: str, outside: bool
) -> None:
    text = citation.format("\u00a7").encode()
    assert (SECTION_OF_AN_OUTSIDE_DOCUMENT.search(text) is not None) is outside
