"""The core's planner over a cluster: the InferenceRuntimes it resolves among are read through a
`Reader`.

Reads only: the operator reads the API server or its caches, and `noctaya render` /
`noctaya validate` read the manifests they were given, so the offline answer is the operator's
answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TypeVar

from kubernetes.client.exceptions import ApiException
from noctaya.core.api import InferenceRuntime, read_inferenceruntime
from noctaya.core.errors import NoctayaError
from noctaya.core.plan import planner
from noctaya.core.plan.planner import PlanSettings
from noctaya.core.plugins import VendorRegistry
from noctaya.core.runtime_selection import RuntimeCandidate, runtime_lookup_error
from noctaya.k8s import kinds
from noctaya.k8s.reader import KubeObject, Reader

_T = TypeVar("_T")


def api_step(reason: str, call: Callable[[], _T]) -> _T:
    """Run one API step; its failure carries the step's reason to the conditions."""
    try:
        return call()
    except ApiException as error:
        raise NoctayaError(reason, api_message(error)) from error


def api_message(error: Exception) -> str:
    summary = getattr(error, "summary", None)
    if callable(summary):
        return str(summary())
    return str(getattr(error, "reason", None) or error)


class ClusterRuntimes:
    """The `RuntimeCatalog` of a cluster: the InferenceRuntimes a `Reader` sees."""

    def __init__(self, reader: Reader) -> None:
        self._reader = reader
        self._decoded: dict[str, tuple[str, InferenceRuntime]] = {}
        """Decoded runtimes by name, with the resourceVersion they were decoded at: each of a
        runtime's hundreds of services would otherwise validate the same unchanged object."""

    def candidates(self) -> list[RuntimeCandidate]:
        listed = api_step(
            "RuntimeResolution", lambda: self._reader.list(kinds.INFERENCE_RUNTIME, "", "")
        )
        return [
            RuntimeCandidate(
                name=obj["metadata"]["name"],
                vendor=str(obj.get("spec", {}).get("vendor", "")),
                priority=int(obj.get("spec", {}).get("priority") or 0),
            )
            for obj in listed
        ]

    def runtime(self, name: str) -> InferenceRuntime:
        try:
            obj = self._reader.get(kinds.INFERENCE_RUNTIME, "", name)
        except ApiException as error:
            raise runtime_lookup_error(name, api_message(error)) from error
        if obj is None:
            raise runtime_lookup_error(
                name, f'inferenceruntimes.serving.noctaya.io "{name}" not found'
            )
        return self._decode(obj)

    def _decode(self, obj: KubeObject) -> InferenceRuntime:
        """The runtime decoded, once per resourceVersion; the model is shared, so read-only."""
        metadata = obj.get("metadata") or {}
        name, version = metadata.get("name", ""), metadata.get("resourceVersion")
        cached = self._decoded.get(name)
        if version and cached is not None and cached[0] == version:
            return cached[1]
        runtime = _parse_runtime(obj)
        if version:
            self._decoded[name] = (version, runtime)
        return runtime


class ServicePlanner(planner.ServicePlanner):
    """The core's planner over the runtimes a `Reader` sees and the installed vendor plugins."""

    def __init__(
        self,
        reader: Reader,
        vendors: VendorRegistry,
        settings: PlanSettings,
    ) -> None:
        super().__init__(ClusterRuntimes(reader), vendors, settings)


def _parse_runtime(obj: KubeObject) -> InferenceRuntime:
    """A broken runtime is a runtime-resolution failure of the service that selected it."""
    try:
        return read_inferenceruntime(obj)
    except NoctayaError as error:
        name = (obj.get("metadata") or {}).get("name", "")
        raise NoctayaError(
            "RuntimeResolution", f"InferenceRuntime {json.dumps(name)}: {error.message}"
        ) from error
