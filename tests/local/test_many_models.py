"""One machine, many models, as a user runs them: a folder with two llama.cpp services (the
example runtime, each on a generated tiny model of its own) and a pinned engine stub, behind one
endpoint, on a budget of one device that each of them needs.

In one run of local mode, with real processes throughout: the model list names three models
and starts nothing; requests alternate between the models and each answer streams real tokens
from its own engine; a cold model's held stream is told the previous engine is stopping while
it is; at no moment do two engines hold the device (read from the processes' environment in
/proc); the folder is edited while a stream runs (a fourth service added, one removed) without
interrupting it; the pinned service is never stopped to make room; and SIGTERM leaves nothing.
"""

from __future__ import annotations

import re
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from noctaya.local import log_lines
from support.llama_cpp import example_runtime
from support.ports import free_port
from support.tiny_llama import PIECE_TEXTS, write_tiny_llama

from .conftest import StartLocal
from .many import DeviceWatch, Stream, models, status, stream_chat, stub_file
from .support import pid_exists, service_doc, wait_until, write_manifest

TOKENS = 8
GREEDY = {"max_tokens": TOKENS, "temperature": 0, "seed": 7}
PINNED = {"serving.noctaya.io/local-pinned": "true"}


def llama_file(folder: Path, name: str, python: Path, model: Path) -> Path:
    """`<name>.yaml`: the example llama.cpp runtime on a port of its own, as an NVIDIA runtime
    (so that it takes turns on the one device with the stub, and holds it visibly in
    CUDA_VISIBLE_DEVICES), and the service `name` serving `model`, whose engine answers to
    `tiny-<name>`."""
    runtime = example_runtime(python, free_port())
    runtime["metadata"]["name"] = f"llama-{name}"
    runtime["spec"]["vendor"] = "nvidia"
    runtime["spec"]["accelerator"]["resourceName"] = "nvidia.com/gpu"
    service: dict[str, Any] = service_doc(f"llama-{name}")
    service["metadata"]["name"] = name
    service["spec"]["runtime"]["argsOverride"] = [f"--model={model}", f"--model_alias=tiny-{name}"]
    service["spec"]["scaling"]["activationTimeout"] = "2m"
    return write_manifest(folder / f"{name}.yaml", runtime, service)


def answered_by(stream: Stream, model: str) -> list[str]:
    """The tokens of a whole llama.cpp answer under `model`."""
    assert stream.status == 200
    assert stream.done, stream.lines
    assert {chunk["model"] for chunk in stream.data} == {model}
    tokens = stream.contents
    assert len(tokens) == TOKENS
    assert set(tokens) <= PIECE_TEXTS
    return tokens


def holder_serves(watch: DeviceWatch, model: Path) -> bool:
    """The one process holding the device is the engine loading `model`."""
    holders = watch.holders()
    return len(holders) == 1 and f"--model={model}" in holders[0].cmdline


def test_three_services_on_one_device_take_turns_and_the_folder_changes_under_them(
    tmp_path: Path, start_local: StartLocal, llama_cpp_python: Path
) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    chat_model = write_tiny_llama(tmp_path / "chat.gguf", seed=1)
    code_model = write_tiny_llama(tmp_path / "code.gguf", seed=2)
    llama_file(folder, "chat", llama_cpp_python, chat_model)
    llama_file(folder, "code", llama_cpp_python, code_model)
    slow = {"STUB_TOKEN_DELAY": "100ms", "STUB_STARTUP_DELAY": "0s"}
    stub_file(folder, "stub", free_port(), env=slow, annotations=PINNED)

    with DeviceWatch() as watch:
        local = start_local(folder, "--devices", "0", "--min-residency", "1s", env=watch.env)
        assert wait_until(lambda: local.count(log_lines.SERVING_RE) == 3), local.log()
        url = local.wait_for(log_lines.ENDPOINT_RE)["url"]

        listed = models(url)
        assert sorted(listed) == ["stub", "tiny-chat", "tiny-code"]
        assert {model["noctaya"]["state"] for model in listed.values()} == {"cold"}
        assert local.count(log_lines.ENGINE_STARTED_RE) == 0
        assert watch.holders() == []

        # Requests alternate: chat (by its service's name), code (by its engine's), chat again.
        chat = answered_by(stream_chat(url, "chat", **GREEDY), "tiny-chat")
        assert holder_serves(watch, chat_model)
        swap = stream_chat(url, "tiny-code", **GREEDY)
        code = answered_by(swap, "tiny-code")
        assert holder_serves(watch, code_model)
        assert ": noctaya: stopping tiny-chat" in swap.comments, swap.comments
        stopping = swap.comments.index(": noctaya: stopping tiny-chat")
        assert any(line.startswith(": noctaya: loading ") for line in swap.comments[stopping:])
        again = answered_by(stream_chat(url, "chat", **GREEDY), "tiny-chat")
        assert holder_serves(watch, chat_model)
        assert again == chat, "the same model answers the same way: chat's own engine"
        assert code != chat, "another model, another answer: code's own engine"

        # A fourth service is added and code's file removed while the pinned stub streams.
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(stream_chat, url, "stub", query="tokens=40")
            assert wait_until(lambda: status(url)["stub"]["in_flight"] == 1)
            assert wait_until(lambda: status(url)["stub"]["state"] == "ready", within=60)
            stub_file(folder, "fourth", free_port())
            (folder / "code.yaml").unlink()
            local.wait_for(re.compile(r"fourth: added \("))
            local.wait_for(re.compile(r"code: removed \("))
            assert not running.done()
            streamed = running.result()
        assert streamed.contents == [f"tok{i} " for i in range(40)], "not interrupted"
        assert sorted(models(url)) == ["fourth", "stub", "tiny-chat"]
        gone = httpx.post(f"{url}/chat/completions", json={"model": "tiny-code"}, timeout=10)
        assert (gone.status_code, gone.json()["error"]["code"]) == (404, "model_not_found")

        # The pinned stub holds the device, idle and past its residency: chat waits for it.
        stub_pid = int(
            local.wait_for(re.compile(r"stub: engine started \(pid (?P<pid>\d+)"))["pid"]
        )
        body = {"model": "chat", "messages": [], "stream": True, **GREEDY}
        waited: list[str] = []
        with httpx.stream("POST", f"{url}/chat/completions", json=body, timeout=30) as held:
            deadline = time.monotonic() + 3
            for line in held.iter_lines():
                if line:
                    waited.append(line)
                if time.monotonic() > deadline:
                    break
        assert waited, "held with heartbeats"
        assert set(waited) == {": noctaya: waiting for stub"}, waited
        assert pid_exists(stub_pid)
        assert status(url)["stub"]["state"] == "ready"

    assert watch.most_at_once == {"0": 1}, "never two engines on the device"
    engines = [
        int(match["pid"])
        for line in local.lines
        if (match := log_lines.ENGINE_STARTED_RE.search(line))
    ]
    assert len(engines) == 4  # chat, code, chat again, stub
    assert watch.groups_seen() == set(engines)
    assert "stub: swapping out" not in local.log()
    assert "stub: engine stopped" not in local.log()
    children = local.child_pids()
    assert local.stop(signal.SIGTERM) == 0
    assert [pid for pid in children if pid_exists(pid)] == []
