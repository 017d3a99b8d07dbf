"""The core-embedding example runs on every example profile, and the page shows its real output."""

from __future__ import annotations

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
