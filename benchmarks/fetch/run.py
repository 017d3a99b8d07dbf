"""`noctaya-fetch` against `cp`: OCI fetch throughput from a local registry, and peak memory.

    .venv/bin/python benchmarks/fetch/run.py [--files 8 --file-mib 128 --runs 3] [--profile]

Starts Debian's `docker-registry` on 127.0.0.1 (as the fetcher's tests do), pushes an artifact
of `--files` files of `--file-mib` MiB each (1 GiB by default) with the ORAS SDK, then per run:

- `cp -r` of the same files to a fresh folder on the same disk, and `cp -r` followed by
  `sync -f` (the fetcher flushes every byte before it promotes, `cp` does not);
- `noctaya-fetch oci://…@sha256:… --cache <fresh folder> --plain-http`, timed from start to
  exit (so the command's start-up counts), its CPU time from wait4's rusage, and its peak RSS
  as VmHWM sampled from /proc/<pid>/status every 20 ms. (wait4's ru_maxrss is no use here: it
  counts the forked child before exec, that is this script's own memory.)

Every step starts after a `sync`, so none pays for another's writeback. The table shows each
run and the median; the ratio is fetch throughput over copy throughput
(1.0: as fast as copying the bytes on this disk). The registry serves from the page cache
after the push, and so does `cp`: both read what was just written.

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
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from fetch.registry import RunningRegistry, push_files, run_registry  # noqa: E402

FETCH = str(Path(sys.executable).with_name("noctaya-fetch"))
MIB = 1 << 20
SAMPLE_INTERVAL = 0.02
PROFILE_TOP = 15


@dataclass(frozen=True)
class Run:
    cp: float
    cp_sync: float
    fetch: float
    cpu: float
    """The fetch's user + system CPU seconds, steadier than its wall time on a busy machine."""
    hwm: int


def main() -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/fetch/run.py")
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--file-mib", type=int, default=128)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temporary folder")
    parser.add_argument("--profile", action="store_true", help="also profile one fetch")
    args = parser.parse_args()
    size = args.files * args.file_mib * MIB
    with tempfile.TemporaryDirectory(dir=args.workdir, prefix="noctaya-fetch-bench-") as work:
        root = Path(work)
        source = _write_files(root / "source", args.files, args.file_mib)
        (root / "registry").mkdir()
        with run_registry(root / "registry") as registry:
            print(f"pushing {args.files} × {args.file_mib} MiB to {registry.host} …", flush=True)
            uri = _push(registry, source)
            _warm_up(root)
            runs = [_one_run(root, source, uri, index) for index in range(args.runs)]
            _print_table(runs, size)
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


def _one_run(root: Path, source: list[Path], uri: str, index: int) -> Run:
    folder = source[0].parent
    _settle()
    cp_seconds = _timed(["cp", "-r", str(folder), str(root / f"cp-{index}")])
    shutil.rmtree(root / f"cp-{index}")
    _settle()
    cp_sync = _timed_cp_sync(folder, root / f"cps-{index}")
    shutil.rmtree(root / f"cps-{index}")
    _settle()
    cache = root / f"cache-{index}"
    started = time.monotonic()
    process = subprocess.Popen(
        [FETCH, uri, "--cache", str(cache), "--plain-http"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_bytecode_env(root),
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
    shutil.rmtree(cache)
    cpu = usage.ru_utime + usage.ru_stime
    return Run(cp_seconds, cp_sync, elapsed, cpu, hwm)


def _bytecode_env(root: Path) -> dict[str, str]:
    """Byte-code cached under `root`, as an installed image has it, without writing to the
    environment the fetcher is installed in (a checkout may set PYTHONDONTWRITEBYTECODE)."""
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(root / "pycache")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _warm_up(root: Path) -> None:
    """Compile the fetcher's imports once, so that no run pays for it."""
    code = "import noctaya.fetch.cli, noctaya.fetch.oci"
    subprocess.run([sys.executable, "-c", code], check=True, env=_bytecode_env(root))


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


def _print_table(runs: list[Run], size: int) -> None:
    header = (
        f"{'run':>6} {'cp MiB/s':>9} {'cp+sync':>9} {'fetch MiB/s':>12} "
        f"{'ratio cp':>9} {'ratio sync':>11} {'CPU s':>6} {'VmHWM MB':>9}"
    )
    print(f"\nOCI fetch of {size // MIB} MiB vs cp on the same disk")
    print(header)
    print("-" * len(header))
    for index, run in enumerate(runs, 1):
        print(_row(str(index), run, size))
    median = Run(
        cp=statistics.median(r.cp for r in runs),
        cp_sync=statistics.median(r.cp_sync for r in runs),
        fetch=statistics.median(r.fetch for r in runs),
        cpu=statistics.median(r.cpu for r in runs),
        hwm=int(statistics.median(r.hwm for r in runs)),
    )
    print(_row("median", median, size))
    print("targets: ratio ≥ 0.8, peak RSS < 150 MB")


def _row(label: str, run: Run, size: int) -> str:
    mib = size / MIB
    return (
        f"{label:>6} {mib / run.cp:9.0f} {mib / run.cp_sync:9.0f} {mib / run.fetch:12.0f} "
        f"{run.cp / run.fetch:9.2f} {run.cp_sync / run.fetch:11.2f} "
        f"{run.cpu:6.2f} {run.hwm / 1e6:9.1f}"
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
