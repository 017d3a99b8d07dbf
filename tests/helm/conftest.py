"""Fixtures for the chart tests: the helm binary (skip locally, fail under CI=true when missing)
and the default render, shared because most tests only read it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .chart import Helm, HelmMissing, Manifest, locate_helm


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    try:
        binary = locate_helm()
    except HelmMissing as missing:
        if os.environ.get("CI", "").lower() in {"true", "1"}:
            pytest.fail(f"{missing}. CI=true: chart tests fail instead of skipping.", pytrace=False)
        pytest.skip(str(missing))
    return Helm(binary, Path(tmp_path_factory.mktemp("helm-home")))


@pytest.fixture(scope="session")
def default_render(helm: Helm) -> list[Manifest]:
    return helm.render()


@pytest.fixture(scope="session")
def helm_crds(helm: Helm) -> list[Manifest]:
    """The CRDs `helm install` would create (`helm template --include-crds`)."""
    return [o for o in helm.render(include_crds=True) if o["kind"] == "CustomResourceDefinition"]
