"""Vendor plugins are found by installing them and nothing else.

Each scenario installs real wheels built from the repository into a throw-away location and asks
a separate interpreter which vendors it sees, so nothing of this test process leaks in.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.markers import Marker

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 180

LIST_VENDORS = """
import json, sys
import noctaya.core, noctaya.core.plugins as plugins
from importlib.metadata import entry_points, distributions
from noctaya.core.vendors import AcceleratorRequest
registry = plugins.VendorRegistry.discover()
request = AcceleratorRequest("rt", "example.com/dev", 2)
plans = {vendor: registry.adapter(vendor).accelerator_plan(request) for vendor in registry.vendors}
json.dump({
    "vendors": registry.vendors,
    "entry_points": sorted(ep.name for ep in entry_points(group=plugins.ENTRY_POINT_GROUP)),
    "limits": {vendor: dict(plan.limits) for vendor, plan in plans.items()},
    "mounts": {vendor: [m.mount_path for m in plan.host_mounts] for vendor, plan in plans.items()},
    "core_file": noctaya.core.__file__,
    "distributions": sorted({d.metadata["Name"] for d in distributions()}),
}, sys.stdout)
"""


def _uv() -> str:
    """The uv that `make sync` uses: on PATH, or the one the Makefile installs under .tools."""
    found = shutil.which("uv") or shutil.which("uv", path=str(REPO / ".tools" / "bin"))
    assert found, "uv is needed to build and install the plugin wheels; run `make sync` first"
    return found


def _environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    env["UV_PYTHON_DOWNLOADS"] = "never"
    return env | extra


def _run(*command: str | Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        [str(part) for part in command],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _locked_closure(root: str) -> set[str]:
    """`root` and everything it needs on this platform, as uv.lock pins it."""
    lock = tomllib.loads((REPO / "uv.lock").read_text())
    needs = {
        package["name"]: [
            dep["name"]
            for dep in package.get("dependencies", [])
            if "marker" not in dep or Marker(dep["marker"]).evaluate()
        ]
        for package in lock["package"]
    }
    closure: set[str] = set()
    pending = [root]
    while pending:
        name = pending.pop()
        if name not in closure:
            closure.add(name)
            pending.extend(needs[name])
    return closure


def test_third_party_plugin_is_found_after_pip_install_alone(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _run(
        _uv(), "pip", "install", "--quiet", "--python", sys.executable, "--no-deps",
        "--refresh-package", "noctaya-vendor-example", "--target", site,
        REPO / "tests" / "plugins" / "noctaya-vendor-example",
        env=_environment(),
    )  # fmt: skip

    seen = json.loads(
        _run(sys.executable, "-c", LIST_VENDORS, env=_environment(PYTHONPATH=str(site)))
    )

    assert seen["vendors"] == ["ascend", "example", "nvidia"]
    assert seen["limits"]["example"] == {"example.com/dev": 2}
    assert seen["mounts"]["example"] == ["/opt/example"]


def test_installing_the_nvidia_plugin_pulls_in_only_the_core(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    python = venv / "bin" / "python"
    uv = _uv()
    _run(uv, "venv", "--quiet", "--python", sys.executable, venv, env=_environment())
    # The core is not on a package index, so its directory is given alongside. --no-sources
    # ignores the workspace links, so both install as ordinary wheels, as pip would.
    _run(
        uv, "pip", "install", "--quiet", "--python", python, "--no-sources",
        "--refresh-package", "noctaya-core", "--refresh-package", "noctaya-vendor-nvidia",
        REPO / "packages" / "noctaya-vendor-nvidia", REPO / "packages" / "noctaya-core",
        env=_environment(),
    )  # fmt: skip

    seen = json.loads(_run(python, "-I", "-c", LIST_VENDORS, env=_environment()))

    assert {_normalized(name) for name in seen["distributions"]} == _locked_closure(
        "noctaya-vendor-nvidia"
    )
    assert _locked_closure("noctaya-vendor-nvidia") >= {"noctaya-core", "pydantic", "pluggy"}
    assert Path(seen["core_file"]).is_relative_to(venv), "core must come from the new venv"
    assert seen["entry_points"] == ["nvidia"]
    assert seen["vendors"] == ["nvidia"]
    assert seen["limits"]["nvidia"] == {"example.com/dev": 2}
    assert seen["mounts"]["nvidia"] == []
