"""The commands of docs/operations/images.md, run on the box as the page writes them: every
archive `make images` writes pushed with the page's `skopeo copy` into the box's registry, the
chart installed with the page's `helm install --set image.registry=...` pulling the operator from
what was pushed, and the page's `ctr -n k8s.io images import` run against a node's containerd.

Two substitutions, both of the box's making: the page's `registry.example.com` is the box's
registry, which speaks plain HTTP, so `skopeo copy` gets the `--dest-tls-verify=false` the page
prescribes for such a registry; and the nodes' containerd reaches that registry as the mirror of
`ghcr.io` (tests/support/cluster/registry.py), so the chart is pointed at
`ghcr.io/getting-images/noctaya`, which the nodes resolve to the repository `getting-images/...`
the push wrote and that nothing else writes. `kind load image-archive` cannot run here: the box
is not a kind cluster and has no container daemon; its command is checked against the archives.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helm.chart import DEFAULT_NAMESPACE, RELEASE, Helm
from images.conftest import IMAGES, built_images, release  # noqa: F401  (the session's archives)
from images.oci import extract
from kubernetes import client as k8s_client
from support.cluster import Cluster
from support.cluster import registry as box_registry

from .serving import BOX_SETTINGS, HELM_INSTALL, OPERATOR, REPO, install, operator_pods
from .test_getting_started_cluster import _BLOCK, _commands

PAGE = REPO / "docs" / "operations" / "images.md"
EXAMPLE_REGISTRY = "registry.example.com"
PREFIX = "getting-images"
PLAIN_HTTP = "--dest-tls-verify=false"

pytestmark = pytest.mark.timeout(900)


def page_commands() -> dict[str, list[str]]:
    """The page's shell commands by the first word they run (skopeo, ctr, kind, helm, ...)."""
    found: dict[str, list[str]] = {}
    for block in _BLOCK.finditer(PAGE.read_text(encoding="utf-8")):
        if block[1] == "sh":
            for command in _commands(block[2]):
                found.setdefault(command.split()[0], []).append(command)
    return found


def archive_names() -> set[str]:
    return {f"build/images/{image}-{release()}.oci.tar" for image in IMAGES}


ROUTES = {
    "skopeo": rf"skopeo copy oci-archive:(\S+) docker://{re.escape(EXAMPLE_REGISTRY)}/noctaya/\S+",
    "ctr": r"ctr -n k8s\.io images import (\S+)",
    "kind": r"kind load image-archive (\S+)",
    "helm": (
        rf"{re.escape(HELM_INSTALL)} \\\n"
        rf"  --set (image\.registry={re.escape(EXAMPLE_REGISTRY)}/noctaya)"
    ),
}
"""The page's command of each route onto a cluster, its archive (or the helm setting) captured;
the page's other commands with the same tools (the kind registry's, ECR's) are not these."""


def route_commands(tool: str) -> list[re.Match[str]]:
    return [
        match
        for command in page_commands()[tool]
        if (match := re.fullmatch(ROUTES[tool], command)) is not None
    ]


def test_the_page_has_a_command_for_every_archive_and_target() -> None:
    for tool in ("skopeo", "ctr", "kind"):
        assert {match[1] for match in route_commands(tool)} == archive_names(), tool
    (helm,) = route_commands("helm")
    assert helm[1] == f"image.registry={EXAMPLE_REGISTRY}/noctaya"


@pytest.fixture
def reinstalled(cluster: Cluster, built_images: dict[str, Path], helm: Helm) -> Iterator[None]:  # noqa: F811
    """No release while the page's install runs; the session's install back afterwards (its
    runtime outlives the release, as the CRDs do)."""
    helm.run("uninstall", RELEASE, "--namespace", DEFAULT_NAMESPACE, "--wait",
             "--kubeconfig", str(cluster.kubeconfig))  # fmt: skip
    try:
        yield
    finally:
        helm.run("uninstall", RELEASE, "--namespace", DEFAULT_NAMESPACE, "--wait",
                 "--kubeconfig", str(cluster.kubeconfig))  # fmt: skip
        install(cluster, list(built_images.values()), helm, *BOX_SETTINGS)


@pytest.mark.e2e
def test_images_pushed_as_the_page_says_install_the_chart_from_the_registry(
    cluster: Cluster,
    built_images: dict[str, Path],  # noqa: F811
    helm: Helm,
    reinstalled: None,
    api_client: k8s_client.ApiClient,
    tmp_path: Path,
) -> None:
    pushed = f"{box_registry.ADDRESS}/{PREFIX}"
    for match in route_commands("skopeo"):
        run = match[0].replace("skopeo copy", f"skopeo copy {PLAIN_HTTP}", 1)
        run = run.replace(EXAMPLE_REGISTRY, pushed)
        done = subprocess.run(run.split(), cwd=REPO, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{run}\n{done.stderr}"

    ((setting,),) = [match.groups() for match in route_commands("helm")]
    install(cluster, [], helm, setting.replace(EXAMPLE_REGISTRY, f"ghcr.io/{PREFIX}"))

    expected = f"ghcr.io/{PREFIX}/noctaya/noctaya:{release()}"
    digest = extract(built_images["noctaya"], tmp_path / "noctaya").descriptor["digest"]
    pods = operator_pods(api_client)
    assert pods, f"no {OPERATOR} pod"
    for pod in pods:
        (status,) = pod.status.container_statuses
        assert status.image == expected, status.image
        assert status.ready, status
        assert status.image_id.endswith(digest), status.image_id  # the pushed image, pulled


@pytest.mark.e2e
def test_archives_imported_as_the_page_says_are_listed_by_the_nodes_containerd(
    cluster: Cluster,
    built_images: dict[str, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    ctr = shutil.which("ctr")
    assert ctr is not None, "ctr missing: run `bash hack/install-cluster-deps.sh`"
    node = cluster.nodes[-1]
    env = {
        "CONTAINERD_ADDRESS": str(cluster.folders.node(node).containerd_socket),
        "PATH": "/usr/bin:/bin",
    }
    for match in route_commands("ctr"):
        done = subprocess.run(
            [ctr, *match[0].split()[1:]],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, f"{match[0]}\n{done.stderr}"
    listed = subprocess.run(
        [ctr, "-n", "k8s.io", "images", "ls"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    digests = {line.split()[0]: line.split()[2] for line in listed.splitlines()[1:]}
    for image, path in built_images.items():
        layout = extract(path, tmp_path / image)
        assert digests.get(f"ghcr.io/noctaya/{image}:{release()}") == layout.descriptor["digest"]
