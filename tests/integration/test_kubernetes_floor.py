"""Below the support matrix, the API server refuses the CRDs, for the reason the manual gives.

`make matrix` runs this module alone against the release below the oldest of
hack/kubernetes-matrix.env (the default run deselects it: on a supported release the session's
control plane has installed the CRDs already, which is the other half of the claim).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.control_plane import PROJECT_CRDS
from support.envtest import Binaries, ControlPlane, ControlPlaneError, install_crds
from support.envtest.binaries import kubernetes_version
from support.envtest.crds import crd_manifests
from support.envtest.prerequisites import REPO_ROOT

pytestmark = [pytest.mark.integration, pytest.mark.kubernetes_floor]

PAGE = REPO_ROOT / "docs" / "operations" / "kubernetes-versions.md"
MATRIX = REPO_ROOT / "hack" / "kubernetes-matrix.env"
_REFUSAL = re.compile(r"^> `(.+)`$", re.MULTILINE)


def below_matrix() -> str:
    for line in MATRIX.read_text().splitlines():
        if line.startswith("KUBERNETES_BELOW_MATRIX="):
            return line.split("=", 1)[1].strip()
    raise AssertionError(f"{MATRIX} names no KUBERNETES_BELOW_MATRIX")


def documented_refusal(page: Path = PAGE) -> str:
    """The API server's words the page quotes as the reason older releases fail."""
    (quoted,) = _REFUSAL.findall(page.read_text(encoding="utf-8"))
    return str(quoted)


def test_the_release_below_the_matrix_refuses_the_crds_as_documented(
    control_plane_binaries: Binaries,
) -> None:
    assert kubernetes_version() == below_matrix(), "run through `make matrix`"
    plane = ControlPlane(control_plane_binaries)
    try:
        plane.start()
        with pytest.raises(ControlPlaneError) as refused:
            install_crds(plane.api_client, crd_manifests([PROJECT_CRDS]))
    finally:
        plane.stop()
    assert documented_refusal() in str(refused.value)
