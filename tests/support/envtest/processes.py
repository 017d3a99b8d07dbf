"""Child processes that cannot outlive the test session.

Each child leads its own process group, so stopping it also stops anything it spawned. Three
layers make sure it goes away: an explicit stop (fixture teardown), an atexit hook (interpreter
exit without teardown), and the Linux parent-death signal (the test process killed outright).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_live: set[ManagedProcess] = set()


def is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ManagedProcess:
    """One long-running program with its output appended to a log file."""

    def __init__(self, name: str, argv: list[str], log_path: Path) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self._popen: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self._popen is None else self._popen.pid

    @property
    def exit_code(self) -> int | None:
        return None if self._popen is None else self._popen.poll()

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            log.write(f"==== {time.strftime('%H:%M:%S')} starting {self.name}\n".encode())
            log.flush()
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent if _on_main_thread() else None,
            )
        _live.add(self)

    def stop(self, grace_seconds: float = 10.0) -> None:
        """SIGTERM the group, then SIGKILL whatever is left after the grace period."""
        popen = self._popen
        if popen is None:
            return
        if popen.poll() is None:
            _signal_group(popen.pid, signal.SIGTERM)
            try:
                popen.wait(timeout=grace_seconds)
            except subprocess.TimeoutExpired:
                _signal_group(popen.pid, signal.SIGKILL)
                popen.wait(timeout=grace_seconds)
        # A clean leader exit can still leave group members behind.
        _signal_group(popen.pid, signal.SIGKILL)
        self._popen = None
        _live.discard(self)

    def log_tail(self, lines: int = 40) -> str:
        try:
            with self.log_path.open("rb") as log:
                tail = deque(log, maxlen=lines)
        except FileNotFoundError:
            return f"(no log at {self.log_path})"
        return b"".join(tail).decode(errors="replace")


def _signal_group(pid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


def _on_main_thread() -> bool:
    # The parent-death signal fires when the *thread* that forked exits, so only the main
    # thread (which lives as long as the session) may ask for it.
    return threading.current_thread() is threading.main_thread()


def _die_with_parent() -> None:
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@atexit.register
def _stop_leftovers() -> None:
    for process in list(_live):
        process.stop(grace_seconds=2.0)
