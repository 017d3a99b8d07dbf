"""The README as the first page a new user reads: the set-up commands CI runs, and links that lead
somewhere."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_the_readme_starts_with_the_two_set_up_commands_and_ci_runs_the_second() -> None:
    first_section = README.read_text(encoding="utf-8").split("\n## ")[1]
    assert first_section.startswith("Set up on a fresh machine\n")
    block = re.match(r"```sh\n(.*?)```", first_section.split("\n", 1)[1].lstrip(), re.DOTALL)
    assert block is not None
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    assert commands == ["make demo", "make test"]
    assert "make test" in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()


def test_every_relative_link_of_the_readme_exists() -> None:
    targets = [t for t in _LINK.findall(README.read_text(encoding="utf-8")) if "://" not in t]
    assert {"docs/index.md", "LICENSE", "docs/reference/cli.md"} <= set(targets)
    assert [target for target in targets if not (REPO / target).exists()] == []


def test_the_license_the_readme_names_is_the_license_file() -> None:
    text = README.read_text(encoding="utf-8")
    assert text.rstrip().endswith("Apache-2.0 ([LICENSE](LICENSE)).")
    words = (REPO / "LICENSE").read_text(encoding="utf-8").split()
    assert words[:4] == ["Apache", "License", "Version", "2.0,"]
