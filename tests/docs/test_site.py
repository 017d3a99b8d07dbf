"""The manual builds with `mkdocs build --strict`: a broken link, anchor, snippet or a page
missing from the navigation fails the suite."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
MKDOCS = Path(sys.executable).with_name("mkdocs")
_SNIPPET = re.compile(r'^--8<-- "[^"]+"$')
_FENCE = re.compile(r"^```(\w+)?\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    built = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "reference" / "api" / "index.html").exists()


def test_yaml_on_every_page_is_included_from_the_repository_not_copied() -> None:
    """A YAML block is one snippet line naming a file (examples/, generated config, or a
    snippet checked by a test), so a page never shows a second, drifting copy."""
    copies = [
        f"{page.relative_to(REPO)}: {body.strip().splitlines()[0]}"
        for page in sorted(DOCS.rglob("*.md"))
        for language, body in _FENCE.findall(page.read_text(encoding="utf-8"))
        if language == "yaml" and not _SNIPPET.match(body.strip())
    ]
    assert copies == []
