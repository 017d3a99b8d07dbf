"""Vendor plugins installed the way users install them: a real wheel, built and installed by uv.

The example plugin in tests/plugins is a third-party distribution; a test installs it into a
throw-away directory and puts that directory on the path of the process that should see it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_PLUGIN = REPO / "tests" / "plugins" / "noctaya-vendor-example"
TIMEOUT = 180


def uv() -> str:
    """The uv that `make sync` uses: on PATH, or the one the Makefile installs under .tools."""
    found = shutil.which("uv") or shutil.which("uv", path=str(REPO / ".tools" / "bin"))
    assert found, "uv is needed to build and install the plugin wheels; run `make sync` first"
    return found


def clean_environment(**extra: str) -> dict[str, str]:
    """This process's environment without its virtualenv and path, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    env["UV_PYTHON_DOWNLOADS"] = "never"
    return env | extra


def run(*command: str | Path, env: dict[str, str]) -> str:
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


def install_example_plugin(site: Path) -> Path:
    """Build and install the example plugin alone into `site`; put `site` on a PYTHONPATH."""
    run(
        uv(), "pip", "install", "--quiet", "--python", sys.executable, "--no-deps",
        "--refresh-package", "noctaya-vendor-example", "--target", site, EXAMPLE_PLUGIN,
        env=clean_environment(),
    )  # fmt: skip
    return site
