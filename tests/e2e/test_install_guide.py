"""The install guide shows the `helm install` the lifecycle tests run (a change to it must reach
the page), and imports each archive the image build writes, under the path the build writes it
to (test_getting_started_cluster.py runs the page's import commands on every node)."""

from __future__ import annotations

from images.conftest import IMAGES, archive

from .serving import HELM_INSTALL, REPO

GUIDE = REPO / "docs" / "getting-started.md"


def test_the_guide_installs_the_chart_as_the_tests_do() -> None:
    assert HELM_INSTALL in GUIDE.read_text().splitlines()


def test_the_guide_imports_every_archive_the_build_writes() -> None:
    lines = GUIDE.read_text().splitlines()
    for image in IMAGES:
        path = archive(image).relative_to(REPO)
        assert f"ctr --namespace=k8s.io images import {path}" in lines
