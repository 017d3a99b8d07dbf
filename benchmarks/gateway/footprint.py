"""What an idle `noctaya-gateway` costs, per mode: resident memory once started, the time to import
its entry module, and the time from exec to answering its health route. Every process runs on
bytecode compiled beforehand into a cache of this run's own (as the image ships it compiled;
compiling at start-up would be measured otherwise), for each revision alike.

Rounds alternate the revisions, a fresh process each, so both see the same moments of a shared
machine; the table prints each figure's range over the rounds and its median.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.gateway import procs
from benchmarks.gateway.followed import MODE as FOLLOWING

ENTRY = {
    "gateway": "noctaya.gateway.process.gateway_main",
    FOLLOWING: "noctaya.gateway.process.gateway_main",
    "aggregator": "noctaya.gateway.aggregator.main",
}
"""Each mode's entry module. "gateway following pods" is the gateway as the operator deploys it
with its endpoint reader: watching one ready pod's EndpointSlice on a real API server (a revision
that cannot follow pods ignores the settings and measures as "gateway")."""
SETTLE_SECONDS = 1.0
POLL_SECONDS = 0.005


@dataclass
class Figures:
    rss_mib: list[float] = field(default_factory=list)
    import_ms: list[float] = field(default_factory=list)
    startup_ms: list[float] = field(default_factory=list)


@contextlib.contextmanager
def compiled_bytecode() -> Iterator[dict[str, str]]:
    """The environment for processes that read and write bytecode in a cache of their own."""
    with tempfile.TemporaryDirectory(prefix="noctaya-bytecode-") as folder:
        yield {"PYTHONPYCACHEPREFIX": folder, "PYTHONDONTWRITEBYTECODE": ""}


def measure(
    mode: str, env: dict[str, str], figures: Figures, following: dict[str, str] | None = None
) -> None:
    """One fresh process of `mode`: its import time, start-up time and idle RSS; the
    "gateway following pods" mode needs the settings `followed.pods` yields."""
    figures.import_ms.append(_import_ms(ENTRY[mode], env))
    started = time.perf_counter()
    with _started(mode, env, following or {}) as (process, url):
        while True:
            try:
                with urllib.request.urlopen(url, timeout=1):
                    break
            except OSError:
                if process.poll() is not None:
                    raise RuntimeError(f"{mode} exited with {process.returncode}") from None
                time.sleep(POLL_SECONDS)
        figures.startup_ms.append((time.perf_counter() - started) * 1e3)
        time.sleep(SETTLE_SECONDS)
        figures.rss_mib.append(procs.Process(process, url).rss_mib())


def warm(modes: list[str], env: dict[str, str], following: dict[str, str]) -> None:
    """Start and stop each mode once, so every module it loads is compiled into the cache."""
    for mode in modes:
        measure(mode, env, Figures(), following)


def _import_ms(module: str, env: dict[str, str]) -> float:
    code = (  # as `noctaya-gateway` imports it (`load_entry`, where the revision has it)
        "import importlib, time; t = time.perf_counter(); "
        "from noctaya.gateway.process import cli; "
        f"getattr(cli, 'load_entry', importlib.import_module)('{module}'); "
        "print((time.perf_counter() - t) * 1e3)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return float(result.stdout)


@contextlib.contextmanager
def _started(
    mode: str, env: dict[str, str], following: dict[str, str]
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = procs.free_port()
    if mode.startswith("gateway"):
        settings = {
            "NOCTAYA_BACKEND_URL": f"http://127.0.0.1:{procs.free_port()}",
            "NOCTAYA_LISTEN_ADDR": f"127.0.0.1:{port}",
            "NOCTAYA_SCALER_LISTEN_ADDR": f"127.0.0.1:{procs.free_port()}",
        }
        if mode == FOLLOWING:
            settings |= following
        args: list[str] = []
    else:
        token = Path(tempfile.mkdtemp(prefix="noctaya-bench-")) / "token"
        token.write_text("x" * 64)
        settings = {
            "NOCTAYA_DEMAND_AUTH_TOKEN_FILE": str(token),
            "NOCTAYA_AGGREGATOR_LISTEN_ADDR": f"127.0.0.1:{port}",
            "NOCTAYA_SCALER_LISTEN_ADDR": f"127.0.0.1:{procs.free_port()}",
        }
        args = ["--mode=aggregator"]
    process = subprocess.Popen(
        [str(procs.BIN / "noctaya-gateway"), *args],
        env={**os.environ, **env, **settings},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield process, f"http://127.0.0.1:{port}/healthz"
    finally:
        procs.Process(process, "").stop()


def rows(measured: dict[tuple[str, str], Figures]) -> list[tuple[object, ...]]:
    return [
        (
            name,
            mode,
            _span(figures.rss_mib, "{:.1f}"),
            _span(figures.import_ms, "{:.0f}"),
            _span(figures.startup_ms, "{:.0f}"),
        )
        for (mode, name), figures in measured.items()
    ]


def _span(values: list[float], form: str) -> str:
    if len(values) == 1:
        return form.format(values[0])
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{form.format(low)}-{form.format(high)} ({form.format(mid)})"
