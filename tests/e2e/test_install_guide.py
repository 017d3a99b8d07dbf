"""The install guide shows the commands the lifecycle tests run: the image imports and the
`helm install` (a change to either must reach the page)."""

from __future__ import annotations

from images.conftest import IMAGES, archive

from .serving import HELM_INSTALL, REPO

GUIDE = REPO / "docs" / "getting-started.md"


def test_the_guide_installs_the_chart_as_the_tests_do() -> None:
    assert HELM_INSTALL in GUIDE.read_text().splitlines()


def test_the_guide_imports_both_archives_as_the_tests_do() -> None:
    lines = GUIDE.read_text().splitlines()
    for image in IMAGES:
        path = archive(image).relative_to(REPO)
        assert f"ctr --namespace=k8s.io images import {path}" in lines
