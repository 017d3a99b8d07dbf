"""Services added at once start their gateways a few at a time: never more than
`STARTING_AT_ONCE` gateway processes are starting together, and the next starts when one of
them serves or fails. Seen from the gateway processes themselves: each real gateway is held at
its start (a `sitecustomize` on its PYTHONPATH, before its own code runs) until the test lets it
go, so a start lasts exactly as long as the test says."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from pathlib import Path

import httpx
from noctaya.local import log_lines
from noctaya.local.paced_starts import STARTING_AT_ONCE
from support.ports import free_port

from .conftest import StartLocal
from .many import stub_file
from .support import pid_exists, wait_until

HOOK = """\
import os, pathlib, time
gates = os.environ.get("PACED_TEST_GATES")
if gates and "NOCTAYA_BACKEND_URL" in os.environ:  # a gateway, not local mode or an engine
    gates = pathlib.Path(gates)
    (gates / f"{os.getpid()}.started").touch()
    while not (gates / "open").exists() and not (gates / f"{os.getpid()}.go").exists():
        time.sleep(0.02)
"""


class Gates:
    """Where held gateways say they started and wait to be let go; a thread keeps the most
    held at once (started, alive, not let go)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir()
        self.open_all()
        self.most_held = 0
        self._stop = threading.Event()
        self._watch = threading.Thread(target=self._sample, daemon=True)

    def env(self, hook: Path) -> dict[str, str]:
        hook.mkdir()
        (hook / "sitecustomize.py").write_text(HOOK, encoding="utf-8")
        path = os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")]))
        return {"PYTHONPATH": path, "PACED_TEST_GATES": str(self.folder)}

    def started(self) -> list[int]:
        return sorted(int(entry.stem) for entry in self.folder.glob("*.started"))

    def held(self) -> list[int]:
        if (self.folder / "open").exists():
            return []
        return [
            pid
            for pid in self.started()
            if pid_exists(pid) and not (self.folder / f"{pid}.go").exists()
        ]

    def let_go(self, pid: int) -> None:
        (self.folder / f"{pid}.go").touch()

    def close_all(self) -> None:
        """Hold every gateway started from now on."""
        for pid in self.started():
            self.let_go(pid)
        (self.folder / "open").unlink()
        self._watch.start()

    def open_all(self) -> None:
        (self.folder / "open").touch()

    def stop(self) -> int:
        self._stop.set()
        self._watch.join()
        return self.most_held

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.most_held = max(self.most_held, len(self.held()))
            self._stop.wait(0.01)


def test_services_added_at_once_start_their_gateways_a_few_at_a_time(
    tmp_path: Path, start_local: StartLocal
) -> None:
    folder, staged = tmp_path / "served", tmp_path / "staged"
    folder.mkdir()
    staged.mkdir()
    gates = Gates(tmp_path / "gates")
    stub_file(folder, "base", free_port())
    local = start_local(folder, env=gates.env(tmp_path / "hook"))
    url = local.url()
    assert len(gates.started()) == 1, "the hook holds gateways"

    gates.close_all()
    added = [f"svc-{index}" for index in range(STARTING_AT_ONCE + 3)]
    for name in added:
        os.rename(stub_file(staged, name, free_port()), folder / f"{name}.yaml")
    for name in added:
        local.wait_for(re.compile(rf"{name}: added \("))
    assert wait_until(lambda: local.count(log_lines.GATEWAY_STARTED_RE) >= 1 + STARTING_AT_ONCE)
    time.sleep(1.0)  # time for more starts, were they not paced
    assert len(gates.held()) == STARTING_AT_ONCE, "the others wait for a turn"
    assert len(gates.started()) == 1 + STARTING_AT_ONCE
    base = url.removesuffix("/v1")
    assert httpx.get(f"{base}/healthz", timeout=5).status_code == 200

    gates.let_go(gates.held()[0])
    assert wait_until(lambda: len(gates.started()) == 2 + STARTING_AT_ONCE), "one served"
    os.kill(gates.held()[0], signal.SIGKILL)
    assert wait_until(lambda: len(gates.started()) == 3 + STARTING_AT_ONCE), "one failed"
    assert len(gates.held()) == STARTING_AT_ONCE

    gates.open_all()
    assert wait_until(lambda: local.count(log_lines.SERVING_RE) == 1 + len(added), within=60)
    assert gates.stop() == STARTING_AT_ONCE


def test_services_removed_while_waiting_for_a_turn_never_start_and_give_no_turn_away(
    tmp_path: Path, start_local: StartLocal
) -> None:
    folder, staged = tmp_path / "served", tmp_path / "staged"
    folder.mkdir()
    staged.mkdir()
    gates = Gates(tmp_path / "gates")
    stub_file(folder, "base", free_port())
    local = start_local(folder, env=gates.env(tmp_path / "hook"))
    local.url()
    gates.close_all()
    added = [f"svc-{index}" for index in range(STARTING_AT_ONCE + 3)]
    for name in added:
        os.rename(stub_file(staged, name, free_port()), folder / f"{name}.yaml")
    assert wait_until(lambda: len(gates.held()) == STARTING_AT_ONCE)
    assert wait_until(lambda: local.count(log_lines.GATEWAY_STARTED_RE) >= 1 + STARTING_AT_ONCE)
    starting = {
        match["service"]
        for line in local.lines
        if (match := log_lines.GATEWAY_STARTED_RE.search(line)) and match["service"] != "base"
    }
    waiting = sorted(set(added) - starting)
    for name in waiting:
        (folder / f"{name}.yaml").unlink()
    for name in waiting:
        local.wait_for(re.compile(rf"{name}: removed \("))

    for pid in gates.held():
        gates.let_go(pid)
    assert wait_until(lambda: local.count(log_lines.SERVING_RE) == 1 + STARTING_AT_ONCE)
    stub_file(folder, "late", free_port())
    assert wait_until(lambda: len(gates.held()) == 1), "the late one started: no turn was lost"
    assert len(gates.started()) == 2 + STARTING_AT_ONCE, "no removed service started"
    assert gates.stop() == STARTING_AT_ONCE
    assert local.stop() == 0, "stopped with a gateway held at its start"
