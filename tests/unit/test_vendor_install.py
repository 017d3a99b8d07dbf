"""Vendor plugins are found by installing them and nothing else.

Each scenario installs real wheels built from the repository into a throw-away location and asks
a separate interpreter which vendors it sees, so nothing of this test process leaks in.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path

from packaging.markers import Marker
from support.vendor_plugins import REPO, clean_environment, install_example_plugin, run, uv

LIST_VENDORS = """
import json, sys
import noctaya.core, noctaya.core.plugins as plugins
from importlib.metadata import entry_points, distributions
from noctaya.core.vendors import AcceleratorRequest
registry = plugins.VendorRegistry.discover()
def request(vendor):
    # The cpu vendor takes only the cpu resource; every other vendor any extended resource.
    return AcceleratorRequest("rt", "cpu" if vendor == "cpu" else "example.com/dev", 2)
plans = {v: registry.adapter(v).accelerator_plan(request(v)) for v in registry.vendors}
json.dump({
    "vendors": registry.vendors,
    "entry_points": sorted(ep.name for ep in entry_points(group=plugins.ENTRY_POINT_GROUP)),
    "limits": {vendor: dict(plan.limits) for vendor, plan in plans.items()},
    "mounts": {vendor: [m.mount_path for m in plan.host_mounts] for vendor, plan in plans.items()},
    "core_file": noctaya.core.__file__,
    "distributions": sorted({d.metadata["Name"] for d in distributions()}),
}, sys.stdout)
"""


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
    site = install_example_plugin(tmp_path / "site")

    seen = json.loads(
        run(sys.executable, "-c", LIST_VENDORS, env=clean_environment(PYTHONPATH=str(site)))
    )

    assert seen["vendors"] == ["ascend", "cpu", "example", "nvidia"]
    assert seen["limits"]["example"] == {"example.com/dev": 2}
    assert seen["mounts"]["example"] == ["/opt/example"]


def test_installing_the_nvidia_plugin_pulls_in_only_the_core(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    python = venv / "bin" / "python"
    installer = uv()
    run(installer, "venv", "--quiet", "--python", sys.executable, venv, env=clean_environment())
    # The core is not on a package index, so its directory is given alongside. --no-sources
    # ignores the workspace links, so both install as ordinary wheels, as pip would.
    run(
        installer, "pip", "install", "--quiet", "--python", python, "--no-sources",
        "--refresh-package", "noctaya-core", "--refresh-package", "noctaya-vendor-nvidia",
        REPO / "packages" / "noctaya-vendor-nvidia", REPO / "packages" / "noctaya-core",
        env=clean_environment(),
    )  # fmt: skip

    seen = json.loads(run(python, "-I", "-c", LIST_VENDORS, env=clean_environment()))

    assert {_normalized(name) for name in seen["distributions"]} == _locked_closure(
        "noctaya-vendor-nvidia"
    )
    assert _locked_closure("noctaya-vendor-nvidia") >= {"noctaya-core", "pydantic", "pluggy"}
    assert Path(seen["core_file"]).is_relative_to(venv), "core must come from the new venv"
    assert seen["entry_points"] == ["nvidia"]
    assert seen["vendors"] == ["nvidia"]
    assert seen["limits"]["nvidia"] == {"example.com/dev": 2}
    assert seen["mounts"]["nvidia"] == []
