"""The local mode page, as a user runs it: `noctaya-local` on `examples/local/multi-model` with the
`curl` commands and the `openai` SDK script the page includes, pointed at the port local mode
actually took; and the figures the page states, against the code that makes them true.

The example's llama.cpp services are served as written but for what this machine can run
without a download: their runtime's `python3` is the environment `make llama-cpp` built, each
engine gets a free port, and each service a generated tiny model in place of its Hugging Face
file (`tests/support/tiny_llama.py`).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from local.support import LocalMode, wait_until
from noctaya.local import log_lines
from noctaya.local.command import LOCAL_COMMAND_ANNOTATION
from noctaya.local.live_files import WATCH_INTERVAL
from noctaya.local.readiness import LOADING_PERIOD
from noctaya.local.swaps import DEFAULT_MIN_RESIDENCY
from noctaya.local.workloads import GATEWAY_STOP_GRACE
from support.envtest.prerequisites import required
from support.llama_cpp import locate_llama_cpp_python
from support.ports import free_port
from support.tiny_llama import PIECE_TEXTS, write_tiny_llama
from support.vendor_plugins import clean_environment, uv

REPO = Path(__file__).resolve().parents[2]
README = REPO / "examples" / "local" / "README.md"
FOLDER = REPO / "examples" / "local" / "multi-model"
DOCUMENTED_ADDRESS = "127.0.0.1:8080"
_SNIPPET = re.compile(r'--8<-- "([^"]+)"')


def text() -> str:
    return " ".join(README.read_text(encoding="utf-8").split())


def snippet(suffix: str) -> Path:
    included = [REPO / name for name in _SNIPPET.findall(README.read_text(encoding="utf-8"))]
    (found,) = [path for path in included if path.suffix == suffix]
    return found


def runnable_here(document: dict[str, Any], work: Path, python: Path) -> dict[str, Any]:
    """`document` with what this machine cannot run as written replaced (see the docstring)."""
    spec = document["spec"]
    if document["kind"] == "InferenceRuntime":
        port, new = spec["container"]["port"]["containerPort"], free_port()
        annotations = document["metadata"]["annotations"]
        words = shlex.split(annotations[LOCAL_COMMAND_ANNOTATION])
        if words[0] == "python3":
            annotations[LOCAL_COMMAND_ANNOTATION] = shlex.join([str(python), *words[1:]])
        rendered = yaml.safe_dump(spec).replace(str(port), str(new))
        document["spec"] = yaml.safe_load(rendered)
    elif any("--hf_model_repo_id" in arg for arg in spec["runtime"].get("argsOverride", ())):
        name = document["metadata"]["name"]
        model = write_tiny_llama(work / f"{name}.gguf", seed=len(name))
        spec["runtime"]["argsOverride"] = [f"--model={model}"]
    return document


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    python = required(locate_llama_cpp_python)
    work = tmp_path_factory.mktemp("multi-model")
    served = work / "models"
    served.mkdir()
    for path in FOLDER.glob("*.yaml"):
        documents = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
        changed = [runnable_here(document, work, python) for document in documents]
        (served / path.name).write_text(yaml.safe_dump_all(changed), encoding="utf-8")
    local = LocalMode(served, "--devices", "0", "--min-residency", "0s")
    try:
        assert wait_until(lambda: local.count(log_lines.SERVING_RE) == 3), local.log()
        yield urlsplit(local.wait_for(log_lines.ENDPOINT_RE)["url"]).netloc
    finally:
        local.teardown()


def test_the_page_serves_the_multi_model_folder_with_one_gpu() -> None:
    commands = re.findall(r"^noctaya-local .*$", README.read_text(encoding="utf-8"), re.MULTILINE)
    assert "noctaya-local examples/local/multi-model --devices 0" in commands
    assert sorted(path.name for path in FOLDER.iterdir()) == [
        "coder.yaml",
        "demo.yaml",
        "qwen.yaml",
    ]


def test_curl_lists_the_models_and_streams_from_two_of_them(endpoint: str) -> None:
    script = snippet(".sh").read_text(encoding="utf-8")
    assert DOCUMENTED_ADDRESS in script
    done = subprocess.run(
        ["bash", "-c", script.replace(DOCUMENTED_ADDRESS, endpoint)],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    listing, end = json.JSONDecoder().raw_decode(done.stdout)
    streams = done.stdout[end:]
    assert sorted(model["id"] for model in listing["data"]) == [
        "coder",
        "demo",
        "qwen",
    ]
    chunks = [json.loads(line[6:]) for line in streams.splitlines() if line.startswith("data: {")]
    assert [chunk["model"] for chunk in chunks if chunk["choices"][0].get("finish_reason")] == [
        "qwen",
        "coder",
    ]
    assert streams.count("data: [DONE]") == 2
    assert ": noctaya: stopping qwen" in streams, "coder's request swapped qwen out"


def test_the_openai_sdk_lists_states_and_gets_both_answers(endpoint: str) -> None:
    script = snippet(".py").read_text(encoding="utf-8")
    assert DOCUMENTED_ADDRESS in script
    done = subprocess.run(
        [sys.executable, "-c", script.replace(DOCUMENTED_ADDRESS, endpoint)],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    lines = done.stdout.splitlines()
    states = dict(line.split(" ", 1) for line in lines[:3])
    assert set(states) == {"qwen", "coder", "demo"}
    assert states["demo"] == "cold"
    for name, line in zip(("qwen", "coder"), lines[3:], strict=True):
        prefix = f"{name}: "
        assert line.startswith(prefix)
        assert set(line[len(prefix) :]) <= set("".join(PIECE_TEXTS))
        assert line[len(prefix) :].strip()


def test_the_figures_the_page_states_are_the_code_s() -> None:
    page = text()
    assert DEFAULT_MIN_RESIDENCY == 10.0
    assert "`--min-residency` (default 10 s)" in page
    assert LOADING_PERIOD == 0.05
    assert "it checks every 0.05 s instead" in page
    assert WATCH_INTERVAL == 1.0
    assert "The files are watched (every second)" in page
    assert GATEWAY_STOP_GRACE > 20.0  # the gateway's own drain, then a margin


def test_the_llama_cpp_install_step_resolves_into_the_clone_s_environment() -> None:
    """The page's install command, run as written but with `--dry-run` (the real install
    compiles llama.cpp for minutes; `make llama-cpp` builds the same pins for the tests)."""
    page = README.read_text(encoding="utf-8")
    (where,) = re.findall(r"^UV=.*$", page, re.M)
    assert where.startswith("UV=$(command -v uv || echo .tools/bin/uv)"), where
    assert (REPO / "Makefile").read_text(encoding="utf-8").count("echo .tools/bin/uv") == 1
    (command,) = re.findall(r'^"\$UV" pip install .*$', page, re.M)
    words = shlex.split(command)
    pinned = (REPO / "hack" / "llama-cpp" / "requirements.in").read_text(encoding="utf-8")
    assert words[-2] in pinned.splitlines(), (words, pinned)
    resolved = subprocess.run(
        [uv(), *words[1:3], "--dry-run", *words[3:]],
        cwd=REPO,
        env=clean_environment(),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert resolved.returncode == 0, resolved.stderr
    assert words[-2].replace("[server]", "") in resolved.stderr + resolved.stdout


def test_local_llama_cpp_runtimes_take_the_cpu_vendor_as_the_cluster_example_does() -> None:
    """Every local runtime that runs llama.cpp's server declares what examples/cpu/llamacpp.yaml
    declares (family llamacpp, vendor cpu, resource cpu, the llamacpp image), and the page says
    how `--devices 0` then budgets the folder: one core slot for the two llama.cpp models."""
    cluster = next(
        doc
        for doc in yaml.safe_load_all((REPO / "examples" / "cpu" / "llamacpp.yaml").read_text())
        if doc["kind"] == "InferenceRuntime"
    )["spec"]
    local_files = [REPO / "examples" / "local" / "llama-cpp.yaml", *sorted(FOLDER.glob("*.yaml"))]
    llama_runtimes = [
        doc
        for path in local_files
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))
        if doc["kind"] == "InferenceRuntime"
        and "llama_cpp.server" in doc["metadata"]["annotations"][LOCAL_COMMAND_ANNOTATION]
    ]
    assert len(llama_runtimes) == 3
    for runtime in llama_runtimes:
        spec = runtime["spec"]
        assert (spec["family"], spec["vendor"]) == (cluster["family"], cluster["vendor"])
        assert spec["accelerator"]["resourceName"] == cluster["accelerator"]["resourceName"]
        assert spec["container"]["image"] == cluster["container"]["image"]
    page = text()
    assert "take turns on one GPU" not in page
    assert "core `0` for the two llama.cpp models, which take turns on it" in page
