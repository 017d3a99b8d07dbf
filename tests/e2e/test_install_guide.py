"""The install guide shows the `helm install` the lifecycle tests run (a change to it must reach
the page), and imports the archives of the images it uses (the chart's and its example runtime's)
under the path the build writes them to (test_getting_started_cluster.py runs the page's import
commands on every node)."""

from __future__ import annotations

import yaml
from images.conftest import archive

from .serving import HELM_INSTALL, REPO

GUIDE = REPO / "docs" / "getting-started.md"


def test_the_guide_installs_the_chart_as_the_tests_do() -> None:
    assert HELM_INSTALL in GUIDE.read_text().splitlines()


def test_the_guide_imports_the_archive_of_every_image_it_uses() -> None:
    runtime = next(
        document
        for document in yaml.safe_load_all((REPO / "examples/box/engine-stub.yaml").read_text())
        if document["kind"] == "InferenceRuntime"
    )
    example_image = runtime["spec"]["container"]["image"].rsplit("/", 1)[1].split(":")[0]
    lines = GUIDE.read_text().splitlines()
    for image in ("noctaya", example_image):
        path = archive(image).relative_to(REPO)
        assert f"ctr --namespace=k8s.io images import {path}" in lines
