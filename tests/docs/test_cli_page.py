"""The command-line page against the commands' own argparse parsers.

Each parser is the one a console script builds: its `main` is called with `--help` while
`parse_args` is held, so the test sees exactly what a user's `--help` shows. Every option of a
command has a row in its section's tables, written as `--help` writes it (names, then the
metavar), with the parser's default; no row names an option the command lacks.
"""

from __future__ import annotations

import argparse
import pkgutil
import re
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from noctaya.fetch import cli as fetch_cli
from noctaya.k8s.docs import PAGES
from noctaya.local import cli as local_cli

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "reference" / "cli.md"
OPTION_HEADER = "| Option | Default | Meaning |"
EXIT_HEADER = "| Exit code | When |"
SECTIONS = {
    "## `noctaya validate` and `noctaya render`": ("noctaya validate", "noctaya render"),
    "## `noctaya crds`, `noctaya rbac` and `noctaya docs`": (
        "noctaya crds",
        "noctaya rbac",
        "noctaya docs",
    ),
    "## `noctaya-local`": ("noctaya-local",),
    "## `noctaya-fetch`": ("noctaya-fetch",),
    "## `noctaya-gateway`": ("noctaya-gateway",),
}
NOT_HERE = {"noctaya-operator", "noctaya-engine-stub"}
"""The operator's flags have a generated page of their own; the engine stub takes no option."""


class _Built(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def console_scripts() -> dict[str, str]:
    """Every console script of the distributions, with its entry point."""
    scripts: dict[str, str] = {}
    for pyproject in sorted((REPO / "packages").glob("*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
        scripts |= project.get("scripts", {})
    return scripts


def parser_of(script: str, monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    """The parser the console script's `main` builds for `--help`."""

    def held(self: argparse.ArgumentParser, *_: object, **__: object) -> None:
        raise _Built(self)

    main: Callable[[list[str]], int] = pkgutil.resolve_name(console_scripts()[script])
    with monkeypatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_args", held)
        patch.setenv("TQDM_DISABLE", "1")
        with pytest.raises(_Built) as built:
            main(["--help"])
    return built.value.parser


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


@pytest.fixture
def parsers(monkeypatch: pytest.MonkeyPatch) -> dict[str, argparse.ArgumentParser]:
    """Each command of the page by the name a user types; the folders local mode defaults to
    are the ones the page names (no XDG_* variable set)."""
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    found = {
        f"noctaya {name}": sub
        for name, sub in subcommands(parser_of("noctaya", monkeypatch)).items()
    }
    for script in ("noctaya-local", "noctaya-fetch", "noctaya-gateway"):
        found[script] = parser_of(script, monkeypatch)
    return found


def options(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        yield action


def invocation(action: argparse.Action) -> str:
    """The option as its row writes it: `-n`, `--namespace NAMESPACE`; `FILE_OR_DIR...`."""
    metavar = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
    if action.nargs in ("+", "*"):
        metavar += "..."
    if not action.option_strings:
        return f"`{metavar}`"
    *first, last = action.option_strings
    if action.nargs != 0:
        last = f"{last} {metavar}"
    return ", ".join(f"`{name}`" for name in [*first, last])


def default_problem(action: argparse.Action, cell: str) -> str | None:
    """Why the Default cell does not say the parser's default; None when it does."""
    if action.required:
        return None if cell == "required" else "is required"
    if action.default in (None, "", False, []):
        return None if cell == "—" else "has no default (—)"
    shown = re.fullmatch(r"`([^`]+)`", cell)
    if shown is None:
        return f"default {action.default!r} not shown as one code span"
    text = shown.group(1)
    convert: Callable[[str], object] = action.type if callable(action.type) else str
    value = convert(str(Path(text).expanduser()) if text.startswith("~") else text)
    return None if value == action.default else f"default is {action.default!r}, not {text}"


def sections() -> dict[str, str]:
    text = PAGE.read_text(encoding="utf-8")
    parts = re.split(r"^(?=## )", text, flags=re.MULTILINE)
    return {part.splitlines()[0]: part for part in parts if part.startswith("## ")}


def tables(section: str, header: str) -> list[list[str]]:
    """The rows of every table of `section` whose header is `header`."""
    rows: list[list[str]] = []
    lines = section.splitlines()
    for start, line in enumerate(lines):
        if line != header:
            continue
        for row in lines[start + 2 :]:
            if not row.startswith("|"):
                break
            rows.append([cell.strip() for cell in row.strip("|").split(" | ")])
    return rows


def test_every_console_script_is_in_the_table_of_commands() -> None:
    first_table = PAGE.read_text(encoding="utf-8").split("\n## ", 1)[0]
    missing = [script for script in console_scripts() if f"`{script}" not in first_table]
    assert missing == []


def test_every_noctaya_subcommand_has_a_section(
    parsers: dict[str, argparse.ArgumentParser],
) -> None:
    documented = {command for commands in SECTIONS.values() for command in commands}
    assert documented == set(parsers)
    assert set(console_scripts()) - {c.split()[0] for c in documented} == NOT_HERE
    assert set(SECTIONS) <= set(sections())


@pytest.mark.parametrize("heading", SECTIONS)
def test_the_option_tables_list_every_option_of_the_parser_with_its_default(
    heading: str, parsers: dict[str, argparse.ArgumentParser]
) -> None:
    rows = tables(sections()[heading], OPTION_HEADER)
    by_option: dict[str, list[str]] = {}
    for option, default, _meaning in rows:
        by_option.setdefault(option, []).append(default)
    expected = {
        invocation(action): action
        for command in SECTIONS[heading]
        for action in options(parsers[command])
    }
    assert set(by_option) == set(expected)
    problems = [
        f"{option}: {problem}"
        for option, action in expected.items()
        for cell in by_option[option]
        if (problem := default_problem(action, cell))
    ]
    assert problems == []


def test_the_docs_page_argument_names_every_generated_page() -> None:
    rows = tables(sections()["## `noctaya crds`, `noctaya rbac` and `noctaya docs`"], OPTION_HEADER)
    (meaning,) = [meaning for option, _, meaning in rows if option == "`PAGE`"]
    assert all(f"`{page}`" in meaning for page in PAGES)


def test_noctaya_fetch_exit_codes_are_the_fetchers_own() -> None:
    rows = tables(sections()["## `noctaya-fetch`"], EXIT_HEADER)
    codes = {int(code): when for code, when in rows}
    assert set(codes) == {
        0, fetch_cli.EXIT_PERMANENT, fetch_cli.EXIT_INTERNAL, fetch_cli.EXIT_TRANSIENT
    }  # fmt: skip
    assert "`--wait-timeout`" in codes[fetch_cli.EXIT_TRANSIENT]
    assert "option" in codes[2], "argparse's usage error is exit 2 too"


def test_noctaya_local_exit_codes_are_its_own() -> None:
    rows = tables(sections()["## `noctaya-local`"], EXIT_HEADER)
    assert {int(code) for code, _ in rows} == {0, 1, local_cli.EXIT_INVALID}
