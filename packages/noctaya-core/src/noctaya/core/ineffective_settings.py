"""Settings a service or runtime may hold that change nothing: accepted everywhere, worth a warning.

The API server admits them and the operator plans around them without a word, so a user who
believes `prewarm: true` downloads the model into a cache that does not exist learns it only
from a slow first request. `noctaya validate` prints these as warnings; each line names the
field and says why it has no effect.
"""

from __future__ import annotations

from noctaya.core.api import CacheStrategy, ColdStartMode, InferenceRuntime, LLMService
from noctaya.core.errors import NoctayaError
from noctaya.core.model_source import SourceKind, resolve_model_spec
from noctaya.core.values.go_text import go_quote

_NO_CLAIM = frozenset({CacheStrategy.NONE, CacheStrategy.HOST_PATH})


def ineffective_settings(service: LLMService, runtime: InferenceRuntime | None) -> list[str]:
    """`field: has no effect: why` for each setting of `service` that does nothing; `runtime`
    is the one it resolved to (None if it resolved to none)."""
    spec = service.spec
    found = []
    try:
        source: SourceKind | None = resolve_model_spec(spec.model).kind
    except NoctayaError:
        source = None  # reported as a problem of its own
    cache = spec.cache
    if cache.prewarm and source is SourceKind.PVC:
        found.append(
            "spec.cache.prewarm: has no effect: a pvc:// model is mounted, never downloaded"
        )
    elif cache.prewarm and cache.strategy is CacheStrategy.NONE and source is not SourceKind.OCI:
        found.append(
            "spec.cache.prewarm: has no effect with cache.strategy None: there is no cache to "
            "download the model into, so the engine downloads it on each start"
        )
    if cache.strategy in _NO_CLAIM:
        for field, value in (("size", cache.size), ("storageClassName", cache.storage_class_name)):
            if value is not None:
                found.append(
                    f"spec.cache.{field}: has no effect with cache.strategy {cache.strategy}: "
                    "no cache claim is created"
                )
    if not spec.endpoint.open_ai_compatible:
        found.append(
            "spec.endpoint.openAICompatible: has no effect: the gateway always serves the "
            "OpenAI-compatible API"
        )
    cold_start = spec.endpoint.cold_start
    heartbeat_set = "heartbeat_interval" in cold_start.model_fields_set
    if cold_start.mode is ColdStartMode.REJECT and heartbeat_set:
        found.append(
            "spec.endpoint.coldStart.heartbeatInterval: has no effect with coldStart.mode "
            "reject: no request is held, so none gets heartbeats"
        )
    drain_set = "drain_timeout" in spec.scaling.model_fields_set
    if drain_set and runtime is not None and not runtime.spec.lifecycle.pre_stop_drain:
        found.append(
            "spec.scaling.drainTimeout: has no effect: InferenceRuntime "
            f"{go_quote(runtime.metadata.name or '')} does not set lifecycle.preStopDrain"
        )
    return found


def ineffective_runtime_settings(runtime: InferenceRuntime) -> list[str]:
    """`field: has no effect: why` for each part of `runtime` that Noctaya never acts on."""
    found = []
    if runtime.spec.metrics is not None and not runtime.spec.metrics.kv_cache_util:
        found.append(
            "spec.metrics: has no effect: scrape metadata for your monitoring; it names no "
            "kvCacheUtil gauge, so every service scales on the gateways' demand"
        )
    if "status" in runtime.model_fields_set:
        found.append(
            "status: has no effect: never written; each LLMService reports the state of the "
            "runtime it uses"
        )
    return found
