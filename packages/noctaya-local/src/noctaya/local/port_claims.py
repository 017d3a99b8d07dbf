"""Ports one service takes on this machine, checked against each other and against every other
running `noctaya-local` of the same user before anything starts.

An engine scaled to zero holds no socket, so a bind test alone cannot see that a second service
was given the same engine port (or a gateway port equal to it): both would start, and the
gateways would later reach the same engine, one service answering for the other. So each local
mode claims its ports: a lock file per port in a directory private to the user, held with
`flock` for the life of the process (the kernel drops it however the process ends) and naming
the service, its file and the use it puts the port to.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from noctaya.core.values.go_text import go_quote
from noctaya.core.values.listen_address import parse_listen_address
from noctaya.local.errors import LocalConfigError, LocalRunError
from noctaya.local.plan import LocalPlan

CLAIMS_DIRECTORY = "noctaya-local"


@dataclass(frozen=True, slots=True)
class PortUse:
    """Who uses a port for what, as the lock file records it; `service` "" for local mode's
    endpoint, which serves them all."""

    service: str
    use: str
    pid: int
    source: str

    def describe(self) -> str:
        if not self.service:
            return f"local mode's {self.use}"
        return f"LLMService {go_quote(self.service)} as its {self.use}"


def engine_use(plan: LocalPlan) -> str:
    return (
        f"engine port (InferenceRuntime {go_quote(plan.runtime_name)} "
        "spec.container.port.containerPort)"
    )


def endpoint_use(listen_addr: str) -> str:
    return f"endpoint (--listen {listen_addr})"


def own_endpoint_use(listen_addr: str) -> str:
    return f"own endpoint (serving.noctaya.io/local-listen {listen_addr})"


def check_ports(plans: Sequence[LocalPlan], listen_addr: str) -> None:
    """Each port one local mode uses is used once: every engine's, the endpoint's and each
    service's own endpoint's (an engine port shared by two services would let one service's
    gateway reach the other's engine)."""
    _, endpoint_port = parse_listen_address(listen_addr)
    taken: dict[int, str] = {}
    if endpoint_port:
        taken[endpoint_port] = f"local mode's {endpoint_use(listen_addr)}"
    for plan in plans:
        name = go_quote(plan.service_name)
        uses = [(plan.engine.port, engine_use(plan))]
        if plan.own_listen is not None:
            uses.append(
                (parse_listen_address(plan.own_listen)[1], own_endpoint_use(plan.own_listen))
            )
        for port, use in uses:
            other = taken.setdefault(port, f"the {use} of LLMService {name}")
            if other != f"the {use} of LLMService {name}":
                raise LocalConfigError(
                    f"LLMService {name}: port {port}, its {use}, is already {other}; "
                    "each needs a port of its own"
                )


class PortClaims:
    """The ports this process holds; `release()` (or the process's end) gives them back."""

    def __init__(self, directory: Path | None = None) -> None:
        self._directory = directory or default_directory()
        self._held: list[int] = []

    def claim(self, port: int, use: PortUse) -> None:
        """Take `port` for `use`, or raise LocalRunError naming the service that holds it."""
        _private_directory(self._directory)
        path = self._directory / f"port-{port}.lock"
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(path, flags, 0o600)
        except OSError as error:
            raise LocalRunError(f"port {port}: cannot record its use in {path}: {error}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            holder = _read_use(fd)
            os.close(fd)
            if error.errno not in (errno.EAGAIN, errno.EACCES):
                raise LocalRunError(f"port {port}: cannot lock {path}: {error}") from None
            raise LocalRunError(_taken(port, use, holder)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(asdict(use)).encode(), 0)
        self._held.append(fd)

    def release(self) -> None:
        while self._held:
            os.close(self._held.pop())


def default_directory() -> Path:
    """`$XDG_RUNTIME_DIR/noctaya-local`, else a per-user directory in the temporary directory."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / CLAIMS_DIRECTORY
    return Path(tempfile.gettempdir()) / f"{CLAIMS_DIRECTORY}-{os.getuid()}"


def _private_directory(directory: Path) -> None:
    """Create `directory` for this user only; refuse one somebody else could write to."""
    try:
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=0o700, parents=True)
        info = directory.lstat()
    except OSError as error:
        raise LocalRunError(f"cannot record the ports local mode uses: {error}") from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise LocalRunError(
            f"{directory} is not a directory private to this user; "
            "local mode records the ports it uses there"
        )


def _read_use(fd: int) -> PortUse | None:
    try:
        fields = json.loads(os.pread(fd, 4096, 0))
        return PortUse(**fields)
    except (OSError, ValueError, TypeError):
        return None  # the holder has not written it yet, or wrote something else


def _taken(port: int, wanted: PortUse, holder: PortUse | None) -> str:
    by = (
        f"{holder.describe()} (noctaya-local pid {holder.pid}, {holder.source})"
        if holder is not None
        else "another noctaya-local"
    )
    return f"port {port}: {wanted.describe()} cannot have it: it is already used by {by}"
