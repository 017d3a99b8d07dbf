"""Killing `noctaya-fetch` at any point never leaves a marker on an incomplete tree."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from .conftest import leftovers, tree_files
from .registry import RunningRegistry, push_files

COMMAND = str(Path(sys.executable).with_name("noctaya-fetch"))
RUNS = 20


def test_a_kill_at_a_random_point_leaves_no_marker_or_the_complete_tree(
    registry: RunningRegistry, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    (source / "model").mkdir(parents=True)
    files = {f"model/shard-{n}.bin": os.urandom(2 * 1024 * 1024) for n in range(3)}
    files["weights.bin"] = os.urandom(2 * 1024 * 1024)
    for name, content in files.items():
        (source / name).write_bytes(content)
    digest = push_files(registry, "models/crash", "v1", [source / "model", source / "weights.bin"])
    config = registry.config_file(tmp_path)
    arguments = [
        COMMAND,
        f"oci://{registry.host}/models/crash@{digest}",
        "--plain-http",
        "--registry-config",
        str(config),
    ]
    destination = Path("oci") / f"sha256-{digest.removeprefix('sha256:')}"

    started = time.monotonic()
    complete = subprocess.run([*arguments, "--cache", str(tmp_path / "timing")], check=True)
    duration = time.monotonic() - started
    assert complete.returncode == 0

    chooser = random.Random(11)
    cache = tmp_path / "cache"
    for _ in range(RUNS):
        process = subprocess.Popen(
            [*arguments, "--cache", str(cache)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            process.wait(timeout=chooser.uniform(0.05, duration))
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            process.wait()
        model = cache / destination
        if (model / ".noctaya-ready").exists():
            assert tree_files(model) == files

    finished = subprocess.run([*arguments, "--cache", str(cache)], capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr
    assert tree_files(cache / destination) == files
    assert leftovers(cache) == []
