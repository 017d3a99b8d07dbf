"""A hub model's token and the runtime's mirror and proxy settings reach both the prewarm Job and
the serving container, the token only as a reference to its Secret."""

from __future__ import annotations

import json

import pytest
from kubernetes import client as k8s_client
from noctaya.k8s.reconciler import LLMServiceReconciler
from support.custom_resources import CustomResources
from support.manifests import inference_runtime, llmservice

from .cluster import read

pytestmark = pytest.mark.integration

TOKEN = {"secretKeyRef": {"name": "hub-token", "key": "token"}}
STEERING = [
    {"name": "HF_ENDPOINT", "value": "https://hf-mirror.example"},
    {"name": "HF_HUB_ETAG_TIMEOUT", "value": "30"},
    {"name": "MODELSCOPE_DOMAIN", "value": "modelscope.example"},
    {"name": "HTTPS_PROXY", "value": "http://proxy.example:3128"},
    {"name": "no_proxy", "valueFrom": {"configMapKeyRef": {"name": "proxy", "key": "exempt"}}},
]
NOT_STEERING = [
    {"name": "VLLM_LOGGING_LEVEL", "value": "INFO"},
    {"name": "MODELSCOPE_CACHE", "value": "/elsewhere"},
    {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "runtime-token", "key": "t"}}},
]


@pytest.mark.parametrize(
    ("uri", "variable"),
    [
        ("hf://acme/gated-model", "HF_TOKEN"),
        ("modelscope://acme/gated-model", "MODELSCOPE_API_TOKEN"),
    ],
)
def test_a_hub_secret_ref_becomes_the_token_variable_of_the_job_and_the_serving_container(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    uri: str,
    variable: str,
) -> None:
    resources.create(
        inference_runtime(runtime_name, {"container": {"env": [*NOT_STEERING, *STEERING]}})
    )
    changes = {
        "model": {"source": {"uri": uri, "secretRef": {"name": "hub-token"}}},
        "runtime": {"name": runtime_name},
        "cache": {"prewarm": True},
    }
    resources.create(llmservice("gated", changes), namespace)  # admission accepts it

    reconciler.reconcile((namespace, "gated"))

    job = read(api_client, "batch/v1", "Job", namespace, "gated-prewarm")
    [prewarm] = job["spec"]["template"]["spec"]["containers"]
    job_env = prewarm["env"]
    assert [entry["name"] for entry in job_env[:6]] == [
        "HF_HOME",
        "MODELSCOPE_CACHE",
        "HOME",
        "TMPDIR",
        "XDG_CACHE_HOME",
        "TORCH_DEVICE_BACKEND_AUTOLOAD",
    ]
    assert job_env[-1] == {"name": variable, "valueFrom": TOKEN}
    copied = [entry for entry in job_env if entry in STEERING]
    assert copied == STEERING, "every hub-steering entry, in the runtime's order"
    assert not [entry for entry in job_env if entry in NOT_STEERING]
    assert [entry["name"] for entry in job_env].count(variable) == 1

    deployment = read(api_client, "apps/v1", "Deployment", namespace, "gated")
    [serving] = deployment["spec"]["template"]["spec"]["containers"]
    by_name = {entry["name"]: entry for entry in serving["env"]}
    assert len(by_name) == len(serving["env"]), "one entry per name, or the apply is refused"
    assert by_name[variable] == {"name": variable, "valueFrom": TOKEN}, "the service's wins"
    assert by_name["MODELSCOPE_CACHE"]["value"] == "/cache/modelscope", "the cache's wins"
    assert all(entry in serving["env"] for entry in STEERING)
    assert "hub-token" not in json.dumps(prewarm["command"])
