"""Compatibility: every version the page states is the pin in the file it names."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from . import markdown_tables
from .test_kubernetes_versions import matrix, pins

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "operations" / "compatibility.md"
HACK = REPO / "hack"
_VERSION = re.compile(r"\bv?\d+\.\d+(?:\.\d+)?(?:rc\d+)?(?:-[a-z0-9]+)?\b")


def helm_version() -> str:
    (version,) = re.findall(r"^HELM_VERSION=(\S+)$", (HACK / "build-helm.sh").read_text(), re.M)
    return version


def llama_cpp_python() -> str:
    requirements = (HACK / "llama-cpp" / "requirements.in").read_text()
    (version,) = re.findall(r"^llama-cpp-python\[server\]==(\S+)$", requirements, re.M)
    locked = (HACK / "llama-cpp" / "requirements.txt").read_text()
    assert f"\nllama-cpp-python=={version} " in locked
    return version


def release() -> str:
    pyproject = tomllib.loads((REPO / "packages" / "noctaya-k8s" / "pyproject.toml").read_text())
    return str(pyproject["project"]["version"])


def pinned_rows() -> dict[str, tuple[str, str]]:
    """Component → (version, pinned in), from the first table."""
    rows = markdown_tables.table_after(PAGE, "| Component | Version |")
    return {component: (version, source) for component, version, source, _ in rows}


def engine_images() -> dict[str, list[str]]:
    """Each runtime image of the cluster examples with an accelerator, with its examples."""
    found: dict[str, list[str]] = {}
    for path in sorted(REPO.glob("examples/*/*/runtime.yaml")):
        runtime = yaml.safe_load(path.read_text())
        profile = str(path.parent.relative_to(REPO / "examples"))
        found.setdefault(runtime["spec"]["container"]["image"], []).append(profile)
    return found


def test_kubernetes_is_the_tested_matrix_from_its_oldest_to_its_newest_release() -> None:
    version, source = pinned_rows()["Kubernetes"]
    assert version == f"{matrix()[0]} to {matrix()[-1]}"
    assert "`hack/kubernetes-matrix.env`" in source
    assert "(kubernetes-versions.md)" in PAGE.read_text()


def test_keda_is_the_release_the_clusters_and_the_integration_tests_run() -> None:
    version, source = pinned_rows()["KEDA"]
    assert version == pins("control-plane-versions.env")["KEDA_VERSION"]
    assert "`hack/control-plane-versions.env` (`KEDA_VERSION`)" in source
    # cluster-versions.env takes KEDA from control-plane-versions.env rather than pinning it
    assert "KEDA_VERSION" not in pins("cluster-versions.env")


def test_helm_is_the_binary_the_chart_tests_build() -> None:
    version, source = pinned_rows()["Helm"]
    assert version == helm_version()
    assert "`hack/build-helm.sh` (`HELM_VERSION`)" in source
    chart = yaml.safe_load((REPO / "charts" / "noctaya" / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2"


def test_python_is_the_images_interpreter_and_the_oldest_every_distribution_allows() -> None:
    version, source = pinned_rows()["Python"]
    root = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert root["project"]["requires-python"] == f">={version}"
    assert root["tool"]["mypy"]["python_version"] == version
    assert f'`requires-python = ">={version}"`' in source
    for pyproject in REPO.glob("packages/*/pyproject.toml"):
        project = tomllib.loads(pyproject.read_text())["project"]
        assert project["requires-python"] == f">={version}", pyproject
    rootfs = (REPO / "images" / "build-rootfs.sh").read_text()
    assert f"python{version}-minimal" in rootfs
    assert "bookworm" in rootfs


def test_llama_cpp_python_is_the_pin_local_mode_and_the_llamacpp_image_build() -> None:
    version, source = pinned_rows()["llama-cpp-python"]
    assert version == llama_cpp_python()
    assert "`hack/llama-cpp/requirements.in`" in source
    assert "requirements.in" in (REPO / "images" / "build-llama-cpp-wheel.sh").read_text()
    assert "requirements.in" in (HACK / "build-llama-cpp.sh").read_text()
    image = f"ghcr.io/noctaya/noctaya-llamacpp:{release()}"
    assert f"`{image}`" in PAGE.read_text()
    assert image in (REPO / "examples" / "cpu" / "llamacpp.yaml").read_text()


def test_the_engine_table_is_every_accelerator_examples_image() -> None:
    rows = markdown_tables.table_after(PAGE, "| Engine | Image | Examples |")
    documented = {
        image.strip("`"): re.findall(r"`([^`]+)`", examples) for _, image, examples in rows
    }
    assert documented == engine_images()


def test_the_nvidia_examples_select_gpu_feature_discoverys_product_label() -> None:
    assert "`nvidia.com/gpu.product` label" in PAGE.read_text()
    for path in REPO.glob("examples/nvidia/*/runtime.yaml"):
        runtime = yaml.safe_load(path.read_text())
        assert "nvidia.com/gpu.product" in runtime["spec"]["accelerator"]["nodeSelector"], path


def test_every_version_on_the_page_is_one_of_the_pins() -> None:
    known = {
        matrix()[0],
        matrix()[-1],
        pins("control-plane-versions.env")["KEDA_VERSION"],
        helm_version(),
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]["python_version"],
        llama_cpp_python(),
        release(),
    }
    known |= {image.rsplit(":", 1)[1] for image in engine_images()}
    stated = set(_VERSION.findall(PAGE.read_text()))
    assert stated - known == set()
