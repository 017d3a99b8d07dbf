"""The Kubernetes versions page is the support matrix the tests run, and the chart agrees."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "operations" / "kubernetes-versions.md"
HACK = REPO / "hack"


def pins(name: str) -> dict[str, str]:
    lines = (HACK / name).read_text().splitlines()
    pairs = [line.split("=", 1) for line in lines if line and not line.startswith("#")]
    return {key: value.strip('"') for key, value in pairs}


def matrix() -> list[str]:
    return pins("kubernetes-matrix.env")["KUBERNETES_MATRIX"].split()


def minor(release: str) -> str:
    return ".".join(release.removeprefix("v").split(".")[:2])


def test_the_page_lists_exactly_the_matrix_oldest_first() -> None:
    rows = re.findall(r"^\| (v[0-9.]+) \| yes \| (.+) \|$", PAGE.read_text(), re.MULTILINE)
    assert [release for release, _ in rows] == matrix()
    assert len(rows) >= 3
    assert rows[0][1].startswith("yes, the oldest")
    assert rows[-1][1].startswith("yes, the newest")
    assert all(ci.startswith("on demand") for _, ci in rows[1:-1])


def test_the_newest_is_the_control_plane_the_suite_runs_on() -> None:
    assert matrix()[-1] == pins("control-plane-versions.env")["KUBERNETES_VERSION"]
    assert matrix() == sorted(matrix(), key=lambda r: tuple(map(int, r[1:].split("."))))


def test_the_charts_kube_version_starts_at_the_oldest_tested_release() -> None:
    chart = yaml.safe_load((REPO / "charts" / "noctaya" / "Chart.yaml").read_text())
    assert chart["kubeVersion"] == f">={minor(matrix()[0])}.0-0"
    text = PAGE.read_text()
    assert f"from **{minor(matrix()[0])}**" in text
    assert f"`kubeVersion` is `>={minor(matrix()[0])}.0-0`" in text
    faq = " ".join((REPO / "docs" / "faq.md").read_text().split())
    tested = f"tested on, {minor(matrix()[0])} to {minor(matrix()[-1])}: [Kubernetes versions]"
    assert tested in faq
    below = minor(pins("kubernetes-matrix.env")["KUBERNETES_BELOW_MATRIX"])
    assert f"says why {below} and older refuse the CRDs" in faq


def test_the_release_below_is_the_one_the_page_says_fails() -> None:
    below = pins("kubernetes-matrix.env")["KUBERNETES_BELOW_MATRIX"]
    assert int(minor(below).split(".")[1]) == int(minor(matrix()[0]).split(".")[1]) - 1
    assert f"Kubernetes {minor(below)} and older refuse" in " ".join(PAGE.read_text().split())


def test_make_test_runs_the_oldest_and_make_matrix_runs_them_all() -> None:
    def recipe(target: str) -> list[str]:
        dry = subprocess.run(
            ["make", "-n", target], cwd=REPO, capture_output=True, text=True, check=True
        )
        return dry.stdout.splitlines()

    assert "bash hack/test-kubernetes-matrix.sh --oldest" in recipe("test")
    assert "bash hack/test-kubernetes-matrix.sh" in recipe("matrix")
    for command in ("make matrix", "bash hack/test-kubernetes-matrix.sh --oldest"):
        assert command in PAGE.read_text()


def test_the_manual_states_keda_support_as_the_release_the_tests_run() -> None:
    """KEDA is the release pinned for the integration tests and the end-to-end cluster, which
    shares it (cluster-versions.env); the manual names that release, not a range."""
    keda = pins("control-plane-versions.env")["KEDA_VERSION"]
    assert "KEDA_VERSION" not in pins("cluster-versions.env")  # shared, not pinned twice
    for page in ("faq.md", "getting-started.md", "operations/index.md"):
        text = " ".join((REPO / "docs" / page).read_text().split())
        assert f"tested with KEDA {keda}" in text, page
        assert "any 2.x" not in text, page
