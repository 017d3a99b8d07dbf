"""From an LLMService to its serving plan: resolve the runtime, the vendor and the model, then plan.

Reads only, and only through a `Reader`: the operator reads the API server or its caches, and
`noctaya render` / `noctaya validate` read the manifests they were given, so the offline answer
is the operator's answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TypeVar

from kubernetes.client.exceptions import ApiException
from noctaya.core.api import InferenceRuntime, LLMService, read_inferenceruntime
from noctaya.core.errors import NoctayaError
from noctaya.core.model_source import resolve_model_spec
from noctaya.core.plan.serving import ServingPlan, plan_serving
from noctaya.core.plugins import VendorRegistry
from noctaya.core.runtime_selection import (
    RuntimeCandidate,
    pinned_runtime_name,
    runtime_lookup_error,
    select_runtime,
)
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


class ServicePlanner:
    """Plans services against the runtimes a `Reader` sees and the installed vendor plugins."""

    def __init__(
        self,
        reader: Reader,
        vendors: VendorRegistry,
        *,
        gateway_image: str,
        gateway_replicas: int,
        fetch_image: str | None = None,
    ) -> None:
        self._reader = reader
        self._vendors = vendors
        self._gateway_image = gateway_image
        self._gateway_replicas = gateway_replicas
        self._fetch_image = fetch_image
        self._runtimes: dict[str, tuple[str, InferenceRuntime]] = {}
        """Decoded runtimes by name, with the resourceVersion they were decoded at: each of a
        runtime's hundreds of services would otherwise validate the same unchanged object."""

    def plan(self, service: LLMService) -> ServingPlan:
        runtime = self.resolve_runtime(service)
        # Vendor names are open-ended: the installed plugins decide (else UnsupportedVendor).
        adapter = self._vendors.adapter(runtime.spec.vendor)
        model = resolve_model_spec(service.spec.model)
        return plan_serving(
            service,
            runtime,
            adapter,
            model,
            gateway_image=self._gateway_image,
            gateway_replicas=self._gateway_replicas,
            fetch_image=self._fetch_image,
        )

    def resolve_runtime(self, service: LLMService) -> InferenceRuntime:
        selection = service.spec.runtime
        vendors = list(selection.selector.vendor or []) if selection.selector else []
        pinned = pinned_runtime_name(selection.name, vendors)
        if pinned is not None:
            try:
                obj = self._reader.get(kinds.INFERENCE_RUNTIME, "", pinned)
            except ApiException as error:
                raise runtime_lookup_error(pinned, api_message(error)) from error
            if obj is None:
                raise runtime_lookup_error(
                    pinned, f'inferenceruntimes.serving.noctaya.io "{pinned}" not found'
                )
            return self._decoded(obj)
        runtimes = {
            obj["metadata"]["name"]: obj
            for obj in api_step(
                "RuntimeResolution", lambda: self._reader.list(kinds.INFERENCE_RUNTIME, "", "")
            )
        }
        candidates = [
            RuntimeCandidate(
                name=name,
                vendor=str(obj.get("spec", {}).get("vendor", "")),
                priority=int(obj.get("spec", {}).get("priority") or 0),
            )
            for name, obj in runtimes.items()
        ]
        chosen = select_runtime(candidates, vendors)
        return self._decoded(runtimes[chosen.name])

    def _decoded(self, obj: KubeObject) -> InferenceRuntime:
        """The runtime decoded, once per resourceVersion; the model is shared, so read-only."""
        metadata = obj.get("metadata") or {}
        name, version = metadata.get("name", ""), metadata.get("resourceVersion")
        cached = self._runtimes.get(name)
        if version and cached is not None and cached[0] == version:
            return cached[1]
        runtime = _parse_runtime(obj)
        if version:
            self._runtimes[name] = (version, runtime)
        return runtime


def _parse_runtime(obj: KubeObject) -> InferenceRuntime:
    """A broken runtime is a runtime-resolution failure of the service that selected it."""
    try:
        return read_inferenceruntime(obj)
    except NoctayaError as error:
        name = (obj.get("metadata") or {}).get("name", "")
        raise NoctayaError(
            "RuntimeResolution", f"InferenceRuntime {json.dumps(name)}: {error.message}"
        ) from error
