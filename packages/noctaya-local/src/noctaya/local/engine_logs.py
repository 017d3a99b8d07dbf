"""Each service's output in a file of its own: `<folder>/<service>.log`, its engine's lines and
its gateway's, each stamped and tagged (`[engine]`, `[gateway]`), appended across runs.

A line is one `write` to a file opened for appending, so two writers (two local modes serving a
service of one name) interleave whole lines, never mix them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path

from noctaya.local.errors import LocalRunError

log = logging.getLogger("noctaya.local")


def default_folder(environ: Mapping[str, str]) -> Path:
    """`$XDG_STATE_HOME/noctaya/local/logs`, else `~/.local/state/noctaya/local/logs`."""
    base = environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "noctaya" / "local" / "logs"


class ServiceLog:
    def __init__(self, path: Path) -> None:
        """A file that cannot be opened (a link planted in its place, a full disk) loses the
        service's log lines, said once; the terminal still has them."""
        self.path = path
        self._fd: int | None = None
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            self._fd = os.open(path, flags, 0o644)
        except OSError as error:
            log.warning("cannot write the log %s: %s", path, error)

    def engine(self, line: str) -> None:
        self._write("engine", line)

    def gateway(self, line: str) -> None:
        self._write("gateway", line)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _write(self, who: str, line: str) -> None:
        if self._fd is None:
            return
        now = time.time()
        stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(now))
        text = f"{stamp}.{int(now % 1 * 1000):03d} [{who}] {line}\n"
        with contextlib.suppress(OSError):  # a full disk loses log lines, never the service
            os.write(self._fd, text.encode("utf-8", errors="replace"))


class EngineLogs:
    """The folder; created (with its parents) when local mode starts."""

    def __init__(self, folder: Path) -> None:
        """LocalRunError if the folder cannot be made."""
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise LocalRunError(f"--logs {folder}: {error}") from None
        self.folder = folder

    def writer(self, service: str) -> ServiceLog:
        return ServiceLog(self.folder / f"{service}.log")
