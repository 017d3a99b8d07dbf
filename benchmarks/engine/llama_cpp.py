"""The tests' real CPU engine beside the engine stub: start-up, model load, first token, tokens/s.

    .venv/bin/python benchmarks/engine/llama_cpp.py [--rounds 3] [--tokens 256]

Needs `make llama-cpp` (llama.cpp's server, built once into the cache). Writes the tests' tiny
model (`tests/support/tiny_llama.py`: its size and write time are printed first), then in each
round starts each engine exactly as local mode would (the argv and env that local mode plans
of `examples/local/llama-cpp.yaml`, with the model file in `argsOverride`, and of the stub's
test runtime with no start-up or token delay), each on a free loopback port, and measures:

- ready: the process's start until its readiness path answers 200 (llama.cpp's `/docs`: the
  interpreter, its imports and the model load; the stub's `/health`);
- load: for llama.cpp only, `Llama(model_path=…)` alone, timed inside the built environment
  (the part of "ready" that is the model);
- first token: the first streamed chat completion's request sent → its first content delta
  (what a cold request waits for once the engine is ready), and the same for a second one;
- tokens/s: the second stream's content deltas after its first (`--tokens` in all) over the time
  they took.

The engines take turns within a round, in the opposite order every other round. The table shows
each round and the medians; on a shared machine read the ratios of one run, not figures from
different runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from local.support import plan_file, runtime_doc, service_doc, write_manifest  # noqa: E402
from noctaya.local.plan import EnginePlan  # noqa: E402
from support.llama_cpp import example_runtime, locate_llama_cpp_python  # noqa: E402
from support.ports import free_port  # noqa: E402
from support.tiny_llama import write_tiny_llama  # noqa: E402

READY_WITHIN = 120.0
LOAD_SNIPPET = """
import sys, time
import llama_cpp
started = time.perf_counter()
llama_cpp.Llama(model_path=sys.argv[1], n_ctx=2048, verbose=False)
print(time.perf_counter() - started)
"""


@dataclass(frozen=True)
class Engine:
    name: str
    plan: EnginePlan
    readiness_path: str


@dataclass(frozen=True)
class Sample:
    ready: float
    first_token: float
    warm_first_token: float
    tokens_per_second: float
    load: float | None = None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=256)
    options = parser.parse_args()
    python = locate_llama_cpp_python()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        started = time.perf_counter()
        model = write_tiny_llama(work / "tiny-llama.gguf")
        written = time.perf_counter() - started
        print(f"tiny model: {model.stat().st_size:,} bytes, written in {written * 1000:.0f} ms")
        engines = [llama_cpp_engine(work, python, model), stub_engine(work, options.tokens)]
        samples: dict[str, list[Sample]] = {engine.name: [] for engine in engines}
        for round_index in range(options.rounds):
            for engine in engines if round_index % 2 == 0 else engines[::-1]:
                sample = measure(engine, options.tokens)
                if engine.name == "llama.cpp":
                    sample = Sample(**{**sample.__dict__, "load": load_seconds(python, model)})
                samples[engine.name].append(sample)
                print(f"round {round_index + 1} {engine.name}: {describe(sample)}", flush=True)
    print_table(samples)


def llama_cpp_engine(work: Path, python: Path, model: Path) -> Engine:
    service = service_doc("llama-cpp")
    service["spec"]["runtime"]["argsOverride"] = [f"--model={model}"]
    manifest = write_manifest(work / "llama.yaml", example_runtime(python, free_port()), service)
    plan = plan_file(manifest).engine
    assert plan.readiness_path is not None
    return Engine("llama.cpp", plan, plan.readiness_path)


def stub_engine(work: Path, tokens: int) -> Engine:
    env = {"STUB_STARTUP_DELAY": "0s", "STUB_TOKEN_COUNT": str(tokens), "STUB_TOKEN_DELAY": "0s"}
    runtime = runtime_doc(free_port(), env=env)
    manifest = write_manifest(work / "stub.yaml", runtime, service_doc())
    return Engine("engine stub", plan_file(manifest).engine, "/health")


def measure(engine: Engine, tokens: int) -> Sample:
    base = f"http://127.0.0.1:{engine.plan.port}"
    started = time.perf_counter()
    process = subprocess.Popen(
        engine.plan.argv,
        env={**os.environ, **engine.plan.env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with httpx.Client(timeout=READY_WITHIN) as client:
            wait_ready(client, base + engine.readiness_path, process)
            ready = time.perf_counter() - started
            first_token, _ = stream(client, base, tokens)
            warm_first_token, rate = stream(client, base, tokens)
    finally:
        process.terminate()
        process.wait(timeout=30)
    return Sample(ready, first_token, warm_first_token, rate)


def wait_ready(client: httpx.Client, url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_WITHIN
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the engine exited with {process.returncode} before it was ready")
        try:
            if client.get(url).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.01)
    raise SystemExit(f"{url} did not answer 200 within {READY_WITHIN:g}s")


def stream(client: httpx.Client, base: str, tokens: int) -> tuple[float, float]:
    """(seconds to the first content delta, content deltas per second after it)."""
    body = {
        "model": "svc",
        "messages": [{"role": "user", "content": "Say something."}],
        "stream": True,
        "max_tokens": tokens,
    }
    arrivals: list[float] = []
    sent = time.perf_counter()
    with client.stream("POST", f"{base}/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            delta = json.loads(line.removeprefix("data: "))["choices"][0]["delta"]
            if delta.get("content"):
                arrivals.append(time.perf_counter())
    if len(arrivals) != tokens:
        raise SystemExit(f"{base}: {len(arrivals)} content deltas, expected {tokens}")
    return arrivals[0] - sent, (len(arrivals) - 1) / (arrivals[-1] - arrivals[0])


def load_seconds(python: Path, model: Path) -> float:
    out = subprocess.run(
        [str(python), "-c", LOAD_SNIPPET, str(model)], check=True, capture_output=True, text=True
    ).stdout
    return float(out.strip().splitlines()[-1])


def describe(sample: Sample) -> str:
    load = "" if sample.load is None else f", load {sample.load * 1000:.0f} ms"
    return (
        f"ready {sample.ready:.2f} s{load}, first token {sample.first_token * 1000:.1f} ms "
        f"(then {sample.warm_first_token * 1000:.1f} ms), {sample.tokens_per_second:,.0f} tokens/s"
    )


def print_table(samples: dict[str, list[Sample]]) -> None:
    columns: list[tuple[str, Callable[[Sample], float | None], str]] = [
        ("ready (s)", lambda s: s.ready, "{:.2f}"),
        ("model load (ms)", lambda s: None if s.load is None else s.load * 1000, "{:.0f}"),
        ("first token (ms)", lambda s: s.first_token * 1000, "{:.1f}"),
        ("2nd request's first token (ms)", lambda s: s.warm_first_token * 1000, "{:.1f}"),
        ("tokens/s", lambda s: s.tokens_per_second, "{:,.0f}"),
    ]
    print()
    print("| median | " + " | ".join(name for name, _, _ in columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for engine, rows in samples.items():
        cells = []
        for _, pick, form in columns:
            values = [value for row in rows if (value := pick(row)) is not None]
            cells.append(form.format(statistics.median(values)) if values else "-")
        print(f"| {engine} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
