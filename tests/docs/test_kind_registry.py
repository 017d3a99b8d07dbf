"""kind, as Getting the images and Trying it without GPUs tell it: the archives land in each
node's containerd under the names the chart and the examples use, and the registry beside kind
has one name for the machine that pushes (`localhost:5001`) and another for everything the
cluster reads (`kind-registry:5000`): containerd's `hosts.toml`, the chart's images, the staging
Job's plain-HTTP registry and the service's `oci://` model."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml
from noctaya.core.model_source import resolve_model

REPO = Path(__file__).resolve().parents[2]
IMAGES = REPO / "docs" / "operations" / "images.md"
WITHOUT_GPUS = REPO / "docs" / "without-accelerators.md"
CHART = REPO / "charts" / "noctaya"
PUSHED_AS = "localhost:5001"
CLUSTER_NAME = "kind-registry:5000"


def section(path: Path, heading: str) -> str:
    text = path.read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n")
    end = text.find("\n#", start + len(heading) + 2)
    return text[start : end if end != -1 else len(text)]


def commands(text: str) -> list[list[str]]:
    blocks = re.findall(r"^```sh\n(.*?)^```$", text, re.DOTALL | re.MULTILINE)
    lines = [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    return [shlex.split(line) for line in lines if line.strip()]


def built_names() -> set[str]:
    build = (REPO / "images" / "build.sh").read_text()
    (registry,) = re.findall(r"registry=\$\{REGISTRY:-([^}]+)\}", build)
    (images,) = re.findall(r"for image in ([\w -]+); do", build)
    return {
        f"{registry}/{('noctaya-' + image).removesuffix('-noctaya')}" for image in images.split()
    }


def test_the_loaded_images_are_checked_under_the_names_the_build_gives_them() -> None:
    kind = section(IMAGES, "### kind")
    assert built_names() == {
        "ghcr.io/noctaya/noctaya",
        "ghcr.io/noctaya/noctaya-engine-stub",
        "ghcr.io/noctaya/noctaya-llamacpp",
    }
    for name in built_names():
        assert f"`{name}`" in kind
    checks = re.findall(r"^docker exec kind-control-plane (.*) \| grep (\S+)$", kind, re.MULTILINE)
    assert checks == [
        ("crictl images", "ghcr.io/noctaya"),
        ("ctr -n k8s.io images ls -q", "ghcr.io/noctaya"),
    ]
    assert "`kind get nodes` lists them, by default `kind-control-plane`" in " ".join(kind.split())


def test_the_machine_pushes_to_localhost_and_the_cluster_reads_kind_registry() -> None:
    beside = section(IMAGES, "### A registry beside kind")
    run = [c for c in commands(beside) if c[:2] == ["docker", "run"]]
    assert len(run) == 1
    assert "127.0.0.1:5001:5000" in run[0]
    assert "kind-registry" in run[0]
    assert ["docker", "network", "connect", "kind", "kind-registry"] in commands(beside)
    # containerd's plain-HTTP setting is for the name the nodes pull by
    assert f"/etc/containerd/certs.d/{CLUSTER_NAME}/hosts.toml" in beside
    assert f'[host."http://{CLUSTER_NAME}"]' in beside
    assert 'config_path = "/etc/containerd/certs.d"' in beside
    # every push goes to the machine's name, over plain HTTP
    pushes = [c for c in commands(beside) if c[:2] in (["skopeo", "copy"], ["oras", "push"])]
    assert pushes
    for push in pushes:
        assert any(PUSHED_AS in word for word in push), push
        assert "--dest-tls-verify=false" in push or "--plain-http" in push, push
    (oras,) = [c for c in pushes if c[0] == "oras"]
    pushed_repository = next(w for w in oras if w.startswith(PUSHED_AS)).partition(":q")[0]
    # everything the cluster reads names the cluster's name, with the same repositories
    (helm,) = [c for c in commands(beside) if c[:2] == ["helm", "install"]]
    assert f"image.registry={CLUSTER_NAME}/noctaya" in helm
    assert f"fetch.plainHTTPRegistries={{{CLUSTER_NAME}}}" in helm
    uri = f"oci://{pushed_repository.replace(PUSHED_AS, CLUSTER_NAME)}@sha256:"
    assert f"`{uri}...`" in beside
    model = resolve_model(uri + "0" * 64)
    assert model.oci_registry == CLUSTER_NAME  # the Job's --plain-http follows this match
    assert f"`{CLUSTER_NAME}/noctaya/noctaya-llamacpp:0.1.0`" in beside
    assert "`localhost` inside a pod is the pod itself" in " ".join(beside.split())


def test_the_chart_passes_the_plain_http_registry_to_the_operator() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["fetch"]["plainHTTPRegistries"] == []
    template = (CHART / "templates" / "deployment.yaml").read_text()
    assert "range .Values.fetch.plainHTTPRegistries" in template
    assert "--plain-http-registry={{ . }}" in template


def test_trying_it_without_gpus_names_the_registry_beside_kind_the_same_way() -> None:
    page = " ".join(WITHOUT_GPUS.read_text(encoding="utf-8").split())
    assert "(operations/images.md#a-registry-beside-kind)" in page
    assert f"`{PUSHED_AS}` from your machine, `{CLUSTER_NAME}` from the cluster" in page
    assert f"`--set 'fetch.plainHTTPRegistries={{{CLUSTER_NAME}}}'`" in page
    assert f"`oras push --plain-http {PUSHED_AS}/models/" in page
    assert f"`oci://{CLUSTER_NAME}/models/qwen2.5-0.5b-instruct-gguf@sha256:...`" in page
