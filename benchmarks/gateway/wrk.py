"""Non-streaming load with `wrk` (a separate process, C, one thread per core at most)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

CHAT_BODY = '{"model":"stub","messages":[{"role":"user","content":"hi"}]}'
_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


@dataclass(frozen=True)
class Result:
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int


def available() -> bool:
    return shutil.which("wrk") is not None


def run(url: str, concurrency: int, seconds: float, threads: int = 1) -> Result:
    script = (
        'wrk.method = "POST"\n'
        f"wrk.body = '{CHAT_BODY}'\n"
        'wrk.headers["Content-Type"] = "application/json"\n'
    )
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as lua:
        lua.write(script)
        lua.flush()
        output = subprocess.run(
            [
                "wrk",
                f"-t{min(threads, concurrency)}",
                f"-c{concurrency}",
                f"-d{seconds:g}s",
                "--latency",
                "--timeout",
                "10s",
                "-s",
                lua.name,
                url,
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=seconds + 60,
        ).stdout
    return Result(
        rps=float(_find(r"Requests/sec:\s+([\d.]+)", output)),
        p50_ms=_latency(_find(r"^\s+50%\s+(\S+)", output)),
        p99_ms=_latency(_find(r"^\s+99%\s+(\S+)", output)),
        errors=_errors(output),
    )


def _find(pattern: str, text: str) -> str:
    match = re.search(pattern, text, re.MULTILINE)
    if match is None:
        raise RuntimeError(f"unexpected wrk output:\n{text}")
    return match.group(1)


def _latency(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()  # type: ignore[union-attr]
    return float(number) * _UNITS[unit]


def _errors(output: str) -> int:
    errors = 0
    match = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    if match:
        errors += int(match.group(1))
    match = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output
    )
    if match:
        errors += sum(int(g) for g in match.groups())
    return errors
