"""The distributions as users install them: what `make dist` builds, nothing from the workspace.

`make dist` (into a folder of the test's own, with uv offline: everything comes from uv's cache
and uv.lock) builds an sdist of every distribution and each wheel from its sdist. The wheels and
the dependencies pinned by uv.lock (with their hashes; uv looks them up in the package index as
a user's install does, since `uv sync` leaves no index pages in its cache for an offline
`uv pip install` to resolve from) go into a fresh virtualenv with --no-deps, so a dependency
missing from a distribution's metadata shows up in `uv pip check`; every console script the
wheels declare must answer --help from that virtualenv alone, and its `noctaya validate` and
`noctaya-local` serve an example as the manual says.
"""

from __future__ import annotations

import configparser
import json
import os
import signal
import subprocess
import sys
import tarfile
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml
from noctaya.local import log_lines
from support.ports import free_port
from support.vendor_plugins import REPO, clean_environment, run, uv

DISTRIBUTIONS = {
    package.name.replace("-", "_")
    for package in (REPO / "packages").iterdir()
    if (package / "pyproject.toml").is_file()
}
EXAMPLE = REPO / "examples" / "local" / "engine-stub.yaml"
CPU_EXAMPLE = REPO / "examples" / "cpu" / "llamacpp.yaml"
LICENSE = (REPO / "LICENSE").read_bytes()
TIMEOUT = 120
SERVE_WITHIN = 60.0


@dataclass(frozen=True)
class Dist:
    folder: Path
    build_log: str

    @property
    def wheels(self) -> list[Path]:
        return sorted(self.folder.glob("*.whl"))

    @property
    def sdists(self) -> list[Path]:
        return sorted(self.folder.glob("*.tar.gz"))


def offline() -> dict[str, str]:
    return clean_environment(UV_OFFLINE="1")


def console_scripts(wheel: Path) -> set[str]:
    """The console_scripts a wheel declares in its entry_points.txt."""
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
        parser = configparser.ConfigParser(delimiters=("=",))
        parser.optionxform = str  # type: ignore[assignment,method-assign]
        for name in names:
            parser.read_string(archive.read(name).decode())
    return set(parser["console_scripts"]) if parser.has_section("console_scripts") else set()


def wheel_metadata(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return archive.read(metadata).decode().splitlines()


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    folder = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        ["make", "--no-print-directory", "dist", f"DIST={folder}"],
        cwd=REPO,
        env=offline(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, f"make dist failed:\n{done.stdout}\n{done.stderr}"
    run(
        uv(), "export", "--quiet", "--frozen", "--no-dev", "--all-packages",
        "--no-emit-workspace", "-o", folder / "requirements.txt", env=offline(),
    )  # fmt: skip
    return Dist(folder, done.stdout + done.stderr)


@pytest.fixture(scope="module")
def venv(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("venv") / "venv"
    python = venv / "bin" / "python"
    run(uv(), "venv", "--quiet", "--python", sys.executable, venv, env=offline())
    install = (uv(), "pip", "install", "--quiet", "--python", python, "--no-deps")
    requirements = dist.folder / "requirements.txt"
    run(*install, "--require-hashes", "-r", requirements, env=clean_environment())
    run(*install, *dist.wheels, env=offline())
    run(uv(), "pip", "check", "--python", python, env=offline())
    return venv


def test_make_dist_builds_an_sdist_and_from_it_a_wheel_for_every_distribution(
    dist: Dist,
) -> None:
    assert {wheel.name.split("-")[0] for wheel in dist.wheels} == DISTRIBUTIONS
    assert {sdist.name.split("-")[0] for sdist in dist.sdists} == DISTRIBUTIONS
    assert dist.build_log.count("Building wheel from source distribution") == len(DISTRIBUTIONS)


def test_every_distribution_carries_the_apache_license(dist: Dist) -> None:
    for wheel in dist.wheels:
        assert "License-Expression: Apache-2.0" in wheel_metadata(wheel), wheel.name
        with zipfile.ZipFile(wheel) as archive:
            (license_file,) = [n for n in archive.namelist() if n.endswith("/licenses/LICENSE")]
            assert archive.read(license_file) == LICENSE, wheel.name
    for sdist in dist.sdists:
        with tarfile.open(sdist) as archive:
            root = sdist.name.removesuffix(".tar.gz")
            member = archive.extractfile(f"{root}/LICENSE")
            assert member is not None, sdist.name
            assert member.read() == LICENSE, sdist.name


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


def test_every_console_script_answers_help(dist: Dist, venv: Path, tmp_path: Path) -> None:
    scripts = set().union(*(console_scripts(wheel) for wheel in dist.wheels))
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


def test_the_gateway_wheel_requires_neither_grpcio_nor_protobuf(dist: Dist) -> None:
    """Its scaler writes gRPC and protobuf itself; only local mode, which dials it as KEDA does,
    needs grpcio."""
    (gateway,) = [wheel for wheel in dist.wheels if wheel.name.startswith("noctaya_gateway-")]
    lines = wheel_metadata(gateway)
    required = {line.split()[1].lower() for line in lines if line.startswith("Requires-Dist:")}

    assert "noctaya-core" in required
    assert not required & {"grpcio", "protobuf"}, required


@pytest.mark.parametrize(
    ("example", "documents"), [(EXAMPLE, 2), (CPU_EXAMPLE, 2)], ids=["engine-stub", "cpu"]
)
def test_the_installed_noctaya_validates_an_example_with_its_vendor_plugins(
    venv: Path, tmp_path: Path, example: Path, documents: int
) -> None:
    """The runtime's vendor (nvidia, cpu) is found through the installed wheels' entry points."""
    done = subprocess.run(
        [venv / "bin" / "noctaya", "validate", "-f", example],
        cwd=tmp_path,
        env=clean_environment(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{documents} documents valid"), done.stdout


def test_the_installed_noctaya_local_serves_the_example_and_answers_a_request(
    venv: Path, tmp_path: Path
) -> None:
    """The example as `make demo` serves it, its engine moved to a free port; the engine is the
    wheel's noctaya-engine-stub, found on the PATH of the virtualenv's bin folder."""
    manifest = tmp_path / "engine-stub.yaml"
    manifest.write_text(yaml.safe_dump_all(on_port(EXAMPLE, free_port())), encoding="utf-8")
    bin_folder = venv / "bin"
    env = clean_environment(PATH=f"{bin_folder}{os.pathsep}{os.environ['PATH']}")
    local = subprocess.Popen(
        [bin_folder / "noctaya-local", manifest, "--listen", "127.0.0.1:0",
         "--logs", tmp_path / "logs", "--cache", tmp_path / "cache"],
        cwd=tmp_path,
        env=env | {"PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
    )  # fmt: skip
    try:
        url = serving_url(local)
        response = httpx.post(
            f"{url}/chat/completions",
            json={"model": "demo", "messages": [{"role": "user", "content": "hello"}]},
            timeout=SERVE_WITHIN,
        )
        assert response.status_code == 200, response.text
        answer = json.loads(response.text)["choices"][0]["message"]["content"]
        assert answer.startswith("tok0 tok1"), answer
    finally:
        local.send_signal(signal.SIGTERM)
        code = local.wait(timeout=TIMEOUT)
    assert code == 0


def on_port(example: Path, port: int) -> list[dict[str, object]]:
    """The example's documents with its engine listening on 127.0.0.1:`port`."""
    documents = list(yaml.safe_load_all(example.read_text(encoding="utf-8")))
    for document in documents:
        if document["kind"] == "InferenceRuntime":
            container = document["spec"]["container"]
            container["port"]["containerPort"] = port
            for variable in container["env"]:
                if variable["name"] == "STUB_LISTEN_ADDR":
                    variable["value"] = f"127.0.0.1:{port}"
    return documents


def serving_url(local: subprocess.Popen[str]) -> str:
    """The OpenAI base URL (…/v1) noctaya-local announces; its whole output if it never does."""
    lines: list[str] = []
    found = threading.Event()
    url: list[str] = []

    def read() -> None:
        assert local.stdout is not None
        for line in local.stdout:
            lines.append(line)
            if not found.is_set() and (match := log_lines.SERVING_RE.search(line)):
                url.append(match["url"])
                found.set()

    threading.Thread(target=read, daemon=True).start()
    assert found.wait(SERVE_WITHIN), "noctaya-local never served:\n" + "".join(lines)
    return url[0]
