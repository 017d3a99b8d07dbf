"""Local mode's `RuntimeCatalog`: the InferenceRuntimes in the files it serves.

They play the cluster's runtimes, so a service resolves its runtime through the core exactly as
the operator resolves it (pinned name, or vendor order then priority), and a file that works
locally selects the same runtime on a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable

from noctaya.core.api import InferenceRuntime
from noctaya.core.api.names import shown
from noctaya.core.errors import NoctayaError
from noctaya.core.runtime_selection import REASON, RuntimeCandidate
from noctaya.core.values.go_text import go_list
from noctaya.gateway.local.errors import LocalConfigError


class FileRuntimes:
    def __init__(self, runtimes: Iterable[InferenceRuntime], source: str) -> None:
        """`source` names where the runtimes were read, for the error of a duplicate name."""
        listed = list(runtimes)
        self._by_name = {runtime.metadata.name or "": runtime for runtime in listed}
        if len(self._by_name) != len(listed):
            raise LocalConfigError(f"{source}: two InferenceRuntimes share a metadata.name")

    def candidates(self) -> list[RuntimeCandidate]:
        return [
            RuntimeCandidate(name, str(runtime.spec.vendor), runtime.spec.priority)
            for name, runtime in self._by_name.items()
        ]

    def runtime(self, name: str) -> InferenceRuntime:
        found = self._by_name.get(name)
        if found is None:
            raise NoctayaError(
                REASON,
                f"spec.runtime.name {shown(name)}: no InferenceRuntime of that name in the file "
                f"(found {go_list(sorted(self._by_name))})",
            )
        return found
