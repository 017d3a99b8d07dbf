"""What Getting started says about its manifests, checked against what they do.

The page's commands run in test_getting_started.py (locally) and tests/e2e (on a cluster); this
module keeps its statements true: how the local demo differs from its cluster twin, how vLLM is
installed and run by local mode, which pods need a private registry's pull Secret, and when a
backend stops.
"""

from __future__ import annotations

import json
import re
import shlex
import stat
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from local.support import LocalMode, write_manifest
from noctaya.core.plugins import VendorRegistry
from noctaya.core.scaling import READY_GRACE_SECONDS
from noctaya.k8s.offline import render_files
from noctaya.k8s.operator.flags import DEFAULT_GATEWAY_IMAGE
from support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "getting-started.md"
LOCAL_DEMO = REPO / "examples" / "local" / "engine-stub.yaml"
CLUSTER_DEMO = REPO / "examples" / "box" / "engine-stub.yaml"
VLLM_EXAMPLE = REPO / "examples" / "local" / "vllm.yaml"
A10_SERVICE = REPO / "examples" / "nvidia" / "a10" / "llmservice.yaml"
BUILT_IMAGES = REPO / "images" / "build.sh"


def page() -> str:
    return " ".join(PAGE.read_text(encoding="utf-8").split())


def rendered(*paths: Path, gateway_replicas: int = 1) -> list[dict[str, Any]]:
    outcome = render_files(
        list(paths),
        VendorRegistry.discover(),
        gateway_image=DEFAULT_GATEWAY_IMAGE,
        gateway_replicas=gateway_replicas,
    )
    assert outcome.problems == []
    return outcome.objects


def documents(path: Path) -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(path.read_text()) if doc}


def stub_env(path: Path) -> dict[str, str]:
    container = documents(path)["InferenceRuntime"]["spec"]["container"]
    return {item["name"]: item["value"] for item in container["env"]}


def test_the_demo_manifest_is_valid_for_a_cluster_and_ignored_annotation_aside() -> None:
    assert {obj["kind"] for obj in rendered(LOCAL_DEMO)} >= {"Deployment", "ScaledObject"}
    annotations = documents(LOCAL_DEMO)["InferenceRuntime"]["metadata"]["annotations"]
    assert list(annotations) == ["serving.noctaya.io/local-command"]
    assert "exactly what a cluster takes" not in page()


def test_the_local_demo_differs_from_its_cluster_twin_where_the_page_says() -> None:
    text = page()
    local_runtime = documents(LOCAL_DEMO)["InferenceRuntime"]["spec"]["container"]
    cluster_runtime = documents(CLUSTER_DEMO)["InferenceRuntime"]["spec"]["container"]
    # the image: only the cluster twin's is one `make images` builds (ghcr.io/noctaya/<name>)
    built = re.findall(r"for image in ([\w -]+); do", BUILT_IMAGES.read_text())
    assert "engine-stub" in built[0].split()
    assert cluster_runtime["image"] == "ghcr.io/noctaya/noctaya-engine-stub:0.1.0"
    assert f"`{cluster_runtime['image']}`, the one `make images` builds" in text
    assert f"`{local_runtime['image']}` here is never built" in text
    # where the engine listens: loopback here, every address in the cluster twin
    assert stub_env(LOCAL_DEMO)["STUB_LISTEN_ADDR"].startswith("127.0.0.1:")
    assert stub_env(CLUSTER_DEMO)["STUB_LISTEN_ADDR"] == ":8000"
    assert f"`{stub_env(LOCAL_DEMO)['STUB_LISTEN_ADDR']}` here is out of reach" in text
    # the cache: the default makes a 50Gi claim, the cluster twin turns it off
    claims = [obj for obj in rendered(LOCAL_DEMO) if obj["kind"] == "PersistentVolumeClaim"]
    (claim,) = claims
    assert claim["metadata"]["name"] == "demo-cache"
    assert claim["spec"]["resources"]["requests"]["storage"] == "50Gi"
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert "a 50Gi `ReadWriteOnce` claim `demo-cache`" in text
    assert documents(CLUSTER_DEMO)["LLMService"]["spec"]["cache"] == {"strategy": "None"}
    assert not [obj for obj in rendered(CLUSTER_DEMO) if obj["kind"] == "PersistentVolumeClaim"]


def test_vllm_is_installed_beside_the_locked_environment_not_into_it() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert "```sh\nuv tool install vllm\n```" in text
    for doc in REPO.joinpath("docs").rglob("*.md"):
        assert ".venv/bin/pip" not in doc.read_text(encoding="utf-8"), doc


def test_the_vllm_example_runs_the_vllm_command_found_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in `vllm` outside the project's environment, as `uv tool install` puts it: it
    records its arguments and serves them with the engine stub where they say to listen."""
    tools = tmp_path / "tools-bin"
    tools.mkdir()
    argv_file = tmp_path / "vllm-argv.json"
    stub = Path(sys.executable).parent / "noctaya-engine-stub"
    standin = tools / "vllm"
    standin.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"open({str(argv_file)!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
        "words = dict(arg.split('=', 1) for arg in sys.argv[1:] if arg.startswith('--'))\n"
        "os.environ['STUB_LISTEN_ADDR'] = words['--host'] + ':' + words['--port']\n"
        f"os.execv({str(stub)!r}, [{str(stub)!r}])\n"
    )
    standin.chmod(standin.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    # Another test may serve the demo on 18000 at the same time: the example on a free port.
    port = free_port()
    example = VLLM_EXAMPLE.read_text().replace("18000", str(port))
    manifest = write_manifest(tmp_path / "vllm.yaml", *yaml.safe_load_all(example))
    (service,) = [doc for doc in yaml.safe_load_all(example) if doc["kind"] == "LLMService"]

    local = LocalMode(manifest)
    try:
        url = local.url()
        body = {"model": service["metadata"]["name"], "messages": [], "stream": False}
        answer = _post_json(f"{url}/chat/completions", body)
        assert answer["choices"][0]["message"]["content"].startswith("tok0")
    finally:
        local.teardown()
    assert json.loads(argv_file.read_text()) == [
        "serve",
        "Qwen/Qwen3-0.6B",
        "--served-model-name=qwen3-0-6b",
        "--host=127.0.0.1",
        f"--port={port}",
    ]
    start = f".venv/bin/noctaya-local {VLLM_EXAMPLE.relative_to(REPO)}"
    assert f"```sh\n{start}\n```" in PAGE.read_text(encoding="utf-8")
    assert shlex.split(start)[1] == "examples/local/vllm.yaml"


def _post_json(url: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def test_every_pod_the_operator_runs_takes_the_services_pull_secrets(
    tmp_path: Path,
) -> None:
    """The chart's imagePullSecrets reach the operator's pods only; the service's reach the
    backend as well as the pods from the Noctaya image; the page says so."""
    runtime, service = (
        documents(A10_SERVICE.parent / "runtime.yaml")["InferenceRuntime"],
        documents(A10_SERVICE)["LLMService"],
    )
    service["spec"]["imagePullSecrets"] = [{"name": "private-registry"}]
    manifest = write_manifest(tmp_path / "private.yaml", runtime, service)
    pods = {
        obj["metadata"]["name"]: obj["spec"]["template"]["spec"]
        for obj in rendered(manifest, gateway_replicas=2)
        if obj["kind"] in {"Deployment", "Job"}
    }
    from_noctaya_image = {
        name
        for name, pod in pods.items()
        if any(c["image"] == DEFAULT_GATEWAY_IMAGE for c in pod["containers"])
    }
    assert from_noctaya_image == {
        "qwen3-8b-a10-gateway",
        "qwen3-8b-a10-scaler",
        "qwen3-8b-a10-prewarm",
    }
    backends = set(pods) - from_noctaya_image
    assert backends, "the backend runs the runtime's image"
    for name in pods:
        assert pods[name]["imagePullSecrets"] == [{"name": "private-registry"}], name
    assert (
        "each `LLMService`'s `spec.imagePullSecrets` (Secrets in the service's namespace) for "
        "every pod the operator creates there: the backend (whose runtime image, such as the "
        "engine stub, may come from that registry too), the gateway, the demand "
        "aggregator (gateway replicas > 1) and the prewarm or staging Job"
    ) in page()


def test_when_a_backend_stops_names_the_grace_and_each_services_stabilization() -> None:
    text = page()
    assert READY_GRACE_SECONDS == 15.0
    assert text.count("never sooner than 15 seconds after the") == 2
    local = documents(LOCAL_DEMO)["LLMService"]["spec"]["scaling"]["scaleDownStabilization"]
    a10 = documents(A10_SERVICE)["LLMService"]["spec"]["scaling"]["scaleDownStabilization"]
    assert (local, a10) == ("3s", "5m")
    assert "`scaling.scaleDownStabilization` (3 s here)" in text
    assert "`scaling.scaleDownStabilization` (5 minutes here)" in text
    local_mode = " ".join((REPO / "examples" / "local" / "README.md").read_text().split())
    assert "holds demand for 15 s (activation grace)" in local_mode
    assert "stops a cooldown after its last request ends, or after that grace" in local_mode


def _label_rows() -> dict[str, str]:
    """The cluster part's table of the node labels the examples select and who sets each."""
    part = PAGE.read_text(encoding="utf-8").split("## On a cluster", 1)[1]
    table = part.split("| Label the examples select | Set by |", 1)[1].split("\n\n", 1)[0]
    return dict(re.findall(r"^\| `([^`]+)` \| (.+) \|$", table, re.MULTILINE))


def test_the_cluster_part_says_who_sets_every_node_label_the_examples_select() -> None:
    selected: dict[str, set[str]] = {}
    for path in sorted((REPO / "examples").rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc and doc["kind"] == "InferenceRuntime":
                selector = doc["spec"].get("accelerator", {}).get("nodeSelector", {})
                for key, value in selector.items():
                    selected.setdefault(key, set()).add(value)
    rows = _label_rows()
    assert set(rows) == set(selected)
    assert "GPU Feature Discovery" in rows["nvidia.com/gpu.product"]
    assert "device plugin itself sets no labels" in rows["nvidia.com/gpu.product"]
    assert "MindCluster" in rows["accelerator"]
    assert (
        "kubectl label node <node> serving.noctaya.io/ascend-product="
        in rows["serving.noctaya.io/ascend-product"]
    )
    for key, values in selected.items():  # every value an example uses is named in its row
        assert all(f"`{value}`" in rows[key] for value in values), key
    assert "an on-premises A10" in rows["nvidia.com/gpu.product"]


def test_the_cluster_part_says_a_cache_claim_needs_a_storage_class() -> None:
    """The a10 example's claim names no class: the cluster's default StorageClass serves it."""
    (claim,) = [o for o in rendered(A10_SERVICE.parent) if o["kind"] == "PersistentVolumeClaim"]
    assert "storageClassName" not in claim["spec"]
    text = page()
    assert (
        "A model cache on a claim (`NodeLocalPVC`, the default, or `SharedPVC`) needs a default "
        "StorageClass"
    ) in text
    assert "or one named in the service's `spec.cache.storageClassName`" in text
    assert "for `SharedPVC`, one that offers `ReadWriteMany`" in text
