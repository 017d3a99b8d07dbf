"""Swap time in local mode: a request for a cold model arriving while another model holds the one
device, until its first token, broken into stop, start, load and first token.

    .venv/bin/python benchmarks/local/swap.py [--rounds 5] [--residency 0s]

Needs `make llama-cpp`. Runs `noctaya-local` on a folder of four services, as a user would: two
llama.cpp services (the example runtime, each on a generated tiny model of its own) and two
engine stubs (no start-up or token delay: what local mode itself costs), with `--devices 0`.
Each round sends one streamed chat completion to each service in turn (the order of each pair
reversed every other round), so every request but the first finds another model on the device
and swaps it out: llama.cpp for llama.cpp, llama.cpp for the stub, and the other way round,
each a row. For each swap:

- stop: the request's arrival at local mode's endpoint → the previous engine's process group is
  gone and the device free (local mode's own clock, as it logs it: `ready N s after it was asked
  for: …`);
- start: device free → the new engine's process started;
- load: process started → ready (local mode's readiness check, every 0.05 s while loading, as
  often as the gateway probes for held requests);
- first token: ready → the first content token at the client (the gateway's readiness probe,
  the release of the held request, the engine's first token, the relay), which is the client's
  whole wait minus the three above;
- total: the client's wait, request sent → first content token.

The very first request (a cold start with the device free) is the row `none → llama.cpp`. The
table shows medians with the minimum and maximum; on a shared machine read the rows of one
run side by side, not figures from different runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from local.many import status, stream_chat, stub_file  # noqa: E402
from local.support import service_doc, write_manifest  # noqa: E402
from noctaya.local import log_lines  # noqa: E402
from support.llama_cpp import example_runtime, locate_llama_cpp_python  # noqa: E402
from support.ports import free_port  # noqa: E402
from support.tiny_llama import write_tiny_llama  # noqa: E402

START_WITHIN = 120.0
PAIRS = {"llama.cpp": ("chat", "code"), "engine stub": ("stub-a", "stub-b")}
REQUEST = {"max_tokens": 8, "temperature": 0}


@dataclass(frozen=True)
class Swap:
    stop: float
    start: float
    load: float
    first_token: float
    total: float


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--residency", default="0s", help="--min-residency for local mode")
    options = parser.parse_args()
    python = locate_llama_cpp_python()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        folder = work / "models"
        folder.mkdir()
        for seed, name in enumerate(PAIRS["llama.cpp"], start=1):
            llama_file(folder, name, python, write_tiny_llama(work / f"{name}.gguf", seed=seed))
        for name in PAIRS["engine stub"]:
            stub_file(folder, name, free_port(), env={"STUB_STARTUP_DELAY": "0s"})
        local = Local(folder, work / "logs", options.residency)
        try:
            results = run(local, options.rounds)
        finally:
            local.stop()
    print_table(results)


def llama_file(folder: Path, name: str, python: Path, model: Path) -> None:
    runtime = example_runtime(python, free_port())
    runtime["metadata"]["name"] = f"llama-{name}"
    service: dict[str, Any] = service_doc(f"llama-{name}")
    service["metadata"]["name"] = name
    service["spec"]["runtime"]["argsOverride"] = [f"--model={model}"]
    service["spec"]["scaling"]["activationTimeout"] = "2m"
    service["spec"]["scaling"]["scaleDownStabilization"] = "10m"
    write_manifest(folder / f"{name}.yaml", runtime, service)


class Local:
    """`noctaya-local` on the folder, its output kept."""

    def __init__(self, folder: Path, logs: Path, residency: str) -> None:
        command = [sys.executable, "-m", "noctaya.local", str(folder)]
        flags = ["--listen", "127.0.0.1:0", "--devices", "0", "--min-residency", residency]
        self.process = subprocess.Popen(
            [*command, *flags, "--logs", str(logs)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + START_WITHIN
        while sum(1 for line in self.lines if log_lines.SERVING_RE.search(line)) < 4:
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise SystemExit("noctaya-local did not serve:\n" + "\n".join(self.lines))
            time.sleep(0.1)
        self.url = next(
            m["url"] for line in self.lines if (m := log_lines.ENDPOINT_RE.search(line))
        )

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


def kind_of(name: str) -> str:
    return next(kind for kind, pair in PAIRS.items() if name in pair)


def run(local: Local, rounds: int) -> dict[str, list[Swap]]:
    results: dict[str, list[Swap]] = {}
    for round_index in range(rounds):
        for pair in PAIRS.values():
            for name in pair if round_index % 2 == 0 else pair[::-1]:
                swap, stopped = measure(local, name)
                before = " ".join(sorted({kind_of(each) for each in stopped})) or "none"
                label = f"{before} → {kind_of(name)}"
                results.setdefault(label, []).append(swap)
                print(f"round {round_index + 1} {name:7} ({label}): {describe(swap)}", flush=True)
    return results


def measure(local: Local, name: str) -> tuple[Swap, list[str]]:
    lines = len(local.lines)
    stream = stream_chat(local.url, name, timeout=START_WITHIN, **REQUEST)
    if not stream.done or not stream.contents:
        raise SystemExit(f"{name}: no answer: {stream.lines}")
    total = stream.first("data: {") - stream.began
    deadline = time.monotonic() + 10
    while not any(
        (match := log_lines.STARTED_IN_RE.search(line)) and match["service"] == name
        for line in local.lines[lines:]
    ):
        if time.monotonic() > deadline:
            raise SystemExit(f"{name}: no start logged")
        time.sleep(0.05)
    started = status(local.url)[name]["last_start"]
    stop, start, load = (started[key] for key in ("stop_seconds", "start_seconds", "load_seconds"))
    return Swap(stop, start, load, total - stop - start - load, total), started["stopped"]


def describe(swap: Swap) -> str:
    return "  ".join(f"{key} {value:6.3f}s" for key, value in swap.__dict__.items())


def print_table(results: dict[str, list[Swap]]) -> None:
    columns = ("stop", "start", "load", "first_token", "total")
    print()
    print(
        f"| {'swap':<26} | n | " + " | ".join(f"{c.replace('_', ' '):>23}" for c in columns) + " |"
    )
    print("|" + "---|" * (len(columns) + 2))
    for label, swaps in results.items():
        cells = []
        for column in columns:
            values = [getattr(swap, column) for swap in swaps]
            cells.append(f"{statistics.median(values):6.3f} ({min(values):.3f}–{max(values):.3f})")
        print(f"| {label:<26} | {len(swaps)} | " + " | ".join(f"{c:>23}" for c in cells) + " |")
    print("\nseconds: median (min–max)")


if __name__ == "__main__":
    main()
