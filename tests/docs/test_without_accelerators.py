"""Trying it without GPUs: the files, images, chart values, versions and object names the page
gives exist and are what the renderer makes of its runtime and service; the gateway asks the
path the runtime's readiness probe asks, and the page's reasons for serving one file over oci://
rather than the hub's repository still hold."""

from __future__ import annotations

import ast
import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from noctaya.gateway.process.config import load_config
from noctaya.k8s.cli import main
from support.llama_cpp import LlamaCppMissing, locate_llama_cpp_python

from .rendering import Objects
from .rendering import rendered as render_objects

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "without-accelerators.md"
EXAMPLE = REPO / "examples" / "cpu" / "llamacpp.yaml"
NOCTAYA = Path(sys.executable).with_name("noctaya")
NAMESPACE = "ai"
FETCHER = REPO / "packages/noctaya-fetch/src/noctaya/fetch/huggingface.py"
_ROUTES = (
    "import json; from llama_cpp.server.app import router; "
    "print(json.dumps([route.path for route in router.routes]))"
)
"""Prints the paths llama-cpp-python's OpenAI server answers."""
REGISTRY_REPOSITORY = "registry.example.com/models/qwen2.5-0.5b-instruct-gguf"


def text() -> str:
    return PAGE.read_text(encoding="utf-8")


def flat() -> str:
    return " ".join(text().split())


def shell_lines() -> list[str]:
    blocks = re.findall(r"^```sh\n(.*?)^```$", text(), re.DOTALL | re.MULTILINE)
    return [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]


def release() -> str:
    pyproject = tomllib.loads((REPO / "packages" / "noctaya-k8s" / "pyproject.toml").read_text())
    return str(pyproject["project"]["version"])


def example() -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(EXAMPLE.read_text()) if doc}


def service() -> dict[str, Any]:
    return example()["LLMService"]


def sed_file(tmp_path: Path, name: str) -> Path:
    """The file `name`, written by the page's own `sed` command for it."""
    (command,) = [
        line
        for line in shell_lines()
        if line.startswith("sed ") and shlex.split(line)[-2:] == [">", name]
    ]
    done = subprocess.run(
        shlex.split(command)[:-2], cwd=REPO, capture_output=True, text=True, check=True, timeout=30
    )
    path = tmp_path / name
    path.write_text(done.stdout)
    return path


def runtime_file(tmp_path: Path) -> Path:
    return sed_file(tmp_path, "llamacpp-runtime.yaml")


def service_file(tmp_path: Path) -> Path:
    return sed_file(tmp_path, "llamacpp-oci-service.yaml")


def rendered(paths: list[Path]) -> Objects:
    return render_objects(paths, NAMESPACE)


def serving_container(objects: dict[tuple[str, str], Any], name: str) -> dict[str, Any]:
    pod = objects["Deployment", name]["spec"]["template"]["spec"]
    (container,) = [c for c in pod["containers"] if c["name"] == "serving"]
    return dict(container)


def gateway_env(objects: dict[tuple[str, str], Any], name: str) -> dict[str, str]:
    pod = objects["Deployment", f"{name}-gateway"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return {env["name"]: env.get("value", "") for env in container["env"]}


def test_the_example_exists_is_shown_and_validates_with_the_noctaya_command() -> None:
    assert f'--8<-- "{EXAMPLE.relative_to(REPO)}"' in text()
    assert text().count("--8<--") == 1  # the service is the example's, shown with it
    done = subprocess.run(
        [str(NOCTAYA), "validate", "-f", str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_the_sed_commands_write_the_runtime_and_the_service_each_alone(tmp_path: Path) -> None:
    documents = [d for d in yaml.safe_load_all(runtime_file(tmp_path).read_text()) if d]
    assert documents == [example()["InferenceRuntime"]]
    assert "kubectl apply -f llamacpp-runtime.yaml" in shell_lines()
    written = service_file(tmp_path).read_text()
    assert [d for d in yaml.safe_load_all(written) if d] == [service()]
    assert "`oras push`" in written  # says where the file and the digest come from
    assert "`oras resolve`" in written
    assert service()["spec"]["runtime"]["name"] == documents[0]["metadata"]["name"]


def test_the_pages_validate_and_render_commands_accept_the_runtime_and_service(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime = runtime_file(tmp_path)
    copied = service_file(tmp_path)
    for line in shell_lines():
        if line.startswith(".venv/bin/noctaya "):
            words = shlex.split(line)[1:]
            files = {"llamacpp-runtime.yaml": str(runtime), copied.name: str(copied)}
            assert main([files.get(word, word) for word in words]) == 0, line
    capsys.readouterr()
    assert sum(line.startswith(".venv/bin/noctaya ") for line in shell_lines()) == 2


def test_the_runtime_reads_the_pushed_file_from_the_staged_oci_folder(tmp_path: Path) -> None:
    objects = rendered([runtime_file(tmp_path), service_file(tmp_path)])
    name = service()["metadata"]["name"]
    uri = service()["spec"]["model"]["source"]["uri"]
    digest = uri.rpartition("@sha256:")[2]
    (curl,) = [line for line in shell_lines() if line.startswith("curl -LO ")]
    filename = curl.rsplit("/", 1)[1]
    assert f"oras push {REGISTRY_REPOSITORY}:q4_k_m {filename}" in shell_lines()
    assert f"oras resolve {REGISTRY_REPOSITORY}:q4_k_m" in shell_lines()
    assert uri.startswith(f"oci://{REGISTRY_REPOSITORY}@sha256:")
    args = serving_container(objects, name)["args"]
    assert f"--model=/cache/oci/sha256-{digest}/{filename}" in args
    assert f"`{filename}`" in text()
    # The staging Job fills the claim and the backend waits for it.
    assert ("Job", f"{name}-prewarm") in objects
    assert ("PersistentVolumeClaim", f"{name}-cache") in objects
    assert f"The Job `{name}-prewarm` stages the file into the claim `{name}-cache`" in flat()
    pod = objects["Deployment", name]["spec"]["template"]["spec"]
    assert "wait-for-prewarm" in [c["name"] for c in pod.get("initContainers", [])]


def test_accelerators_are_the_cores_limited_and_the_threads_the_service_asks_for(
    tmp_path: Path,
) -> None:
    objects = rendered([runtime_file(tmp_path), service_file(tmp_path)])
    spec = service()["spec"]
    container = serving_container(objects, service()["metadata"]["name"])
    cores = spec["resources"]["accelerators"]
    assert container["resources"]["limits"]["cpu"] == str(cores)
    assert "cpu" not in container["resources"].get("requests", {})
    assert f"--n_threads={cores}" in container["args"]
    assert f"--n_threads_batch={cores}" in container["args"]
    override = spec["runtime"]["argsOverride"]
    assert container["args"][-len(override) :] == override  # appended
    assert spec["cache"]["strategy"] == "NodeLocalPVC"
    runtime = example()["InferenceRuntime"]["spec"]
    assert (runtime["vendor"], runtime["accelerator"]["resourceName"]) == ("cpu", "cpu")
    assert "`vendor: cpu`" in flat()
    assert "`accelerator.resourceName: cpu`" in flat()


def test_the_names_and_defaults_the_page_uses_are_the_rendered_ones(tmp_path: Path) -> None:
    objects = rendered([runtime_file(tmp_path), service_file(tmp_path)])
    name = service()["metadata"]["name"]
    (port,) = objects["Service", name]["spec"]["ports"]
    assert port["port"] == 80
    assert f"kubectl -n {NAMESPACE} rollout status deployment/{name}-gateway" in shell_lines()
    assert f"kubectl -n {NAMESPACE} port-forward service/{name} 8080:80" in shell_lines()
    env = gateway_env(objects, name)
    assert json.loads(env["NOCTAYA_SERVED_MODELS"]) == [name]
    assert env["NOCTAYA_ACTIVATION_TIMEOUT"] == "5m0s"
    assert "(5 minutes here)" in flat()
    scaled = objects["ScaledObject", name]["spec"]
    assert (scaled["minReplicaCount"], scaled["cooldownPeriod"]) == (0, 300)
    assert "`scaling.scaleDownStabilization` (5 minutes by default)" in flat()

    assert f'"model": "{name}"' in text()
    (python,) = re.findall(r"^```python\n(.*?)^```$", text(), re.DOTALL | re.MULTILINE)
    calls = [node for node in ast.walk(ast.parse(python)) if isinstance(node, ast.Call)]
    keywords = {k.arg: k.value for call in calls for k in call.keywords}
    assert ast.literal_eval(keywords["base_url"]) == "http://127.0.0.1:8080/v1"
    assert ast.literal_eval(keywords["model"]) == name


def test_the_image_version_and_chart_values_named_exist() -> None:
    image = f"ghcr.io/noctaya/noctaya-llamacpp:{release()}"
    assert example()["InferenceRuntime"]["spec"]["container"]["image"] == image
    assert f"`{image}`" in text()
    images_page = (REPO / "docs" / "operations" / "images.md").read_text()
    for archive in (f"noctaya-{release()}.oci.tar", f"noctaya-llamacpp-{release()}.oci.tar"):
        assert f"`{archive}`" in text()
        assert f"`{archive}`" in images_page

    pins = dict(
        line.split("=", 1)
        for line in (REPO / "hack" / "control-plane-versions.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    keda = pins["KEDA_VERSION"]
    assert f"KEDA {keda} (pinned in `hack/control-plane-versions.env`" in flat()
    assert f"app version is {keda.removeprefix('v')}" in flat()

    install = "helm install noctaya charts/noctaya --namespace noctaya-system --create-namespace"
    assert install in shell_lines()
    assert install in (REPO / "docs" / "operations" / "index.md").read_text()
    assert "deployment/noctaya-controller-manager" in (REPO / "docs/getting-started.md").read_text()
    values = yaml.safe_load((REPO / "charts" / "noctaya" / "values.yaml").read_text())
    assert values["fetch"]["plainHTTPRegistries"] == []
    assert "registry" in values["image"]
    assert "`--set 'fetch.plainHTTPRegistries={kind-registry:5000}'`" in flat()


def test_a_hf_service_would_fetch_the_whole_repository_into_a_path_llama_cannot_open(
    tmp_path: Path,
) -> None:
    """Why the page serves one file over oci:// instead of the hub's repository."""
    uri = "hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF"
    assert f"`{uri}`" in text()
    fetcher = FETCHER.read_text()
    assert "snapshot_download(" in fetcher
    assert "allow_patterns" not in fetcher  # the whole repository
    hub = service()
    hub["spec"]["model"]["source"]["uri"] = uri
    (path := tmp_path / "hub-service.yaml").write_text(yaml.safe_dump(hub))
    objects = rendered([runtime_file(tmp_path), path])
    (model,) = [
        a
        for a in serving_container(objects, hub["metadata"]["name"])["args"]
        if a.startswith("--model=")
    ]
    assert model == f"--model={uri.removeprefix('hf://')}/qwen2.5-0.5b-instruct-q4_k_m.gguf"
    assert not model.removeprefix("--model=").startswith("/")  # relative to the image's home


def test_the_gateway_asks_the_runtimes_readiness_path_which_llama_cpp_answers_at_once() -> None:
    """llama.cpp's server has no /health; /v1/models waits behind the running request."""
    assert "!!! warning" not in text()
    assert "The gateway checks readiness on the runtime's readiness probe path" in flat()
    runtime = example()["InferenceRuntime"]["spec"]
    probe = runtime["health"]["readiness"]["httpGet"]["path"]
    assert probe == runtime["health"]["startup"]["httpGet"]["path"] == "/docs"
    assert f"(`{probe}` here, as llama.cpp's server has no `/health`)" in flat()
    assert "--interrupt_requests=False" in runtime["container"]["args"]
    objects = rendered([EXAMPLE])
    env = gateway_env(objects, service()["metadata"]["name"])
    assert env["NOCTAYA_BACKEND_READINESS_PATH"] == probe
    assert (
        load_config(
            {"NOCTAYA_BACKEND_URL": "http://backend", "NOCTAYA_BACKEND_READINESS_PATH": probe}
        ).backend_readiness_path
        == probe
    )
    try:
        python = locate_llama_cpp_python()  # the llama-cpp-python version the image installs
    except LlamaCppMissing as missing:
        pytest.skip(str(missing))
    routes = subprocess.run(
        [str(python), "-c", _ROUTES], capture_output=True, text=True, check=True, timeout=120
    )
    assert "/health" not in set(json.loads(routes.stdout))
