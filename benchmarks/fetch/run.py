"""`noctaya-fetch` against `cp`: OCI fetch throughput from a local registry, and peak memory.

    .venv/bin/python benchmarks/fetch/run.py [--files 8 --file-mib 128 --runs 3] [--profile]
                                             [--baseline OTHER/packages/noctaya-fetch/src]

Starts Debian's `docker-registry` on 127.0.0.1 (as the fetcher's tests do), pushes an artifact
of `--files` files of `--file-mib` MiB each (1 GiB by default) with the ORAS SDK, then per run:

- `cp -r` of the same files to a fresh folder on the same disk, and `cp -r` followed by
  `sync -f` (the fetcher flushes every byte before it promotes, `cp` does not);
- two references for what any HTTP client gets from this registry, `--concurrency` blobs at a
  time as the fetcher downloads them: `curl` of every blob to /dev/null (the registry's serving
  rate), and `curl` of every blob to a file followed by `sync -f` (a plain download with the
  fetcher's flush, without its verification);
- `noctaya-fetch oci://…@sha256:… --cache <fresh folder> --plain-http`, timed from start to
  exit (so the command's start-up counts), its CPU time from wait4's rusage, and its peak RSS
  as VmHWM sampled from /proc/<pid>/status every 20 ms. (wait4's ru_maxrss is no use here: it
  counts the forked child before exec, that is this script's own memory.) With `--baseline`,
  the same command once more with another checkout's fetcher source first on PYTHONPATH (a
  `git worktree` of an earlier commit), for a before/after in one run.

Every step starts after a `sync`, so none pays for another's writeback, and each run starts
one step later in that order than the one before, every other run going backwards, so no step
always follows the same one (a step can inherit the memory the one before it freed). The
table shows each run and the median; the ratios are fetch throughput over that of `cp`,
`cp` + `sync` and `curl` + `sync` (1.0: as fast). The registry serves from the page cache
after the push, and so does `cp`: both read what was just written.

Where the difference comes from: `cp` copies a file with one in-kernel copy
(copy_file_range), while any registry download copies every byte four times (registry
file → user, → socket, socket → client, → page cache) across two processes, and the fetcher
also hashes it; on a small machine all of that shares the same cores. On a VM that returns
freed memory to its host, writing fresh page cache can also cost several times more CPU from
one step to the next, which the CPU column shows.

`--profile` runs one more fetch under cProfile and prints the top functions by own time.
"""

from __future__ import annotations

import argparse
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from fetch.registry import RunningRegistry, push_files, run_registry  # noqa: E402

FETCH = str(Path(sys.executable).with_name("noctaya-fetch"))
MIB = 1 << 20
SAMPLE_INTERVAL = 0.02
PROFILE_TOP = 15
CONCURRENCY = 4
"""The fetcher's default (`noctaya.fetch.limits.DEFAULT_CONCURRENCY`)."""


@dataclass(frozen=True)
class Fetched:
    seconds: float
    cpu: float
    """User + system CPU seconds, steadier than the wall time on a busy machine."""
    hwm: int


@dataclass(frozen=True)
class Run:
    cp: float
    cp_sync: float
    serve: float
    curl_sync: float
    fetch: Fetched
    baseline: Fetched | None


@dataclass(frozen=True)
class Bench:
    root: Path
    source: Path
    uri: str
    blob_urls: list[str]
    concurrency: int
    baseline: Path | None


def main() -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/fetch/run.py")
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--file-mib", type=int, default=128)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY)
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temporary folder")
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="another checkout's packages/noctaya-fetch/src, timed as a second fetch column",
    )
    parser.add_argument("--profile", action="store_true", help="also profile one fetch")
    args = parser.parse_args()
    size = args.files * args.file_mib * MIB
    baseline = args.baseline.resolve() if args.baseline else None
    if baseline is not None and not (baseline / "noctaya" / "fetch" / "cli.py").is_file():
        parser.error(f"{args.baseline} holds no noctaya/fetch/cli.py")
    with tempfile.TemporaryDirectory(dir=args.workdir, prefix="noctaya-fetch-bench-") as work:
        root = Path(work)
        source = _write_files(root / "source", args.files, args.file_mib)
        (root / "registry").mkdir()
        with run_registry(root / "registry") as registry:
            print(f"pushing {args.files} × {args.file_mib} MiB to {registry.host} …", flush=True)
            uri = _push(registry, source)
            bench = Bench(
                root, root / "source", uri, _blob_urls(registry, uri), args.concurrency, baseline
            )
            _warm_up(root, baseline)
            runs = [_one_run(bench, index) for index in range(args.runs)]
            _print_table(runs, size, args.concurrency)
            if args.profile:
                _profile(root, uri)
    return 0


def _write_files(folder: Path, count: int, mib: int) -> list[Path]:
    folder.mkdir(parents=True)
    paths = []
    for index in range(count):
        path = folder / f"model-{index:05d}-of-{count:05d}.safetensors"
        with path.open("wb") as output:
            for _ in range(mib):
                output.write(os.urandom(MIB))
        paths.append(path)
    return paths


def _push(registry: RunningRegistry, files: list[Path]) -> str:
    digest = push_files(registry, "bench/model", "v1", files)
    return f"oci://{registry.host}/bench/model@{digest}"


def _blob_urls(registry: RunningRegistry, uri: str) -> list[str]:
    """The artifact's blob URLs, for the curl columns (the registry needs no credentials)."""
    import requests

    digest = uri.rsplit("@", 1)[1]
    response = requests.get(
        f"http://{registry.host}/v2/bench/model/manifests/{digest}",
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
        timeout=30,
    )
    response.raise_for_status()
    layers = response.json()["layers"]
    return [f"http://{registry.host}/v2/bench/model/blobs/{layer['digest']}" for layer in layers]


def _one_run(bench: Bench, index: int) -> Run:
    """Every step once, starting `index` steps into the order, every other run backwards."""
    steps: list[tuple[str, Callable[[Path], float | Fetched]]] = [
        ("cp", lambda target: _timed(["cp", "-r", str(bench.source), str(target)])),
        ("cp_sync", lambda target: _timed_cp_sync(bench.source, target)),
        ("serve", lambda target: _timed_curl(bench, None)),
        ("curl_sync", lambda target: _timed_curl(bench, target)),
        ("fetch", lambda target: _timed_fetch(bench, target, None)),
    ]
    if bench.baseline is not None:
        baseline = bench.baseline
        steps.append(("baseline", lambda target: _timed_fetch(bench, target, baseline)))
    shift = index % len(steps)
    order = steps[shift:] + steps[:shift]
    results: dict[str, float | Fetched] = {}
    for name, step in order[::-1] if index % 2 else order:
        target = bench.root / f"{name}-{index}"
        _settle()
        results[name] = step(target)
        shutil.rmtree(target, ignore_errors=True)
    return Run(
        cp=_seconds(results["cp"]),
        cp_sync=_seconds(results["cp_sync"]),
        serve=_seconds(results["serve"]),
        curl_sync=_seconds(results["curl_sync"]),
        fetch=_fetched(results["fetch"]),
        baseline=_fetched(results["baseline"]) if "baseline" in results else None,
    )


def _seconds(value: float | Fetched) -> float:
    assert isinstance(value, float)
    return value


def _fetched(value: float | Fetched) -> Fetched:
    assert isinstance(value, Fetched)
    return value


def _timed_fetch(bench: Bench, cache: Path, baseline: Path | None) -> Fetched:
    env = _bytecode_env(bench.root)
    if baseline is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(baseline), env.get("PYTHONPATH")]))
    argv = [FETCH, bench.uri, "--cache", str(cache), "--plain-http"]
    started = time.monotonic()
    process = subprocess.Popen(
        [*argv, "--concurrency", str(bench.concurrency)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    hwm = 0
    status = Path(f"/proc/{process.pid}/status")
    while True:  # wait4, not Popen.poll: its rusage holds this child's CPU time
        pid, code, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        hwm = max(hwm, _vm_hwm(status))
        time.sleep(SAMPLE_INTERVAL)
    elapsed = time.monotonic() - started
    process.returncode = os.waitstatus_to_exitcode(code)
    if process.returncode != 0:
        raise SystemExit(f"noctaya-fetch failed ({process.returncode}); run it by hand to see why")
    return Fetched(elapsed, usage.ru_utime + usage.ru_stime, hwm)


def _timed_curl(bench: Bench, folder: Path | None) -> float:
    """Every blob with curl, `concurrency` at a time; into `folder` and flushed, or discarded."""
    if folder is not None:
        folder.mkdir()
    pending = list(enumerate(bench.blob_urls))
    running: list[subprocess.Popen[bytes]] = []
    started = time.monotonic()
    while pending or running:
        while pending and len(running) < bench.concurrency:
            index, url = pending.pop(0)
            output = str(folder / f"blob-{index}") if folder is not None else os.devnull
            running.append(subprocess.Popen(["curl", "-sSf", "-o", output, url]))
        finished = running.pop(0)
        if finished.wait() != 0:
            raise SystemExit(f"curl failed ({finished.returncode})")
    if folder is not None:
        subprocess.run(["sync", "-f", str(folder)], check=True)
    return time.monotonic() - started


def _bytecode_env(root: Path) -> dict[str, str]:
    """Byte-code cached under `root`, as an installed image has it, without writing to the
    environment the fetcher is installed in (a checkout may set PYTHONDONTWRITEBYTECODE)."""
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(root / "pycache")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _warm_up(root: Path, baseline: Path | None) -> None:
    """Compile the fetcher's imports once, so that no run pays for it."""
    code = "import noctaya.fetch.cli, noctaya.fetch.oci"
    subprocess.run([sys.executable, "-c", code], check=True, env=_bytecode_env(root))
    if baseline is not None:
        env = {**_bytecode_env(root), "PYTHONPATH": str(baseline)}
        subprocess.run([sys.executable, "-c", code], check=True, env=env)


def _settle() -> None:
    """Write back what earlier steps left dirty, so no step pays for another's writes."""
    subprocess.run(["sync"], check=True)


def _timed(argv: list[str]) -> float:
    started = time.monotonic()
    subprocess.run(argv, check=True)
    return time.monotonic() - started


def _timed_cp_sync(folder: Path, target: Path) -> float:
    started = time.monotonic()
    subprocess.run(["cp", "-r", str(folder), str(target)], check=True)
    subprocess.run(["sync", "-f", str(target)], check=True)
    return time.monotonic() - started


def _vm_hwm(status: Path) -> int:
    """VmHWM in bytes, 0 once the process is gone."""
    try:
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def _print_table(runs: list[Run], size: int, concurrency: int) -> None:
    print(
        f"\nOCI fetch of {size // MIB} MiB vs cp on the same disk, MiB/s; serve and curl+sync:"
        f" curl of the same blobs, {concurrency} at a time, to /dev/null or to files + sync"
    )
    median = Run(
        cp=statistics.median(r.cp for r in runs),
        cp_sync=statistics.median(r.cp_sync for r in runs),
        serve=statistics.median(r.serve for r in runs),
        curl_sync=statistics.median(r.curl_sync for r in runs),
        fetch=_median([r.fetch for r in runs]),
        baseline=_median(baselines)
        if (baselines := [r.baseline for r in runs if r.baseline])
        else None,
    )
    tables: list[tuple[str, Callable[[Run], Fetched | None]]] = [("fetch", lambda r: r.fetch)]
    if runs[0].baseline is not None:
        tables.append(("baseline", lambda r: r.baseline))
    for label, pick in tables:
        header = (
            f"{'run':>6} {'cp':>6} {'cp+sync':>8} {'serve':>6} {'curl+sync':>10} {label:>8} "
            f"{'÷cp':>5} {'÷cp+sync':>9} {'÷curl+sync':>11} {'CPU s':>6} {'VmHWM MB':>9}"
        )
        print(header)
        print("-" * len(header))
        for index, run in enumerate(runs, 1):
            print(_row(str(index), run, pick(run), size))
        print(_row("median", median, pick(median), size))
        print()
    print("targets: fetch ÷ cp ≥ 0.8, peak RSS < 150 MB")


def _median(fetches: list[Fetched]) -> Fetched:
    return Fetched(
        seconds=statistics.median(f.seconds for f in fetches),
        cpu=statistics.median(f.cpu for f in fetches),
        hwm=int(statistics.median(f.hwm for f in fetches)),
    )


def _row(label: str, run: Run, fetched: Fetched | None, size: int) -> str:
    assert fetched is not None
    mib = size / MIB
    return (
        f"{label:>6} {mib / run.cp:6.0f} {mib / run.cp_sync:8.0f} {mib / run.serve:6.0f} "
        f"{mib / run.curl_sync:10.0f} {mib / fetched.seconds:8.0f} "
        f"{run.cp / fetched.seconds:5.2f} {run.cp_sync / fetched.seconds:9.2f} "
        f"{run.curl_sync / fetched.seconds:11.2f} {fetched.cpu:6.2f} {fetched.hwm / 1e6:9.1f}"
    )


def _profile(root: Path, uri: str) -> None:
    stats_file = root / "fetch.prof"
    cache = root / "cache-profile"
    profiled = Path(__file__).with_name("profiled.py")
    argv = [sys.executable, str(profiled), str(stats_file), uri, "--cache", str(cache)]
    subprocess.run(
        [*argv, "--plain-http"], check=True, stdout=subprocess.DEVNULL, env=_bytecode_env(root)
    )
    print(f"\ncProfile of one fetch (all threads), top {PROFILE_TOP} by own time:")
    pstats.Stats(str(stats_file)).sort_stats("tottime").print_stats(PROFILE_TOP)
    shutil.rmtree(cache)


if __name__ == "__main__":
    sys.exit(main())
