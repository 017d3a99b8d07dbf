"""Minimal valid manifests of this project's resources, and a deep merge to vary them.

Tests state only what their scenario changes: `llmservice("x", {"scaling": {"min": 3}})`.
A `None` in the changes removes that key, so a test can also take a required field away.
"""

from __future__ import annotations

import copy

from .custom_resources import Manifest

API_VERSION = "serving.noctaya.io/v1alpha1"


def llmservice(name: str, changes: Manifest | None = None) -> Manifest:
    spec = {
        "model": {"source": {"uri": "hf://Qwen/Qwen3-8B"}},
        "runtime": {"name": "vllm-nvidia"},
    }
    return {
        "apiVersion": API_VERSION,
        "kind": "LLMService",
        "metadata": {"name": name},
        "spec": merged(spec, changes or {}),
    }


def inference_runtime(name: str, changes: Manifest | None = None) -> Manifest:
    spec = {
        "vendor": "nvidia",
        "container": {"image": "vllm/vllm-openai:v0.10.0", "port": {}},
        "accelerator": {"resourceName": "nvidia.com/gpu"},
    }
    return {
        "apiVersion": API_VERSION,
        "kind": "InferenceRuntime",
        "metadata": {"name": name},
        "spec": merged(spec, changes or {}),
    }


def merged(base: Manifest, changes: Manifest) -> Manifest:
    """`base` with `changes` merged in recursively; a `None` value deletes the key."""
    result = copy.deepcopy(base)
    for key, value in changes.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merged(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result
