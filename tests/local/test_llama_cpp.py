"""noctaya-local serving a real engine: llama.cpp's server (the example runtime) with the tiny
generated model, through the gateway, over real sockets on 127.0.0.1.

The model's file reaches the engine through the service's `argsOverride`, as the example's
comment says for a file on disk; nothing is downloaded.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
from noctaya.local import log_lines
from support.llama_cpp import example_runtime
from support.ports import free_port
from support.tiny_llama import PIECE_TEXTS

from .conftest import StartLocal
from .support import (
    LocalMode,
    assert_scales_back_to_zero,
    engine_refuses_connections,
    service_doc,
    write_manifest,
)

MAX_TOKENS = 12
MESSAGES = [{"role": "user", "content": "Say something."}]


def tiny_service(model: Path) -> dict[str, Any]:
    service = service_doc("llama-cpp")
    service["spec"]["runtime"]["argsOverride"] = [f"--model={model}"]
    service["spec"]["scaling"]["activationTimeout"] = "2m"
    return service


def serve_tiny_llama(
    tmp_path: Path, start_local: StartLocal, python: Path, model: Path
) -> tuple[str, int, LocalMode]:
    port = free_port()
    manifest = write_manifest(
        tmp_path / "llama.yaml", example_runtime(python, port), tiny_service(model)
    )
    local = start_local(manifest)
    return local.url(), port, local


def test_a_cold_stream_starts_llama_cpp_streams_its_tokens_and_scales_back_to_zero(
    tmp_path: Path, start_local: StartLocal, llama_cpp_python: Path, tiny_llama: Path
) -> None:
    url, port, local = serve_tiny_llama(tmp_path, start_local, llama_cpp_python, tiny_llama)
    assert local.count(log_lines.ENGINE_STARTED_RE) == 0
    assert engine_refuses_connections(port)

    request = {"model": "svc", "messages": MESSAGES, "stream": True, "max_tokens": MAX_TOKENS}
    with httpx.stream("POST", f"{url}/chat/completions", json=request, timeout=120) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]

    started = local.wait_for(log_lines.ENGINE_STARTED_RE)
    assert "-m llama_cpp.server" in started.string
    data = [line.removeprefix("data: ") for line in lines if line.startswith("data: ")]
    held = lines[: lines.index(f"data: {data[0]}")]
    assert any(line.startswith(": noctaya: loading ") for line in held), held  # model loading
    assert data[-1] == "[DONE]"
    chunks = [json.loads(chunk) for chunk in data[:-1]]
    assert {chunk["object"] for chunk in chunks} == {"chat.completion.chunk"}
    assert {chunk["model"] for chunk in chunks} == {"svc"}  # the runtime's --model_alias
    assert len({chunk["id"] for chunk in chunks}) == 1
    deltas = [chunk["choices"][0]["delta"] for chunk in chunks]
    assert deltas[0] == {"role": "assistant"}
    tokens = [delta["content"] for delta in deltas[1:-1]]
    # The tiny model can only emit its word pieces, and never stops before max_tokens.
    assert len(tokens) == MAX_TOKENS, "\n".join(data)
    assert set(tokens) <= PIECE_TEXTS, tokens
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"

    assert_scales_back_to_zero(local, int(started["pid"]), port)
    assert local.stop() == 0


def stream_tokens(url: str, max_tokens: int) -> tuple[list[str], str]:
    """The content deltas of one streamed chat completion, and its finish reason."""
    request = {"model": "svc", "messages": MESSAGES, "stream": True, "max_tokens": max_tokens}
    with httpx.stream("POST", f"{url}/chat/completions", json=request, timeout=120) as response:
        assert response.status_code == 200
        data = [line[6:] for line in response.iter_lines() if line.startswith("data: {")]
    choices = [json.loads(chunk)["choices"][0] for chunk in data]
    tokens = [choice["delta"]["content"] for choice in choices if choice["delta"].get("content")]
    return tokens, choices[-1]["finish_reason"]


def test_streams_held_together_while_cold_are_each_served_whole(
    tmp_path: Path, start_local: StartLocal, llama_cpp_python: Path, tiny_llama: Path
) -> None:
    """The gateway releases both at once when the engine is ready; llama.cpp serves one request
    at a time, and the example runtime makes it queue the other instead of ending the first
    stream early with [DONE] (its default)."""
    url, _, _ = serve_tiny_llama(tmp_path, start_local, llama_cpp_python, tiny_llama)
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda _: stream_tokens(url, 200), range(2)))
    for tokens, finish_reason in answers:
        assert (len(tokens), finish_reason) == (200, "length")
        assert set(tokens) <= PIECE_TEXTS


def test_a_cold_non_streaming_request_gets_llama_cpps_openai_completion(
    tmp_path: Path, start_local: StartLocal, llama_cpp_python: Path, tiny_llama: Path
) -> None:
    url, _, local = serve_tiny_llama(tmp_path, start_local, llama_cpp_python, tiny_llama)
    with openai.OpenAI(base_url=url, api_key="unused", timeout=120, max_retries=0) as client:
        completion = client.chat.completions.create(
            model="svc",
            messages=MESSAGES,
            max_tokens=MAX_TOKENS,
        )
        models = client.models.list()

    assert completion.object == "chat.completion"
    assert completion.id.startswith("chatcmpl-")
    assert completion.model == "svc"
    (choice,) = completion.choices
    assert choice.message.role == "assistant"
    assert choice.finish_reason == "length"
    assert completion.usage is not None
    assert completion.usage.completion_tokens == MAX_TOKENS
    assert completion.usage.prompt_tokens > 0
    content = choice.message.content or ""
    assert content.strip()
    assert set(content) <= set("".join(PIECE_TEXTS)), content
    assert [model.id for model in models.data] == ["svc"]
    assert local.count(log_lines.ENGINE_STARTED_RE) == 1
    assert local.stop() == 0
