"""Another revision's packages, for measuring it side by side with the working tree: checked out
with `git worktree` into a temporary folder and put first on PYTHONPATH (every distribution's
`src`, so the namespace package `noctaya` resolves to that revision throughout)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def pythonpath(rev: str) -> Iterator[str]:
    """PYTHONPATH naming the packages of `rev` (any commit-ish) while the context lasts."""
    with tempfile.TemporaryDirectory(prefix="noctaya-rev-") as folder:
        tree = Path(folder) / "tree"
        git = ["git", "-C", str(ROOT), "worktree"]
        subprocess.run([*git, "add", "--detach", "--quiet", str(tree), rev], check=True)
        try:
            yield os.pathsep.join(str(src) for src in sorted(tree.glob("packages/*/src")))
        finally:
            subprocess.run([*git, "remove", "--force", str(tree)], check=True)


def describe(rev: str) -> str:
    """`rev` as a short commit id, for table headings."""
    return subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", rev],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
