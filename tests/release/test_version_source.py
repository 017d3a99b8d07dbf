"""One release version: noctaya-k8s's package version names every image the packaging points at.

The chart, kustomize, the operator's --gateway-image default and images/build.sh all follow it,
so a release bumps the packages and the chart and nothing is left pointing at an older image.
"""

from __future__ import annotations

import subprocess
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import yaml
from noctaya.k8s.operator.flags import DEFAULT_GATEWAY_IMAGE, build_parser

REPO = Path(__file__).resolve().parents[2]
MAIN_IMAGE = "ghcr.io/noctaya/noctaya"


def _release() -> str:
    with (REPO / "packages" / "noctaya-k8s" / "pyproject.toml").open("rb") as file:
        release: str = tomllib.load(file)["project"]["version"]
    return release


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def test_every_distribution_has_the_release_version() -> None:
    versions = {}
    for pyproject in sorted(REPO.glob("packages/*/pyproject.toml")):
        with pyproject.open("rb") as file:
            project = tomllib.load(file)["project"]
        versions[project["name"]] = project["version"]
    assert len(versions) >= 6
    assert set(versions.values()) == {_release()}, versions
    assert version("noctaya-k8s") == _release()


def test_the_image_build_tags_with_the_release_version() -> None:
    printed = subprocess.run(
        ["bash", str(REPO / "images" / "version.sh")],
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    assert printed == f"{_release()}\n"


def test_the_operator_renders_gateways_from_the_release_main_image() -> None:
    assert f"{MAIN_IMAGE}:{_release()}" == DEFAULT_GATEWAY_IMAGE
    assert build_parser().parse_args([]).gateway_image == DEFAULT_GATEWAY_IMAGE


def test_the_chart_tags_both_images_with_the_release_version() -> None:
    chart = _yaml(REPO / "charts" / "noctaya" / "Chart.yaml")
    image = _yaml(REPO / "charts" / "noctaya" / "values.yaml")["image"]
    assert chart["appVersion"] == _release()
    assert image["tag"] == "", "an empty tag is the chart's appVersion"
    for repository in (image["operator"], image["gateway"]):
        assert f"{image['registry']}/{repository}" == MAIN_IMAGE


def test_kustomize_names_the_release_main_image_for_the_operator_and_its_gateways() -> None:
    (entry,) = _yaml(REPO / "config" / "default" / "kustomization.yaml")["images"]
    assert entry == {"name": MAIN_IMAGE, "newTag": _release()}
    manager = next(
        doc
        for doc in yaml.safe_load_all((REPO / "config" / "manager" / "manager.yaml").read_text())
        if doc and doc["kind"] == "Deployment"
    )
    (container,) = manager["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"{MAIN_IMAGE}:{_release()}"
    assert f"--gateway-image={MAIN_IMAGE}:{_release()}" in container["args"]
