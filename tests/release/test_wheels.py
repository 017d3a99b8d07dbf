"""The distributions as users install them: wheels from `uv build`, nothing from the workspace.

The wheels and the dependencies pinned by uv.lock go into a fresh virtualenv with --no-deps, so
a dependency missing from a distribution's metadata shows up in `uv pip check`, and every
console script the wheels declare must answer --help from that virtualenv alone.
"""

from __future__ import annotations

import configparser
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.vendor_plugins import REPO, clean_environment, run, uv

DISTRIBUTIONS = {
    "noctaya_core",
    "noctaya_fetch",
    "noctaya_gateway",
    "noctaya_k8s",
    "noctaya_local",
    "noctaya_vendor_ascend",
    "noctaya_vendor_nvidia",
}
TIMEOUT = 120


def console_scripts(wheel: Path) -> set[str]:
    """The console_scripts a wheel declares in its entry_points.txt."""
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
        parser = configparser.ConfigParser(delimiters=("=",))
        parser.optionxform = str  # type: ignore[assignment,method-assign]
        for name in names:
            parser.read_string(archive.read(name).decode())
    return set(parser["console_scripts"]) if parser.has_section("console_scripts") else set()


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    dist = tmp_path_factory.mktemp("dist")
    env = clean_environment()
    run(uv(), "build", "--quiet", "--all-packages", "--wheel", "-o", dist, env=env)
    run(
        uv(), "export", "--quiet", "--frozen", "--no-dev", "--all-packages",
        "--no-emit-workspace", "-o", dist / "requirements.txt", env=env,
    )  # fmt: skip
    return sorted(dist.glob("*.whl"))


@pytest.fixture(scope="module")
def venv(wheels: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("venv") / "venv"
    env = clean_environment()
    python = venv / "bin" / "python"
    run(uv(), "venv", "--quiet", "--python", sys.executable, venv, env=env)
    requirements = wheels[0].parent / "requirements.txt"
    install = (uv(), "pip", "install", "--quiet", "--python", python, "--no-deps")
    run(*install, "--require-hashes", "-r", requirements, env=env)
    run(*install, *wheels, env=env)
    run(uv(), "pip", "check", "--python", python, env=env)
    return venv


def test_uv_builds_a_wheel_for_every_distribution(wheels: list[Path]) -> None:
    assert {wheel.name.split("-")[0] for wheel in wheels} == DISTRIBUTIONS


def test_the_packages_import_from_the_virtualenv_not_the_workspace(
    venv: Path, tmp_path: Path
) -> None:
    program = (
        "import noctaya.core, noctaya.k8s, noctaya.gateway, noctaya.fetch, noctaya.local\n"
        "for module in (\n"
        "    noctaya.core, noctaya.k8s, noctaya.gateway, noctaya.fetch, noctaya.local\n"
        "):\n"
        "    print(module.__file__)\n"
    )
    done = subprocess.run(
        [venv / "bin" / "python", "-c", program],
        cwd=tmp_path,
        env=clean_environment(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=True,
    )
    files = done.stdout.split()
    assert len(files) == 5
    assert all(Path(file).is_relative_to(venv) for file in files), files
    for pth in venv.glob("lib/python*/site-packages/*.pth"):
        assert str(REPO) not in pth.read_text(), f"{pth.name} points into the workspace"


def test_every_console_script_answers_help(wheels: list[Path], venv: Path, tmp_path: Path) -> None:
    scripts = set().union(*(console_scripts(wheel) for wheel in wheels))
    assert {
        "noctaya", "noctaya-operator", "noctaya-gateway", "noctaya-fetch", "noctaya-local"
    } <= scripts  # fmt: skip
    failures = {}
    for script in sorted(scripts):
        done = subprocess.run(
            [venv / "bin" / script, "--help"],
            cwd=tmp_path,
            env=clean_environment(),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        if done.returncode != 0 or "usage" not in done.stdout.lower():
            failures[script] = f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert not failures, "\n".join(f"{name}: {out}" for name, out in failures.items())


def test_the_gateway_wheel_requires_neither_grpcio_nor_protobuf(wheels: list[Path]) -> None:
    """Its scaler writes gRPC and protobuf itself; only local mode, which dials it as KEDA does,
    needs grpcio."""
    (gateway,) = [wheel for wheel in wheels if wheel.name.startswith("noctaya_gateway-")]
    with zipfile.ZipFile(gateway) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        lines = archive.read(metadata).decode().splitlines()
    required = {line.split()[1].lower() for line in lines if line.startswith("Requires-Dist:")}

    assert "noctaya-core" in required
    assert not required & {"grpcio", "protobuf"}, required
