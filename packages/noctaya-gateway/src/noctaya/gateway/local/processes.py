"""Child processes local mode owns: each in its own process group, its output relayed, and a
stop that leaves nothing behind.

A process group per child is what makes "no orphans" hold: the engine command may be a wrapper
that forks the real server (a shell script, `vllm serve` spawning workers), and signalling the
group reaches all of them. The stop follows the kubelet: SIGTERM, the grace period, SIGKILL;
and when the main process ends, whatever it left in its group is killed, as in a container.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence

log = logging.getLogger("noctaya.local")
_LINE_LIMIT = 1 << 20


class ManagedProcess:
    """One started child; `name` prefixes its relayed output lines (`[engine] …`)."""

    def __init__(
        self, name: str, process: asyncio.subprocess.Process, relay: asyncio.Task[None]
    ) -> None:
        self.name = name
        self._process = process
        self._relay = relay

    @classmethod
    async def start(
        cls,
        name: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        on_line: Callable[[str], None] | None = None,
    ) -> ManagedProcess:
        """Raise OSError when `argv[0]` cannot be executed."""
        process = await asyncio.create_subprocess_exec(
            *argv,
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            limit=_LINE_LIMIT,
        )
        assert process.stdout is not None
        relay = asyncio.get_running_loop().create_task(_relay(name, process.stdout, on_line))
        return cls(name, process, relay)

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    async def wait(self) -> int:
        """The exit code once the process has exited and its output has been relayed.

        Whatever the process left running in its group is killed with it, as a container's
        processes end with its main process (and so none can hold the output pipe open).
        """
        code = await self._process.wait()
        self._signal_group(signal.SIGKILL)
        await asyncio.shield(self._relay)
        return code

    async def stop(self, grace: float) -> int:
        """SIGTERM the group, SIGKILL it after `grace` seconds; return the exit code."""
        if self._process.returncode is None:
            self._signal_group(signal.SIGTERM)
            try:
                async with asyncio.timeout(grace):
                    await self._process.wait()
            except TimeoutError:
                log.info("%s (pid %d) still up after %gs: killing it", self.name, self.pid, grace)
                self._signal_group(signal.SIGKILL)
        return await self.wait()

    def _signal_group(self, sig: signal.Signals) -> None:
        # The child leads its own session, so its pid is its process group id.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, sig)


async def _relay(
    name: str, stream: asyncio.StreamReader, on_line: Callable[[str], None] | None
) -> None:
    while True:
        try:
            raw = await stream.readuntil(b"\n")
        except asyncio.IncompleteReadError as end:
            raw = end.partial
        except asyncio.LimitOverrunError as long_line:
            raw = await stream.read(long_line.consumed)
        if not raw:
            return
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        with contextlib.suppress(OSError):  # keep draining: a full pipe would stall the child
            sys.stderr.write(f"[{name}] {line}\n")
            sys.stderr.flush()
        if on_line is not None:
            on_line(line)


def describe_exit(code: int) -> str:
    """`exit code 1`, or `killed by SIGKILL` for a negative (signal) return code."""
    if code >= 0:
        return f"exit code {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"
