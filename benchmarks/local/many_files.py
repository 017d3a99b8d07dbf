"""Many service files dropped into a served folder at once: whether local mode stays responsive
while their gateways start, and what each service costs once they serve.

    .venv/bin/python benchmarks/local/many_files.py [--files 150] [--compare REV]

`noctaya-local` serves a folder holding one engine-stub service; once it serves, `--files`
more service files (each with a stub runtime of its own, scaled to zero, so no engine starts)
are renamed into the folder within milliseconds. From just before the drop until every service
serves and 3 s more, a client asks `/healthz` again as soon as it has its answer (one new
connection each, no timeout): a loop that stalls shows as one long answer.

Per revision (with `--compare`, REV's local mode and gateways, run first, then this tree's, on
bytecode compiled beforehand for both):

- all serving: the drop → the last service's "serving" line;
- /healthz: how many answers, their median, 99th percentile and longest;
- starting at once: the most gateways local mode had started that did not serve yet, read from
  its own log lines in order (gateway started → serving);
- per service once idle: a gateway's RSS and PSS (median), the growth of local mode's own RSS
  divided by the services added, the PSS of every process local mode started (gateways and
  their process-group keepers) plus local mode's growth, divided by the services added (what
  one more service costs the machine), and the descriptors local mode holds open for each.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from local.many import stub_file  # noqa: E402
from noctaya.local import log_lines  # noqa: E402

from benchmarks.gateway import revision  # noqa: E402
from benchmarks.gateway.footprint import compiled_bytecode  # noqa: E402
from benchmarks.gateway.table import print_table  # noqa: E402

SERVE_WITHIN = 900.0
SETTLE_SECONDS = 3.0
_GATEWAY_STARTED = re.compile(r"(?P<service>[a-z0-9-]+): gateway started \(pid (?P<pid>\d+)\)")
_NO_ENGINE = {"STUB_STARTUP_DELAY": "0s"}


@dataclass
class Figures:
    all_serving: float = 0.0
    healthz: list[float] = field(default_factory=list)
    """Seconds each answer took."""
    most_starting: int = 0
    gateway_rss: float = 0.0
    gateway_pss: float = 0.0
    local_growth: float = 0.0
    machine_per_service: float = 0.0
    fds_per_service: float = 0.0


class Local:
    """`noctaya-local` on a folder, its output kept with the line order."""

    def __init__(self, folder: Path, logs: Path, env: dict[str, str]) -> None:
        command = [sys.executable, "-m", "noctaya.local", str(folder), "--listen", "127.0.0.1:0"]
        self.process = subprocess.Popen(
            [*command, "--logs", str(logs)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
        )
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def serving(self) -> int:
        return sum(1 for line in list(self.lines) if log_lines.SERVING_RE.search(line))

    def until_serving(self, count: int) -> float:
        """When `count` services serve (monotonic clock)."""
        deadline = time.monotonic() + SERVE_WITHIN
        while self.serving() < count:
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise SystemExit("noctaya-local did not serve:\n" + "\n".join(self.lines[-40:]))
            time.sleep(0.05)
        return time.monotonic()

    def url(self) -> str:
        return next(m["url"] for line in self.lines if (m := log_lines.ENDPOINT_RE.search(line)))

    def most_starting(self) -> int:
        """The most gateways started and not serving yet at once, by the log's order."""
        starting: set[str] = set()
        most = 0
        for line in self.lines:
            if started := _GATEWAY_STARTED.search(line):
                starting.add(started["service"])
                most = max(most, len(starting))
            elif serving := log_lines.SERVING_RE.search(line):
                starting.discard(serving["name"])
        return most

    def gateway_pids(self) -> list[int]:
        return [int(m["pid"]) for line in self.lines if (m := _GATEWAY_STARTED.search(line))]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Prober:
    """`GET /healthz` back to back on a thread, each answer's time kept."""

    def __init__(self, base: str) -> None:
        self._url = f"{base}/healthz"
        self.took: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            with urllib.request.urlopen(self._url) as answer:
                answer.read()
            self.took.append(time.monotonic() - began)
            time.sleep(0.01)

    def stop(self) -> list[float]:
        self._stop.set()
        self._thread.join()
        return self.took


def measure(files: int, env: dict[str, str]) -> Figures:
    with tempfile.TemporaryDirectory(prefix="noctaya-many-files-") as scratch:
        work = Path(scratch)
        folder, staged = work / "served", work / "staged"
        folder.mkdir()
        staged.mkdir()
        ports = _distinct_ports(files + 1)
        stub_file(folder, "base", ports.pop(), env=_NO_ENGINE)
        names = [f"svc-{index:03d}" for index in range(files)]
        for name, port in zip(names, ports, strict=True):
            stub_file(staged, name, port, env=_NO_ENGINE)
        local = Local(folder, work / "logs", env)
        try:
            return _dropped(local, folder, staged, names)
        finally:
            local.stop()


def _distinct_ports(count: int) -> list[int]:
    """Engine ports free now, each once (local mode refuses a port used twice), and below the
    kernel's ephemeral range, where the gateways' own ports (port 0) cannot take them meanwhile."""
    ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports: list[int] = []
    for port in range(ephemeral - 1, 1024, -1):
        if len(ports) == count:
            return ports
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        ports.append(port)
    raise SystemExit(f"fewer than {count} free ports below {ephemeral}")


def _dropped(local: Local, folder: Path, staged: Path, names: list[str]) -> Figures:
    local.until_serving(1)
    time.sleep(SETTLE_SECONDS)
    local_before = _memory(local.process.pid)[0]
    fds_before = _open_files(local.process.pid)
    prober = Prober(local.url().removesuffix("/v1"))
    time.sleep(0.5)
    dropped = time.monotonic()
    for name in names:
        os.rename(staged / f"{name}.yaml", folder / f"{name}.yaml")
    figures = Figures(all_serving=local.until_serving(1 + len(names)) - dropped)
    time.sleep(SETTLE_SECONDS)
    figures.healthz = prober.stop()
    figures.most_starting = local.most_starting()
    gateways = [_memory(pid) for pid in local.gateway_pids()]
    figures.gateway_rss = statistics.median(rss for rss, _ in gateways)
    figures.gateway_pss = statistics.median(pss for _, pss in gateways)
    local_after = _memory(local.process.pid)[0]
    figures.local_growth = (local_after - local_before) / len(names)
    children = sum(_memory(pid)[1] for pid in _descendants(local.process.pid))
    base_share = children / (len(names) + 1)  # the first service's processes, as any other's
    figures.machine_per_service = base_share + figures.local_growth
    figures.fds_per_service = (_open_files(local.process.pid) - fds_before) / len(names)
    return figures


def _memory(pid: int) -> tuple[float, float]:
    """RSS and PSS in MiB."""
    values = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("Rss", "Pss"):
            values[key] = int(rest.split()[0]) / 1024
    return values["Rss"], values["Pss"]


def _open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _descendants(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                parents[int(entry)] = int(stat[1])
    found, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return found


@contextlib.contextmanager
def revisions(compare: str | None) -> Iterator[list[tuple[str, dict[str, str]]]]:
    with contextlib.ExitStack() as stack:
        bytecode = stack.enter_context(compiled_bytecode())
        chosen = [("this tree", {**bytecode, "PYTHONPATH": os.environ.get("PYTHONPATH", "")})]
        if compare is not None:
            path = stack.enter_context(revision.pythonpath(compare))
            chosen.insert(0, (revision.describe(compare), {**bytecode, "PYTHONPATH": path}))
        yield chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--files", type=int, default=150)
    parser.add_argument("--compare", metavar="REV", help="also measure local mode at REV")
    options = parser.parse_args()
    measured: list[tuple[str, Figures]] = []
    with revisions(options.compare) as chosen:
        for name, env in chosen:
            figures = measure(options.files, env)
            print(f"{name}: {len(figures.healthz)} /healthz answers", flush=True)
            measured.append((name, figures))
    print_table(
        f"{options.files} service files dropped into a served folder at once",
        (
            "local mode",
            "all serving s",
            "/healthz n",
            "p50 ms",
            "p99 ms",
            "max ms",
            "starting at once",
        ),
        [
            (
                name,
                f"{f.all_serving:.1f}",
                len(f.healthz),
                f"{statistics.median(f.healthz) * 1e3:.0f}",
                f"{statistics.quantiles(f.healthz, n=100)[98] * 1e3:.0f}",
                f"{max(f.healthz) * 1e3:.0f}",
                f.most_starting,
            )
            for name, f in measured
        ],
    )
    print_table(
        "Resident cost per service once idle (MiB; local mode's open files)",
        (
            "local mode",
            "gateway RSS",
            "gateway PSS",
            "local mode growth",
            "machine per service",
            "local mode fds",
        ),
        [
            (
                name,
                f"{f.gateway_rss:.1f}",
                f"{f.gateway_pss:.1f}",
                f"{f.local_growth:.2f}",
                f"{f.machine_per_service:.1f}",
                f"{f.fds_per_service:.1f}",
            )
            for name, f in measured
        ],
    )


if __name__ == "__main__":
    main()
