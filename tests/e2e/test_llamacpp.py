"""A real engine through a pod: the llama.cpp runtime of examples/cpu/llamacpp.yaml (the cpu
vendor, the llama.cpp image `make images` builds) serves a tiny generated GGUF model, staged from
the box's registry by the staging Job, wakes from zero for a request of the `openai` SDK, answers
with the model's own tokens and goes back to zero.

The SDK runs in the control plane node's network namespace and calls the gateway Service's
address, as a client pod would; a streamed answer is held with heartbeats while the backend
starts, which the SDK's event parser must skip.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fetch.registry import RunningRegistry, push_files
from kubernetes import client as k8s_client
from support.cluster import Cluster, layout
from support.cluster.storage import NODE_LOCAL_CLASS
from support.custom_resources import CustomResources
from support.tiny_llama import PIECE_TEXTS, write_tiny_llama

from .pods import SERVICE_NAME
from .serving import REPO, diagnosed, wait_idle
from .test_delivery import REGISTRY, plain_http, registry, staging_job  # noqa: F401  (fixtures)
from .workloads import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

EXAMPLE = REPO / "examples" / "cpu" / "llamacpp.yaml"
MODEL_FILE = "tiny-llama.gguf"
TOKENS = 12
CLIENT = """
import json, sys
from openai import OpenAI

base_url, model, tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
client = OpenAI(base_url=base_url, api_key="unused", timeout=600, max_retries=0)
messages = [{"role": "user", "content": "Say something."}]
stream = client.chat.completions.create(
    model=model, messages=messages, max_tokens=tokens, stream=True
)
streamed = [
    chunk.choices[0].delta.content
    for chunk in stream
    if chunk.choices and chunk.choices[0].delta.content
]
whole = client.chat.completions.create(model=model, messages=messages, max_tokens=tokens)
print(json.dumps({
    "streamed": streamed,
    "text": whole.choices[0].message.content,
    "completion_tokens": whole.usage.completion_tokens,
}))
"""


def _example() -> tuple[dict[str, Any], dict[str, Any]]:
    documents = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    runtime = next(d for d in documents if d["kind"] == "InferenceRuntime")
    service = next(d for d in documents if d["kind"] == "LLMService")
    return runtime, service


@pytest.fixture
def llamacpp_runtime(api_client: k8s_client.ApiClient) -> Iterator[str]:
    """The example's runtime as written, but for the model file it opens (and a name of this
    test's own: runtimes are cluster-scoped)."""
    runtime, _ = _example()
    name = f"llamacpp-{secrets.token_hex(3)}"
    runtime["metadata"]["name"] = name
    container = runtime["spec"]["container"]
    container["args"] = [
        f"--model={{{{ .Model.Path }}}}/{MODEL_FILE}" if arg.startswith("--model=") else arg
        for arg in container["args"]
    ]
    resources = CustomResources(api_client)
    resources.create(runtime)
    yield name
    resources.delete("InferenceRuntime", name)


def _service(uri: str, runtime: str) -> dict[str, Any]:
    """The example's service for the staged file: one core (a box node has two, shared with
    the cluster's own pods), a node-local claim of the box's class, and a 10 s cooldown instead
    of the default 5 minutes before it goes back to zero."""
    _, service = _example()
    service["metadata"] = {"name": SERVICE_NAME}
    spec = service["spec"]
    spec["model"] = {"source": {"uri": uri}}
    spec["runtime"] = {**spec["runtime"], "name": runtime}
    spec["resources"] = {**spec["resources"], "accelerators": 1}
    spec["cache"] = {
        "strategy": "NodeLocalPVC",
        "size": "1Gi",
        "storageClassName": NODE_LOCAL_CLASS,
    }
    spec["scaling"] = {**spec.get("scaling", {}), "min": 0, "scaleDownStabilization": "10s"}
    return service


def _gateway_url(api_client: k8s_client.ApiClient, namespace: str) -> str:
    service = k8s_client.CoreV1Api(api_client).read_namespaced_service(SERVICE_NAME, namespace)
    (port,) = [p.port for p in service.spec.ports if p.name == "http"]
    return f"http://{service.spec.cluster_ip}:{port}/v1"


def test_llamacpp_wakes_from_zero_answers_the_openai_sdk_and_goes_back_to_zero(
    cluster: Cluster,
    api_client: k8s_client.ApiClient,
    namespace: str,
    registry: RunningRegistry,  # noqa: F811
    plain_http: None,  # noqa: F811
    llamacpp_runtime: str,
    tmp_path: Path,
) -> None:
    model = write_tiny_llama(tmp_path / MODEL_FILE)
    digest = push_files(registry, "models/tiny-llama", "v1", [model])
    with diagnosed(api_client, namespace):
        service = _service(f"oci://{REGISTRY}/models/tiny-llama@{digest}", llamacpp_runtime)
        CustomResources(api_client).create(service, namespace)
        wait_for(
            "the staging Job to succeed",
            lambda: (found := staging_job(api_client, namespace)) and found.status.succeeded,
            timeout=300,
        )
        wait_idle(api_client, namespace)

        (serving,) = [
            container
            for container in k8s_client.AppsV1Api(api_client)
            .read_namespaced_deployment(SERVICE_NAME, namespace)
            .spec.template.spec.containers
            if container.name == "serving"
        ]
        assert serving.image == "ghcr.io/noctaya/noctaya-llamacpp:0.1.0"
        assert serving.resources.limits["cpu"] == "1", "one core, and no device"
        assert set(serving.resources.limits) == {"cpu", "memory"}

        answered = subprocess.run(
            [
                *("ip", "netns", "exec", layout.CONTROL_PLANE.name),
                sys.executable,
                "-c",
                CLIENT,
                _gateway_url(api_client, namespace),
                SERVICE_NAME,
                str(TOKENS),
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert answered.returncode == 0, answered.stderr
        answer = json.loads(answered.stdout)
        assert len(answer["streamed"]) == TOKENS, answer
        assert set(answer["streamed"]) <= PIECE_TEXTS, answer
        assert answer["completion_tokens"] == TOKENS, answer
        assert answer["text"], answer

        wait_idle(api_client, namespace)
