"""What one benchmark phase did, and the printed table."""

from __future__ import annotations

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
        result.reconciles,
        result.requests,
        per,
        *(verbs.get(verb, 0) for verb in VERBS),
        result.writes,
        result.storage_writes,
        sum(result.client.values()),
    )


def print_table(results: list[PhaseResult]) -> None:
    headers = ("phase", "seconds", "reconciles", "requests", "per reconcile", *VERBS,
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
