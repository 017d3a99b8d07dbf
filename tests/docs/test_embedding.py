"""The core-embedding example runs on every example profile, and the page shows its real output."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "docs" / "snippets" / "plan_a_service.py"
PAGE = REPO / "docs" / "embedding.md"
PROFILES = sorted(path.parent for path in (REPO / "examples").glob("*/*/runtime.yaml"))
_CONSOLE = re.compile(r"```console\n\$ python (\S+) (\S+)\n(.*?)```", re.DOTALL)


def plan(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, SCRIPT, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("profile", PROFILES, ids=[p.name for p in PROFILES])
def test_the_example_plans_every_profile(profile: Path) -> None:
    planned = plan(profile)
    assert (planned.returncode, planned.stderr) == (0, "")
    assert f"-> http://{profile.name}" not in planned.stdout  # names come from the manifests
    assert planned.stdout.startswith("service   default/")


def test_the_page_shows_what_the_example_prints() -> None:
    script, profile, shown = _CONSOLE.findall(PAGE.read_text(encoding="utf-8"))[0]
    assert REPO / script == SCRIPT
    assert plan(profile).stdout == shown


def test_an_invalid_service_is_reported_field_by_field(tmp_path: Path) -> None:
    runtime = (REPO / "examples" / "nvidia" / "a10" / "runtime.yaml").read_text(encoding="utf-8")
    (tmp_path / "runtime.yaml").write_text(runtime, encoding="utf-8")
    (tmp_path / "svc.yaml").write_text(
        "kind: LLMService\nmetadata: {name: x}\n"
        "spec: {model: {source: {uri: hf://a/b}}, runtime: {name: r}, scaling: {max: 0}}\n",
        encoding="utf-8",
    )
    planned = plan(tmp_path)
    assert planned.returncode == 1
    assert (
        planned.stderr == "spec.scaling.max: Invalid value 0: must be greater than or equal to 1\n"
    )


_ROW = re.compile(r"^\| `(noctaya\.core[\w.]*)` \| (.*) \|$", re.MULTILINE)
_CALL = re.compile(r"`(?:[\w.]+\.)?(\w+)\(")


def test_every_function_the_api_table_names_exists_in_its_module() -> None:
    rows = _ROW.findall(PAGE.read_text(encoding="utf-8"))
    assert len(rows) >= 10
    missing = []
    for module_name, said in rows:
        module = importlib.import_module(module_name)
        missing += [
            f"{module_name}.{name}" for name in _CALL.findall(said) if not _offers(module, name)
        ]
    assert missing == []


def _offers(module: object, name: str) -> bool:
    """A function of the module, or a method of one of its classes (`to_wire()`, `plan(...)`)."""
    members = vars(module).values()
    return hasattr(module, name) or any(
        isinstance(member, type) and hasattr(member, name) for member in members
    )


def test_the_install_steps_build_with_make_dist_and_name_wheels_it_builds() -> None:
    """`make dist` builds every distribution under packages/ (tests/release installs what it
    builds); the page installs the core's and the vendor adapters' wheels from dist/."""
    text = PAGE.read_text(encoding="utf-8")
    block = text.split("## Installing the core", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    build, install = block.splitlines()
    assert build.split("#")[0].split() == ["make", "dist"]
    assert "uv build" not in text
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert re.search(
        r"^dist: .*\n\t\$\(UV\) build --all-packages .*--out-dir \$\(or \$\(DIST\),dist\)",
        makefile,
        re.MULTILINE,
    )
    distributions = {path.name.replace("-", "_") for path in (REPO / "packages").iterdir()}
    wheels = re.findall(r"dist/(\w+)-\*\.whl", install)
    assert wheels
    assert set(wheels) <= distributions
    assert {
        "noctaya_core",
        "noctaya_vendor_nvidia",
        "noctaya_vendor_ascend",
        "noctaya_vendor_cpu",
    } <= set(wheels)
