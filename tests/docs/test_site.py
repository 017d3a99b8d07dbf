"""The manual builds with `mkdocs build --strict`: a broken link, anchor, snippet or a page
missing from the navigation fails the suite."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from noctaya.core.api.inferenceruntime import RuntimeFamily
from noctaya.core.plugins import VendorRegistry

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


def test_the_introduction_names_the_engines_a_backend_runs_not_only_vllm() -> None:
    """A runtime's image is any OpenAI-compatible engine; the families and the cpu vendor the
    README and the manual's first page name exist."""
    assert {family.value for family in RuntimeFamily} == {"vllm", "llamacpp"}
    assert "cpu" in VendorRegistry.discover().vendors
    for page in (REPO / "README.md", DOCS / "index.md"):
        intro = " ".join(page.read_text(encoding="utf-8").split("\n\n")[1].split())
        assert "vLLM backend" not in intro, page
        assert "a backend that runs the runtime's serving engine (vLLM" in intro, page
        assert "llama.cpp's server on CPU-only nodes through the `cpu` vendor" in intro, page
    written = [page for page in DOCS.rglob("*.md") if page != DOCS / "reference" / "api.md"]
    for page in written:  # the API reference is generated from the models' docstrings
        assert "vLLM backend" not in page.read_text(encoding="utf-8"), page


_HISTORY_OR_HARNESS = re.compile(
    r"\bused to be\b|\bpreviously\b|\bas before\b|\bsince v?0\.\d|\bno longer supported\b"
    r"|\bthe box\b|\bthe tests' (?:cluster|nodes?)\b"
    r"|\bin-box\b|\bthe tests run\b|\bthis page stays true\b|--compare REV\b",
    re.IGNORECASE,
)


def test_pages_speak_to_the_user_without_history_or_the_test_harness() -> None:
    """History belongs in CHANGELOG.md; a page says how something is verified in one sentence at
    most, and never narrates the test cluster."""
    pages = [*sorted(DOCS.rglob("*.md")), REPO / "README.md", REPO / "examples" / "README.md"]
    found = [
        f"{page.relative_to(REPO)}: {match[0]}"
        for page in pages
        for match in _HISTORY_OR_HARNESS.finditer(
            " ".join(page.read_text(encoding="utf-8").split())
        )
    ]
    assert found == []
