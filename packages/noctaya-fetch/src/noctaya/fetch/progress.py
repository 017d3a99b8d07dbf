"""Download progress: bytes done, total, rate and ETA, as log lines or a live terminal bar.

Hub libraries report progress each in their own way, so hub downloads are measured on disk
(the bytes under the `.partial` directory, sampled); the OCI fetcher writes every byte itself
and counts them exactly.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import TextIO

from noctaya.fetch.layout import is_directory


class Progress:
    """One delivery's byte counts, shared by the fetcher (writer) and a reporter (reader)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._directory: Path | None = None
        self._counted = 0
        self._last = 0
        self._initial: int | None = None
        self.total: int | None = None

    def begin(self, total: int | None, directory: Path | None = None) -> None:
        """Start measuring: by sampling `directory`, or by `advance` calls when it is None."""
        with self._lock:
            self.total = total
            self._directory = directory
            self._counted = 0
            self._last = 0
            self._initial = None
        self._initial = self.done()

    def advance(self, count: int) -> None:
        with self._lock:
            self._counted += count

    def settle(self) -> None:
        """Freeze a sampled count before the directory is renamed away."""
        if self._directory is None:
            return
        self.done()
        with self._lock:
            self._directory = None
            self._counted = self._last

    def done(self) -> int:
        with self._lock:
            directory = self._directory
            if directory is None:
                return self._counted
        size = tree_size(directory)
        with self._lock:
            if size is not None:
                # The directory also holds the client's metadata: never report past the total.
                size = min(size, self.total) if self.total is not None else size
                self._last = max(self._last, size)
            return self._last

    @property
    def resumed(self) -> int:
        """Bytes already present when the delivery started (a resumed `.partial`)."""
        return self._initial or 0


class ProgressReporter:
    """Reports a `Progress` from a thread: a line every `interval` seconds, or a live bar."""

    def __init__(
        self, progress: Progress, label: str, stream: TextIO, *, interval: float, live: bool
    ) -> None:
        self._progress = progress
        self._label = label
        self._stream = stream
        self._interval = interval
        self._live = live
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
        self._started = time.monotonic()

    def __enter__(self) -> ProgressReporter:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        if self._live:
            self._stream.write("\r\033[K")
            self._stream.flush()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def _run(self) -> None:
        period = min(self._interval, 0.5) if self._live else self._interval
        while not self._stop.wait(period):
            self._report()

    def _report(self) -> None:
        done = self._progress.done()
        total = self._progress.total
        rate = max(0, done - self._progress.resumed) / max(self.elapsed, 1e-6)
        if self._live:
            self._stream.write("\r\033[K" + bar(done, total, rate))
        else:
            self._stream.write(f"{self._label}: {status_line(done, total, rate)}\n")
        self._stream.flush()


def status_line(done: int, total: int | None, rate: float) -> str:
    """`12.0 MiB of 40.0 MiB (30%), 5.1 MiB/s, ETA 6 s`: one grep-able line per report."""
    if total is None:
        return f"{format_bytes(done)}, {format_bytes(rate)}/s"
    percent = 100 * done // total if total else 100
    return (
        f"{format_bytes(done)} of {format_bytes(total)} ({percent}%), "
        f"{format_bytes(rate)}/s, ETA {_eta(done, total, rate)}"
    )


def bar(done: int, total: int | None, rate: float, width: int = 30) -> str:
    if not total:
        return status_line(done, total, rate)
    filled = min(width, width * done // total)
    return f"[{'#' * filled}{'.' * (width - filled)}] {status_line(done, total, rate)}"


def format_bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(count) < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def format_duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def _eta(done: int, total: int, rate: float) -> str:
    if done >= total:
        return "0 s"
    if rate <= 0:
        return "unknown"
    return format_duration((total - done) / rate)


def tree_size(directory: Path) -> int | None:
    """Bytes of the regular files under `directory`; None while it is not a directory.

    A link is never followed, `directory` included: one planted at a `.partial` (to `/`, say)
    would have every progress sample and waiting line walk whatever it leads to.
    """
    if not is_directory(directory):
        return None
    total = 0
    try:
        for root, _, files in os.walk(directory):
            for name in files:
                try:
                    status = os.lstat(os.path.join(root, name))
                except FileNotFoundError:
                    continue
                if stat.S_ISREG(status.st_mode):
                    total += status.st_size
    except FileNotFoundError:
        return None
    return total if is_directory(directory) else None
