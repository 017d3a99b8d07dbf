"""llama.cpp's server as `hack/build-llama-cpp.sh` builds it, and the example runtime that runs it.

Tests run the example's InferenceRuntime as a user would, with two local changes: its command's
`python3` becomes the built environment's interpreter (where llama-cpp-python is installed),
and its port a free one.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import yaml
from noctaya.local.command import LOCAL_COMMAND_ANNOTATION

from .envtest.prerequisites import REPO_ROOT, PrerequisiteMissing, cached_folder

BUILD_SCRIPT = REPO_ROOT / "hack" / "build-llama-cpp.sh"
BUILD_COMMAND = "make llama-cpp"
EXAMPLE = REPO_ROOT / "examples" / "local" / "llama-cpp.yaml"


class LlamaCppMissing(PrerequisiteMissing):
    """The server is not built; the message names the build command."""


def locate_llama_cpp_python() -> Path:
    """The interpreter of the environment llama-cpp-python is built into."""
    python = cached_folder(BUILD_SCRIPT) / "bin" / "python"
    if not python.exists():
        raise LlamaCppMissing(
            f"llama.cpp's server is not built ({python} is missing); run `{BUILD_COMMAND}` first"
        )
    return python


def example_documents() -> tuple[dict[str, Any], dict[str, Any]]:
    """The example's InferenceRuntime and LLMService, as written."""
    runtime, service = yaml.safe_load_all(EXAMPLE.read_text(encoding="utf-8"))
    return runtime, service


def example_runtime(python: Path, port: int) -> dict[str, Any]:
    """The example's runtime, run by `python` and listening on 127.0.0.1:`port`."""
    runtime, _ = example_documents()
    annotations = runtime["metadata"]["annotations"]
    interpreter, *words = shlex.split(annotations[LOCAL_COMMAND_ANNOTATION])
    assert interpreter == "python3", annotations
    annotations[LOCAL_COMMAND_ANNOTATION] = shlex.join([str(python), *words])
    container = runtime["spec"]["container"]
    old = f"--port={container['port']['containerPort']}"
    assert old in container["args"], container["args"]
    container["args"] = [f"--port={port}" if arg == old else arg for arg in container["args"]]
    container["port"]["containerPort"] = port
    return runtime
