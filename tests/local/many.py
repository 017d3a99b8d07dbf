"""Support for tests of several services on one local mode: their files in a folder, SSE streams
read with the time of every line, and `DeviceWatch`, which sees who holds a device from the
processes themselves (/proc), not from local mode's word.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sysconfig
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from .support import runtime_doc, service_doc, write_manifest

VISIBLE = "CUDA_VISIBLE_DEVICES"
MARK = "LOCAL_TEST_MARK"
"""Set in one test's local mode, so every process it starts inherits it (not a `NOCTAYA_*` name,
which local mode keeps from its gateways)."""


def stub_file(
    folder: Path,
    name: str,
    port: int,
    *,
    env: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    args: list[str] | None = None,
    command: str = "noctaya-engine-stub",
    grace: int = 5,
    **spec: Any,
) -> Path:
    """`<name>.yaml`: a stub runtime of its own on `port` (run by `command`) and the LLMService
    `name`, with `args` as its argsOverride."""
    runtime = runtime_doc(port, name=f"stub-{name}", env=env, command=command, grace=grace)
    service = service_doc(f"stub-{name}", **spec)
    service["metadata"] = {"name": name, "annotations": annotations or {}}
    if args:
        service["spec"]["runtime"]["argsOverride"] = args
    return write_manifest(folder / f"{name}.yaml", runtime, service)


def slow_to_stop(folder: Path) -> str:
    """An engine command that runs the stub as its child and ignores SIGTERM itself, so that
    its stop takes the runtime's whole grace period, as a real engine's can."""
    stub = shutil.which("noctaya-engine-stub", path=sysconfig.get_path("scripts"))
    assert stub is not None
    script = folder / "slow-to-stop.sh"
    body = f'trap "" TERM\n"{stub}" "$@" &\nwhile :; do sleep 0.1; done\n'
    script.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    script.chmod(0o755)
    return str(script)


@dataclass
class Stream:
    """One streamed chat completion: each non-empty line with the seconds since it was sent."""

    lines: list[tuple[float, str]] = field(default_factory=list)
    status: int = 0
    began: float = 0.0
    """When it was sent (monotonic clock); line times count from here."""

    @property
    def comments(self) -> list[str]:
        return [line for _, line in self.lines if line.startswith(":")]

    @property
    def data(self) -> list[dict[str, Any]]:
        return [json.loads(line[6:]) for _, line in self.lines if line.startswith("data: {")]

    @property
    def contents(self) -> list[str]:
        return [
            chunk["choices"][0]["delta"]["content"]
            for chunk in self.data
            if chunk["choices"][0]["delta"].get("content")
        ]

    @property
    def done(self) -> bool:
        return bool(self.lines) and self.lines[-1][1] == "data: [DONE]"

    def first(self, prefix: str) -> float:
        """When the first line starting with `prefix` came (monotonic clock)."""
        return self.began + next(at for at, line in self.lines if line.startswith(prefix))

    @property
    def ended(self) -> float:
        return self.began + self.lines[-1][0]


def stream_chat(
    url: str, model: str, *, query: str = "", timeout: float = 120, **extra: Any
) -> Stream:
    """A streamed chat completion; `query` is added to the path (the stub's `tokens=N`)."""
    body = {"model": model, "messages": [{"role": "user", "content": "Hi"}], "stream": True}
    stream = Stream(began=time.monotonic())
    target = f"{url}/chat/completions" + (f"?{query}" if query else "")
    with httpx.stream("POST", target, json={**body, **extra}, timeout=timeout) as response:
        stream.status = response.status_code
        for line in response.iter_lines():
            if line:
                stream.lines.append((time.monotonic() - stream.began, line))
    return stream


@dataclass(frozen=True)
class Holder:
    pid: int
    group: int
    devices: tuple[str, ...]
    cmdline: str


class DeviceWatch:
    """Samples, every `period`, the live processes of one local mode (found by the `MARK` in
    their environment) that were given devices, and keeps the largest number of process groups
    seen holding one device at once."""

    def __init__(self, period: float = 0.01) -> None:
        self.mark = uuid.uuid4().hex
        self.env = {MARK: self.mark}
        self._period = period
        self._known: dict[int, Holder | None] = {}  # pid → what it holds (None: nothing of ours)
        self.samples: list[tuple[float, list[Holder]]] = []
        self.most_at_once: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> DeviceWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def holders(self) -> list[Holder]:
        """The processes holding devices now."""
        return self._sample()

    def groups_seen(self) -> set[int]:
        return {holder.group for _, holders in self.samples for holder in holders}

    def _run(self) -> None:
        while not self._stop.is_set():
            holders = self._sample()
            self.samples.append((time.monotonic(), holders))
            for device in {d for holder in holders for d in holder.devices}:
                groups = {holder.group for holder in holders if device in holder.devices}
                self.most_at_once[device] = max(self.most_at_once.get(device, 0), len(groups))
            self._stop.wait(self._period)

    def _sample(self) -> list[Holder]:
        live = set()
        holders = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            pid = int(entry)
            live.add(pid)
            holder = self._known[pid] if pid in self._known else self._classify(pid)
            if holder is not None and _alive(pid):
                holders.append(holder)
        for gone in set(self._known) - live:
            del self._known[gone]
        return holders

    def _classify(self, pid: int) -> Holder | None:
        """What `pid` holds. Known for good once it holds devices or is not ours; one of ours
        without devices is read again next time (a child between fork and exec still has local
        mode's environment)."""
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            stat = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            return None
        values = dict(item.split(b"=", 1) for item in environ if b"=" in item)
        if values.get(MARK.encode()) != self.mark.encode():
            self._known[pid] = None
            return None
        if VISIBLE.encode() not in values:
            return None
        devices = tuple(values[VISIBLE.encode()].decode().split(","))
        holder = Holder(pid, int(stat[2]), devices, cmdline.decode(errors="replace"))
        self._known[pid] = holder
        return holder


def _alive(pid: int) -> bool:
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        return state != b"Z"
    return False


def status(url: str) -> dict[str, dict[str, Any]]:
    """The endpoint's `/noctaya/status`, by service."""
    base = url.removesuffix("/v1")
    services = httpx.get(f"{base}/noctaya/status", timeout=10).json()["services"]
    return {service["service"]: service for service in services}


def models(url: str) -> dict[str, dict[str, Any]]:
    """`GET /v1/models`, by model id."""
    listed = httpx.get(f"{url}/models", timeout=10).json()
    assert listed["object"] == "list"
    return {model["id"]: model for model in listed["data"]}
