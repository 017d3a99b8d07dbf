"""On a terminal, local mode keeps a status table below its log (one row per service: model,
state, devices, requests in flight, last request), redrawn as things change; through a pipe it
writes the log lines alone. Run on a real pseudo-terminal."""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from noctaya.local import log_lines
from support.ports import free_port

from .many import stream_chat, stub_file
from .support import DEADLINE, wait_until

_ESCAPE = re.compile(r"\x1b\[\d*[A-Za-z]")
ERASE = b"\x1b[J"


def seconds(age: str) -> int:
    return int(age.removesuffix("s"))


class Terminal:
    """`noctaya-local` with a pseudo-terminal as its stdout and stderr."""

    def __init__(self, *args: str) -> None:
        master, slave = pty.openpty()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "noctaya.local", *args],
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=slave,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "TERM": "xterm"},
        )
        os.close(slave)
        self._master = master
        self.raw = b""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:  # EIO: the other side is closed
                return
            if not chunk:
                return
            self.raw += chunk

    @property
    def lines(self) -> list[str]:
        text = self.raw.decode("utf-8", errors="replace")
        return [_ESCAPE.sub("", line).rstrip("\r") for line in text.split("\n")]

    def row(self, service: str) -> list[str]:
        """The cells of the last row drawn for `service`."""
        rows = [line.split() for line in self.lines if line.split()[:1] == [service]]
        return rows[-1] if rows else []

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=DEADLINE)
        finally:
            self._reader.join(timeout=5)
            os.close(self._master)


def test_a_terminal_shows_each_service_s_state_in_a_table_kept_below_the_log(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    stub_file(folder, "a", free_port())
    stub_file(folder, "b", free_port())
    logs = tmp_path / "logs"
    terminal = Terminal(
        str(folder), "--listen", "127.0.0.1:0", "--devices", "0", "--logs", str(logs)
    )
    try:
        header = ["SERVICE", "MODEL", "STATE", "DEVICES", "IN", "FLIGHT", "LAST", "REQUEST"]
        assert wait_until(lambda: header in [line.split() for line in terminal.lines])
        assert wait_until(lambda: terminal.row("b") == ["b", "b", "cold", "-", "0", "-"])
        endpoint = next(
            match["url"] for line in terminal.lines if (match := log_lines.ENDPOINT_RE.search(line))
        )
        assert stream_chat(endpoint, "a").done
        assert wait_until(lambda: terminal.row("a")[:5] == ["a", "a", "ready", "0", "0"])
        assert terminal.row("a")[6:] == ["ago"]
        seen = seconds(terminal.row("a")[5])
        # redrawn every second, so the last request's age moves on by itself
        assert wait_until(lambda: seconds(terminal.row("a")[5]) >= seen + 2)
        assert ERASE in terminal.raw, "drawn over, not appended"
    finally:
        assert terminal.stop() == 0
    log_only = [line for line in terminal.lines if line.startswith("[local]")]
    assert any("a: engine started" in line for line in log_only)
    assert (logs / "a.log").exists()
