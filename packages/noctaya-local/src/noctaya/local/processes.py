"""Child processes local mode owns: each in its own process group, its output relayed, and a
stop that leaves nothing behind, not even when local mode itself is killed.

A process group per child is what makes "no orphans" hold: the engine command may be a wrapper
that forks the real server (a shell script, `vllm serve` spawning workers), and signalling the
group reaches all of them. The stop follows the kubelet: SIGTERM, the grace period, SIGKILL;
and when the main process ends, whatever it left in its group is killed, as in a container.

Each group also holds a keeper: a `sh` that waits for end-of-file on a pipe only local mode
writes to, then kills its group. When local mode dies, even by SIGKILL, the kernel closes that
pipe and the keeper takes the gateway or the engine, with their children, along (and so frees
their ports) instead of leaving them orphaned.

Output comes through a pipe local mode creates itself rather than asyncio's, whose `wait()`
also waits for the pipe to close: a child that left the group (a `setsid` daemon) can hold it
open for good, so once the process has exited its output is read for OUTPUT_DRAIN seconds more
at most.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from noctaya.local import console

log = logging.getLogger("noctaya.local")
_LINE_LIMIT = 1 << 20
OUTPUT_DRAIN = 2.0
"""How long an exited process's output is still read while something else holds it open."""
GROUP_EXIT_WAIT = 5.0
"""How long `stop` waits for the group's last processes to die after SIGKILL (they do in
milliseconds; a process in uninterruptible sleep may take longer, and is then left)."""
_PROC = Path("/proc")
_KEEPER = ("/bin/sh", "-c", "trap '' HUP INT TERM; read _; kill -KILL 0")


class ManagedProcess:
    """One started child; `name` prefixes its relayed output lines (`[svc engine] …`), which
    `on_line` also gets."""

    def __init__(
        self,
        name: str,
        process: asyncio.subprocess.Process,
        output: asyncio.ReadTransport,
        relay: asyncio.Task[None],
        keeper: _Keeper | None,
    ) -> None:
        self.name = name
        self._process = process
        self._output = output
        self._relay = relay
        self._keeper = keeper

    @classmethod
    async def start(
        cls,
        name: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        on_line: Callable[[str], None] | None = None,
    ) -> ManagedProcess:
        """Raise OSError when `argv[0]` cannot be executed."""
        loop = asyncio.get_running_loop()
        read_end, write_end = os.pipe()
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                env=dict(env),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=write_end,
                stderr=write_end,
                process_group=0,
            )
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        pipe = io.FileIO(read_end, "r")
        try:
            keeper = await _Keeper.start(process.pid)
            reader = asyncio.StreamReader(limit=_LINE_LIMIT)
            output, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), pipe
            )
        except BaseException:  # cancelled half-way: nothing may outlive the attempt
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            pipe.close()
            raise
        relay = loop.create_task(_relay(name, reader, on_line))
        return cls(name, process, output, relay, keeper)

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    async def wait(self) -> int:
        """The exit code once the process has exited and its output has been relayed.

        Whatever the process left running in its group is killed with it, as a container's
        processes end with its main process.
        """
        code = await self._process.wait()
        self._signal_group(signal.SIGKILL)
        if self._keeper is not None:
            await self._keeper.release()
        await self._drain()
        await self._group_gone()
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

    async def _drain(self) -> None:
        if not self._relay.done():
            await asyncio.wait({self._relay}, timeout=OUTPUT_DRAIN)
        if not self._relay.done():
            log.info(
                "%s (pid %d) exited but a process outside its group holds its output open: "
                "no longer reading it",
                self.name,
                self.pid,
            )
            self._relay.cancel()
            await asyncio.wait({self._relay})
        self._output.close()

    async def _group_gone(self) -> None:
        """Until no process of the group is alive: only then are the devices it used free."""
        deadline = asyncio.get_running_loop().time() + GROUP_EXIT_WAIT
        while _group_alive(self._process.pid):
            if asyncio.get_running_loop().time() > deadline:
                log.info("%s (pid %d): its process group outlives SIGKILL", self.name, self.pid)
                return
            await asyncio.sleep(0.01)

    def _signal_group(self, sig: signal.Signals) -> None:
        # The child leads its own process group, so its pid is the group id.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, sig)


class _Keeper:
    """The `sh` in a child's group that kills the group when local mode's lifeline closes."""

    def __init__(self, process: asyncio.subprocess.Process, lifeline: int) -> None:
        self._process = process
        self._lifeline: int | None = lifeline

    @classmethod
    async def start(cls, group: int) -> _Keeper | None:
        """None if the group is already gone (the child exited at once) or cannot be joined."""
        read_end, write_end = os.pipe()
        try:
            process = await asyncio.create_subprocess_exec(
                *_KEEPER,
                stdin=read_end,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
                process_group=group,
            )
        except (OSError, subprocess.SubprocessError) as error:
            os.close(write_end)
            log.debug("no keeper for process group %d: %s", group, error)
            return None
        finally:
            os.close(read_end)
        return cls(process, write_end)

    async def release(self) -> None:
        """Close the lifeline (the keeper kills what is left of its group) and reap it."""
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None
        await self._process.wait()


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
        console.write_line(f"[{name}] {line}")
        if on_line is not None:
            on_line(line)


def _group_alive(group: int) -> bool:
    """Whether a process of `group` is alive (zombies, already dead, do not count)."""
    if not _PROC.is_dir():  # no /proc: the kernel's answer counts zombies too
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == group and fields[0] != b"Z":
            return True
    return False


def describe_exit(code: int) -> str:
    """`exit code 1`, or `killed by SIGKILL` for a negative (signal) return code."""
    if code >= 0:
        return f"exit code {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"
