"""The upgrade docs/operations/index.md gives, from the release before this one (its chart,
CRDs and images, built here from the commit `PREVIOUS`) to this one, on the box, with a service
serving throughout.

This release changes the CRDs, so the page's first step meets the field manager Helm installed
them with: `kubectl apply --server-side` without `--force-conflicts` is refused (the test shows
that too, so the flag never goes unnoticed), with it the new CRDs replace the old.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm.chart import DEFAULT_NAMESPACE, RELEASE, Helm
from images.conftest import built_images  # noqa: F401  (the session's image archives)
from kubernetes import client as k8s_client
from support.cluster import Cluster, locate_programs
from support.custom_resources import CustomResources

from .serving import (
    BOX_SETTINGS,
    OPERATOR,
    REPO,
    diagnosed,
    install_serving,
    operator_rolled_out,
    start_chat,
    status,
)
from .workloads import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

PREVIOUS = "79ebc01"
"""The last commit before the release that widened `InferenceRuntime.spec.family`."""
PREVIOUS_TAG = "0.1.0-previous"
"""The tag the previous build's images are pushed under: both builds call themselves 0.1.0."""
PAGE = REPO / "docs" / "operations" / "index.md"
APPLY_CRDS = "helm show crds charts/noctaya | kubectl apply --server-side --force-conflicts -f -"
UPGRADE = f"helm upgrade {RELEASE} charts/noctaya -n {DEFAULT_NAMESPACE}"
CRDS = ("inferenceruntimes.serving.noctaya.io", "llmservices.serving.noctaya.io")
BUILD_TIMEOUT = 1800


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The previous release's tree, its images built into `build/images` in it."""
    tree = tmp_path_factory.mktemp("previous-release")
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", PREVIOUS],
        capture_output=True,
        check=True,
        timeout=120,
    ).stdout
    tar_path = tree.with_suffix(".tar")
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(tree, filter="data")
    (tree / ".tools").symlink_to(REPO / ".tools")  # its images build with the same pinned uv
    built = subprocess.run(
        ["bash", str(tree / "images" / "build.sh")],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    assert built.returncode == 0, f"the previous release's images:\n{built.stderr[-3000:]}"
    return tree


def test_the_documented_upgrade_from_the_previous_release_keeps_a_service_serving(
    cluster: Cluster,
    api_client: k8s_client.ApiClient,
    namespace: str,
    installed: None,
    built_images: dict[str, Path],  # noqa: F811
    helm: Helm,
    previous: Path,
    gpus: None,
) -> None:
    page = PAGE.read_text()
    assert f"`{APPLY_CRDS}`" in page, "the page's CRD step"
    assert f"`{UPGRADE}`" in page, "the page's upgrade step"
    with (
        _previous_release_installed(cluster, helm, list(built_images.values()), previous),
        diagnosed(api_client, namespace),
    ):
        runtime, service = _previous_example(previous)
        resources = CustomResources(api_client)
        resources.create(runtime)
        resources.create(service, namespace)
        _answers(api_client, namespace)

        refused = _shell(cluster, helm, APPLY_CRDS.replace(" --force-conflicts", ""))
        assert refused.returncode != 0, refused.stdout
        assert "conflict" in refused.stderr.lower(), refused.stderr
        applied = _shell(cluster, helm, APPLY_CRDS)
        assert applied.returncode == 0, applied.stderr
        upgraded = _shell(cluster, helm, UPGRADE + "".join(f" --set {s}" for s in BOX_SETTINGS))
        assert upgraded.returncode == 0, upgraded.stderr
        wait_for("the operator rolled out", lambda: operator_rolled_out(api_client), 300)

        apps = k8s_client.AppsV1Api(api_client)
        deployment = apps.read_namespaced_deployment(OPERATOR, DEFAULT_NAMESPACE)
        image = deployment.spec.template.spec.containers[0].image
        assert not image.endswith(f":{PREVIOUS_TAG}"), image
        for name, served in _served_crds(api_client).items():
            assert _schema(served) == _schema(_chart_crd(name)), name
        _answers(api_client, namespace)  # the service the old operator made, under the new one


def _answers(api_client: k8s_client.ApiClient, namespace: str) -> None:
    def answered() -> bool:
        found = status(api_client, namespace, "demo")
        if found.get("phase") not in {"Ready", "ScaledToZero"}:
            return False
        exchange = start_chat(api_client, namespace, "demo")
        exchange.over.wait(120)
        return exchange.completed

    wait_for("the service answering", answered, timeout=300)


def _previous_example(previous: Path) -> list[dict[str, Any]]:
    """The previous release's box example, its images those of the previous build."""
    text = (previous / "examples" / "box" / "engine-stub.yaml").read_text()
    return list(yaml.safe_load_all(text.replace(":0.1.0", f":{PREVIOUS_TAG}")))


def _chart_crd(name: str) -> dict[str, Any]:
    for path in (REPO / "charts" / "noctaya" / "crds").glob("*.yaml"):
        crd = yaml.safe_load(path.read_text())
        if crd["metadata"]["name"] == name:
            return dict(crd)
    raise AssertionError(f"no CRD {name} in the chart")


def _schema(crd: dict[str, Any]) -> list[Any]:
    """Each version's name and OpenAPI schema, as the API server and the file spell them."""
    return [(version["name"], version["schema"]) for version in crd["spec"]["versions"]]


def _shell(cluster: Cluster, helm: Helm, command: str) -> subprocess.CompletedProcess[str]:
    """`command` as a user types it in a clone of this release, with the pinned helm and the
    box's kubectl and kubeconfig."""
    programs = locate_programs()
    path = f"{helm.binary.parent}:{programs.path('kubectl').parent}:{os.environ['PATH']}"
    env = {
        **os.environ,
        "PATH": path,
        "KUBECONFIG": str(cluster.kubeconfig),
        "HELM_CONFIG_HOME": str(helm.home / "config"),
        "HELM_CACHE_HOME": str(helm.home / "cache"),
        "HELM_DATA_HOME": str(helm.home / "data"),
    }
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@contextlib.contextmanager
def _previous_release_installed(
    cluster: Cluster, helm: Helm, archives: list[Path], previous: Path
) -> Iterator[None]:
    """The session's release (and its CRDs, with every service) replaced by the previous
    release's, installed as its guide said, with its images; afterwards this release installed
    again from scratch, as the session installed it, whatever state the test left."""
    kubeconfig = ("--kubeconfig", str(cluster.kubeconfig))
    try:
        _uninstall(cluster, helm)
        images = sorted((previous / "build" / "images").glob("*.oci.tar"))
        cluster.push_images(images, PREVIOUS_TAG)
        sets = [f"image.tag={PREVIOUS_TAG}", *BOX_SETTINGS]
        done = helm.run(
            "install", RELEASE, str(previous / "charts" / "noctaya"),
            "--namespace", DEFAULT_NAMESPACE, "--create-namespace",
            *(word for setting in sets for word in ("--set", setting)), *kubeconfig,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        wait_for(
            "the previous operator rolled out",
            lambda: operator_rolled_out(cluster.api_client),
            300,
        )
        yield
    finally:
        _uninstall(cluster, helm)
        install_serving(cluster, archives, helm)


def _uninstall(cluster: Cluster, helm: Helm) -> None:
    """`helm uninstall`, then the CRDs, which Helm leaves (and with them every service)."""
    done = helm.run(
        "uninstall", RELEASE, "--namespace", DEFAULT_NAMESPACE, "--wait", "--ignore-not-found",
        "--kubeconfig", str(cluster.kubeconfig),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    extensions = k8s_client.ApiextensionsV1Api(cluster.api_client)
    for name in _served_crds(cluster.api_client):
        extensions.delete_custom_resource_definition(name)
    wait_for("the CRDs gone", lambda: not _served_crds(cluster.api_client), timeout=180)


def _served_crds(api_client: k8s_client.ApiClient) -> dict[str, dict[str, Any]]:
    """Noctaya's CRDs as the API server holds them, by name, as JSON."""
    extensions = k8s_client.ApiextensionsV1Api(api_client)
    found = {}
    for name in CRDS:
        try:
            response = extensions.read_custom_resource_definition(name, _preload_content=False)
        except k8s_client.ApiException as error:
            if error.status == 404:
                continue
            raise
        found[name] = json.loads(response.data)
    return found
