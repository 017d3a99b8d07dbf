"""Local mode's `RuntimeCatalog`: the InferenceRuntimes in the files it serves.

They play the cluster's runtimes, so a service resolves its runtime through the core exactly as
the operator resolves it (pinned name, or vendor order then priority), and a file that works
locally selects the same runtime on a cluster. Every file served contributes its runtimes, as
every file applied to a cluster would.
"""

from __future__ import annotations

from collections.abc import Iterable

from noctaya.core.api import InferenceRuntime
from noctaya.core.api.names import shown
from noctaya.core.errors import NoctayaError
from noctaya.core.runtime_selection import REASON, RuntimeCandidate
from noctaya.core.values.go_text import go_list
from noctaya.local.errors import LocalConfigError
from noctaya.local.manifest import ManifestFile


class FileRuntimes:
    def __init__(self, files: Iterable[ManifestFile]) -> None:
        self._by_name: dict[str, InferenceRuntime] = {}
        self._source: dict[str, str] = {}
        for file in files:
            for runtime in file.runtimes:
                name = runtime.metadata.name or ""
                if name in self._by_name:
                    raise LocalConfigError(
                        f"{file.source}: InferenceRuntime {shown(name)}: "
                        f"metadata.name is also the name of one in {self._source[name]}"
                    )
                self._by_name[name] = runtime
                self._source[name] = file.source

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
                f"spec.runtime.name {shown(name)}: no InferenceRuntime of that name in the files "
                f"served (found {go_list(sorted(self._by_name))})",
            )
        return found
