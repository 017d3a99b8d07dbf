"""The images as a runtime sees them: valid OCI layouts, a non-root config with the release's
labels, every command runnable as the image's user, and no shell in the main image."""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from support.ports import free_port
from support.tiny_llama import write_tiny_llama
from support.vendor_plugins import clean_environment, uv

from .conftest import IMAGES, REPO, release
from .containerd import private_containerd
from .oci import Bundle, Layout, Mount

pytestmark = pytest.mark.images

MAIN, ENGINE_STUB, LLAMACPP = IMAGES
ENTRYPOINTS = {
    MAIN: ["noctaya-gateway"],
    ENGINE_STUB: ["noctaya-engine-stub"],
    LLAMACPP: ["python", "-m", "llama_cpp.server"],
}
COMPILERS = ("cc", "gcc", "g++", "c++", "cmake", "ninja", "make")
MAX_LLAMACPP_PULL_BYTES = 200 * 1024 * 1024
SITE_PACKAGES = "opt/noctaya/lib/python3.11/site-packages"
SHELLS = ("sh", "bash", "dash", "ash", "busybox", "zsh")
MAX_MAIN_PULL_BYTES = 200 * 1024 * 1024
STARTUP_TIMEOUT = 60


def labels_env() -> dict[str, str]:
    lines = (REPO / "images" / "labels.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def console_scripts(rootfs: Path) -> set[str]:
    """The console scripts of the noctaya distributions installed in the image."""
    scripts: set[str] = set()
    for entry_points in (rootfs / SITE_PACKAGES).glob("noctaya*.dist-info/entry_points.txt"):
        parser = configparser.ConfigParser(delimiters=("=",))
        parser.optionxform = str  # type: ignore[assignment,method-assign]
        parser.read_string(entry_points.read_text())
        if parser.has_section("console_scripts"):
            scripts |= set(parser["console_scripts"])
    return scripts


@pytest.mark.parametrize("image", IMAGES)
def test_archive_is_an_oci_layout_whose_blobs_match_their_digests(
    layouts: dict[str, Layout], image: str
) -> None:
    layout = layouts[image]
    assert (layout.root / "oci-layout").read_text().strip() == '{"imageLayoutVersion":"1.0.0"}'
    descriptor = layout.descriptor
    assert descriptor["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert descriptor["annotations"] == {
        "org.opencontainers.image.ref.name": release(),
        "io.containerd.image.name": f"ghcr.io/noctaya/{image}:{release()}",
    }
    manifest = layout.manifest  # checks the manifest blob against the index
    assert manifest["config"]["mediaType"] == "application/vnd.oci.image.config.v1+json"
    layout.config  # noqa: B018 -- checks the config blob against the manifest
    for layer in manifest["layers"]:
        assert layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip"
        layout.blob(layer)
    config = layout.config
    assert len(config["rootfs"]["diff_ids"]) == len(manifest["layers"])
    assert len(config["history"]) == len(manifest["layers"])


def test_the_engine_stub_image_is_the_main_image_plus_one_layer(
    layouts: dict[str, Layout],
) -> None:
    main, stub = (layouts[image].manifest["layers"] for image in (MAIN, ENGINE_STUB))
    assert stub[:-1] == main
    assert len(stub) == len(main) + 1
    pull = sum(layer["size"] for layer in main)
    assert pull < MAX_MAIN_PULL_BYTES, f"the main image pulls {pull / 2**20:.0f} MiB"


@pytest.mark.parametrize("image", IMAGES)
def test_config_runs_as_non_root_with_the_release_labels(
    layouts: dict[str, Layout], image: str
) -> None:
    config = layouts[image].config["config"]
    labels = labels_env()
    assert config["User"] == "65532:65532"
    assert config["WorkingDir"] == "/home/nonroot"
    assert config["Entrypoint"] == ENTRYPOINTS[image]
    assert "PATH=/opt/noctaya/bin:/usr/bin:/bin" in config["Env"]
    assert config["Labels"] == {
        "org.opencontainers.image.title": image,
        "org.opencontainers.image.version": release(),
        "org.opencontainers.image.source": labels["SOURCE"],
        "org.opencontainers.image.licenses": labels["LICENSES"],
    }


def test_every_console_script_answers_help_as_the_image_user(
    bundles: dict[str, Bundle],
) -> None:
    bundle = bundles[MAIN]
    scripts = console_scripts(bundle.rootfs)
    assert {"noctaya-operator", "noctaya-gateway", "noctaya", "noctaya-fetch"} <= scripts
    assert "noctaya-engine-stub" in scripts
    failures = {}
    for script in sorted(scripts):
        assert (bundle.rootfs / "opt/noctaya/bin" / script).is_file(), script
        done = bundle.run(script, "--help")
        if done.returncode != 0 or "usage" not in done.stdout.lower():
            failures[script] = f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert not failures, "\n".join(f"{name}: {out}" for name, out in failures.items())
    whoami = bundle.run("python3", "-c", "import os; print(os.getuid(), os.getgid())")
    assert whoami.stdout.split() == ["65532", "65532"], whoami.stderr


IMPORT_EVERY_MODULE = """
import importlib, pkgutil, noctaya
for module in pkgutil.walk_packages(noctaya.__path__, "noctaya."):
    if not module.name.endswith(".__main__"):
        importlib.import_module(module.name)
"""


def test_every_module_imports_with_the_image_libraries(bundles: dict[str, Bundle]) -> None:
    """--help stops before most imports; native extensions (grpcio's needs libstdc++) load
    only when their module does."""
    done = bundles[MAIN].run("python3", "-c", IMPORT_EVERY_MODULE)
    assert done.returncode == 0, done.stderr


def test_the_main_image_has_no_shell_and_no_package_manager(bundles: dict[str, Bundle]) -> None:
    rootfs = bundles[MAIN].rootfs
    found = [
        str(path.relative_to(rootfs))
        for directory in ("bin", "sbin", "usr/bin", "usr/sbin", "usr/local/bin")
        for path in (rootfs / directory).glob("*")
        if path.name in SHELLS or path.name.startswith(("dpkg", "apt", "tar"))
    ]
    assert found == []
    assert bundles[MAIN].run("/bin/sh", "-c", "true").returncode != 0


def test_the_engine_stub_image_keeps_the_backend_contract(bundles: dict[str, Bundle]) -> None:
    """The operator gives backends a `/bin/sh -c sleep` preStop hook and `python3 -c` init
    containers; the stub stands in for vLLM, so it answers both."""
    bundle = bundles[ENGINE_STUB]
    done = bundle.run("/bin/sh", "-c", "sleep 0 && python3 -c 'import huggingface_hub'")
    assert done.returncode == 0, done.stderr
    assert bundle.run("noctaya-engine-stub", "--help").returncode == 0


def test_the_engine_stub_image_serves_a_streamed_chat_completion(
    bundles: dict[str, Bundle],
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {"STUB_LISTEN_ADDR": f"127.0.0.1:{port}", "STUB_TOKEN_COUNT": "3"}
    with bundles[ENGINE_STUB].serving(env) as container:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not _healthy(f"{base}/health"):
            assert container.poll() is None, container.communicate()[0].decode()
            assert time.monotonic() < deadline, "the engine stub did not get healthy"
            time.sleep(0.1)
        body = json.dumps({"model": "m", "stream": True, "messages": []}).encode()
        request = urllib.request.Request(
            f"{base}/v1/chat/completions", body, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=STARTUP_TIMEOUT) as response:
            stream = response.read().decode()
    assert all(f"tok{n}" in stream for n in range(3)), stream
    assert stream.rstrip().endswith("data: [DONE]"), stream


def test_the_llamacpp_image_serves_a_real_model_without_a_compiler(
    layouts: dict[str, Layout], bundles: dict[str, Bundle], tmp_path: Path
) -> None:
    """llama-cpp-python's server, as local mode runs it, configured by its environment (the
    server's settings read MODEL, HOST and PORT), answers with the model's own word pieces."""
    pull = sum(layer["size"] for layer in layouts[LLAMACPP].manifest["layers"])
    assert pull < MAX_LLAMACPP_PULL_BYTES, f"the llama.cpp image pulls {pull / 2**20:.0f} MiB"
    rootfs = bundles[LLAMACPP].rootfs
    bins = ("usr/bin", "usr/local/bin")
    found = [c for c in COMPILERS for d in bins if (rootfs / d / c).exists()]
    assert found == []
    (tmp_path / "models").mkdir()
    model = write_tiny_llama(tmp_path / "models" / "tiny-llama.gguf")
    model.chmod(0o644)  # read by the image's user
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {"MODEL": "/models/tiny-llama.gguf", "HOST": "127.0.0.1", "PORT": str(port)}
    mounts = (Mount("/models", model.parent, read_only=True),)
    with bundles[LLAMACPP].serving(env, mounts) as container:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not _healthy(f"{base}/v1/models"):
            assert container.poll() is None, container.communicate()[0].decode()
            assert time.monotonic() < deadline, "the llama.cpp server did not start"
            time.sleep(0.2)
        body = json.dumps(
            {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        ).encode()
        request = urllib.request.Request(
            f"{base}/v1/chat/completions", body, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=STARTUP_TIMEOUT) as response:
            answer = json.load(response)
    assert answer["usage"]["completion_tokens"] == 4, answer
    assert answer["choices"][0]["message"]["content"].strip(), answer


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


IMAGE_PACKAGES = (
    "noctaya-core",
    "noctaya-k8s",
    "noctaya-gateway",
    "noctaya-fetch",
    "noctaya-vendor-nvidia",
    "noctaya-vendor-ascend",
    "noctaya-vendor-cpu",
)
"""What runs in a cluster; local mode (noctaya-local, with grpcio and protobuf) is not carried."""


def test_the_image_holds_the_cluster_distributions_and_their_locked_dependencies_only(
    bundles: dict[str, Bundle],
) -> None:
    packages = [arg for name in IMAGE_PACKAGES for arg in ("--package", name)]
    exported = subprocess.run(
        [uv(), "export", "--frozen", "--no-dev", *packages, "--no-emit-workspace"],
        cwd=REPO,
        env=clean_environment(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    locked = set()
    for line in exported.splitlines():
        if re.match(r"[A-Za-z0-9]", line):
            requirement = Requirement(line.rstrip(" \\"))
            if requirement.marker is None or requirement.marker.evaluate():
                (pin,) = requirement.specifier
                locked.add((requirement.name, pin.version))
    ours = {(name, release()) for name in IMAGE_PACKAGES}
    installed = set()
    for dist_info in (bundles[MAIN].rootfs / SITE_PACKAGES).glob("*.dist-info"):
        name, version = dist_info.name.removesuffix(".dist-info").rsplit("-", 1)
        installed.add((name, version))

    def normal(pairs: set[tuple[str, str]]) -> set[tuple[str, str]]:
        return {(re.sub(r"[-_.]+", "-", name).lower(), version) for name, version in pairs}

    assert normal(installed) == normal(locked | ours)
    assert not {name for name, _ in normal(installed)} & {"noctaya-local", "grpcio", "protobuf"}
    packages_built = (REPO / "images/build-wheels.sh").read_text()
    assert f"packages=({' '.join(IMAGE_PACKAGES)})" in packages_built


def test_ctr_imports_each_archive_under_its_release_name(
    built_images: dict[str, Path], layouts: dict[str, Layout], tmp_path: Path
) -> None:
    if shutil.which("containerd") is None or shutil.which("ctr") is None:
        reason = "containerd missing: run `apt-get install containerd`"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    with private_containerd(tmp_path) as socket:
        ctr = ("ctr", "--address", str(socket))
        for path in built_images.values():
            subprocess.run([*ctr, "images", "import", str(path)], check=True, timeout=300)
        listed = subprocess.run(
            [*ctr, "images", "ls"], check=True, capture_output=True, text=True, timeout=60
        ).stdout
    names = {line.split()[0]: line.split()[2] for line in listed.splitlines()[1:]}
    assert names == {
        f"ghcr.io/noctaya/{image}:{release()}": layout.descriptor["digest"]
        for image, layout in layouts.items()
    }


def test_the_dockerfile_builds_what_build_sh_builds(layouts: dict[str, Layout]) -> None:
    """The Dockerfile cannot run here; its image config must still match the archives'."""
    text = (REPO / "images" / "Dockerfile").read_text()
    instructions = re.sub(r"\\\n\s*", " ", text)
    labels = labels_env()
    for name in ("SOURCE", "LICENSES"):
        assert f"ARG {name}={labels[name]}\n" in instructions
    assert "bash images/build-rootfs.sh /rootfs /shell" in instructions
    assert "bash images/install-wheels.sh /rootfs /dist /usr/local/bin/uv" in instructions
    main = layouts[MAIN].config["config"]
    assert f"USER {main['User']}\n" in instructions
    assert f"WORKDIR {main['WorkingDir']}\n" in instructions
    assert f"ENV {' '.join(main['Env'])}\n" in instructions
    for image in (MAIN, ENGINE_STUB):  # the llama.cpp image comes from build.sh only
        assert f'ENTRYPOINT ["{ENTRYPOINTS[image][0]}"]' in instructions, image
