"""What one benchmark phase did, and the printed table."""

from __future__ import annotations

import pstats
import re
from collections import Counter
from dataclasses import dataclass

from api_requests import WRITE_VERBS, Key

VERBS = ("GET", "LIST", "POST", "PUT", "PATCH", "APPLY", "DELETE")
STORAGE_WRITES = frozenset({"create", "update", "delete"})


@dataclass(frozen=True)
class PhaseResult:
    name: str
    seconds: float
    reconciles: int
    server: Counter[Key]  # the controller's requests as the API server counted them
    client: Counter[Key]  # the same, counted at the controller's client (a cross-check)
    storage: Counter[Key]  # etcd operations on the controller's resources, ("update", "pods")
    cpu_seconds: float  # the operator process's user + system time

    @property
    def requests(self) -> int:
        return sum(self.server.values())

    @property
    def writes(self) -> int:
        return sum(n for (verb, _), n in self.server.items() if verb in WRITE_VERBS)

    @property
    def storage_writes(self) -> int:
        return sum(n for (op, _), n in self.storage.items() if op in STORAGE_WRITES)

    def by_verb(self) -> Counter[str]:
        verbs: Counter[str] = Counter()
        for (verb, _), n in self.server.items():
            verbs[verb] += n
        return verbs


def _row(result: PhaseResult) -> tuple[object, ...]:
    verbs = result.by_verb()
    per = f"{result.requests / result.reconciles:.1f}" if result.reconciles else "-"
    return (
        result.name,
        f"{result.seconds:.1f}",
        f"{result.cpu_seconds:.1f}",
        result.reconciles,
        result.requests,
        per,
        *(verbs.get(verb, 0) for verb in VERBS),
        result.writes,
        result.storage_writes,
        sum(result.client.values()),
    )


def print_table(results: list[PhaseResult]) -> None:
    headers = ("phase", "seconds", "CPU s", "reconciles", "requests", "per reconcile", *VERBS,
               "writes", "etcd writes", "client count")  # fmt: skip
    cells = [list(headers), *[[str(value) for value in _row(result)] for result in results]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        print("  ".join(value.rjust(width) for value, width in zip(row, widths, strict=True)))


def print_breakdown(result: PhaseResult) -> None:
    print(f"\n{result.name}: requests by verb and resource (API server)")
    for (verb, resource), n in sorted(result.server.items(), key=lambda item: -item[1]):
        print(f"  {n:6d}  {verb} {resource}")
    writes = sorted(
        ((n, f"{op} {res}") for (op, res), n in result.storage.items() if op in STORAGE_WRITES),
        reverse=True,
    )
    listed = ", ".join(f"{n} {what}" for n, what in writes) or "none"
    print(f"{result.name}: etcd write operations: {listed}")


# Built-ins a thread blocks in (a watch reading its stream, a worker waiting for a key): their
# own time is waiting, not work, so they are left out of the profile table.
WAITS = frozenset({"acquire", "read", "readinto", "recv", "recv_into", "poll", "select", "sleep"})


def flat_profile(stats_file: str, top: int) -> str:
    """The `top` functions by own time, without blocking waits, paths shortened to the package."""
    entries = pstats.Stats(stats_file).stats.items()  # type: ignore[attr-defined]
    rows = [
        (own, total, calls, f"{_short(file)}:{line}({name})" if file != "~" else name)
        for (file, line, name), (_, calls, own, total, _) in entries
        if not _is_wait(file, name)
    ]
    rows.sort(reverse=True)
    lines = [f"{'own s':>8}  {'total s':>8}  {'calls':>9}  function"]
    lines += [f"{o:8.3f}  {t:8.3f}  {c:9d}  {where}" for o, t, c, where in rows[:top]]
    return "\n".join(lines)


_BUILTIN = re.compile(r"[<{](?:method '(\w+)'|built-in method (?:\w+\.)*(\w+))")


def _is_wait(file: str, name: str) -> bool:
    match = _BUILTIN.match(name) if file == "~" else None
    return match is not None and (match[1] or match[2]) in WAITS


def _short(file: str) -> str:
    for marker in ("/site-packages/", "/src/"):
        if marker in file:
            return file.rsplit(marker, 1)[1]
    return file.rsplit("/", 1)[-1]
