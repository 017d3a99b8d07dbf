"""Every cross-field rule of the generated CRDs, enforced by the real API server at admission.

Each violating manifest must come back 422 with the rule's message on the offending field;
the matching boundary manifests must pass, so no rule is stricter than the contract. Server-side
dry run runs the full defaulting and admission chain without storing anything.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from support.custom_resources import CustomResources, Manifest
from support.envtest.api_errors import api_status
from support.manifests import inference_runtime, llmservice

pytestmark = [pytest.mark.integration, pytest.mark.kubernetes_matrix]

OCI_URI = "oci://registry.example/models/qwen@sha256:" + "a" * 64
TLS_AUTH_REF = {"name": "scaler-client-tls"}
STABILIZATION = "scaleDownStabilization must be a whole number of seconds from 0s to 1h"
NEGATIVE = "must be greater than or equal to 0"
PROBE_PORT = "must be a port number from 1 to 65535 or a name"
DNS_LABEL = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
BOTH_TLS_FIELDS = "serverSecretName and authenticationRef.name are both required when tls is set"
KV_CACHE_PERCENT = "target is a percent of KV cache from 1 to 100 when metric is kvCacheUtil"
PRINTABLE_PATH = "path must be printable ASCII without spaces"
METRICS = {"queueDepth": "vllm:num_requests_waiting", "kvCacheUtil": "vllm:kv_cache_usage_perc"}


def _service(changes: dict[str, Any]) -> Manifest:
    return llmservice("rule-check", changes)


def _runtime(changes: dict[str, Any]) -> Manifest:
    return inference_runtime("rule-check", changes)


@pytest.mark.parametrize(
    ("manifest", "field", "message"),
    [
        pytest.param(
            _service({"model": {"catalogRef": "qwen3-8b"}}),
            "spec.model",
            "set exactly one of source or catalogRef",
            id="model-source-and-catalogRef",
        ),
        pytest.param(
            _service({"model": {"source": None}}),
            "spec.model",
            "set exactly one of source or catalogRef",
            id="model-neither",
        ),
        pytest.param(
            _service({"model": {"source": None, "catalogRef": ""}}),
            "spec.model",
            "set exactly one of source or catalogRef",
            id="model-empty-catalogRef",
        ),
        pytest.param(
            _service({"runtime": {"selector": {"vendor": ["nvidia"]}}}),
            "spec.runtime",
            "set exactly one of name or selector.vendor",
            id="runtime-name-and-selector",
        ),
        pytest.param(
            _service({"runtime": {"name": None}}),
            "spec.runtime",
            "set exactly one of name or selector.vendor",
            id="runtime-neither",
        ),
        pytest.param(
            _service({"scaling": {"min": 3, "max": 2}}),
            "spec.scaling.max",
            "min must not exceed max",
            id="scaling-min-above-max",
        ),
        pytest.param(
            _service({"scaling": {"activationTimeout": "0s"}}),
            "spec.scaling.activationTimeout",
            "activationTimeout must be greater than zero",
            id="activationTimeout-zero",
        ),
        pytest.param(
            _service({"scaling": {"activationTimeout": "-1m"}}),
            "spec.scaling.activationTimeout",
            "activationTimeout must be greater than zero",
            id="activationTimeout-negative",
        ),
        pytest.param(
            _service({"endpoint": {"coldStart": {"heartbeatInterval": "0s"}}}),
            "spec.endpoint.coldStart.heartbeatInterval",
            "heartbeatInterval must be greater than zero",
            id="heartbeatInterval-zero",
        ),
        pytest.param(
            _service({"scaling": {"drainTimeout": "-1s"}}),
            "spec.scaling.drainTimeout",
            "drainTimeout must not be negative",
            id="drainTimeout-negative",
        ),
        pytest.param(
            _service({"model": {"source": {"uri": "pvc://weights", "secretRef": {"name": "x"}}}}),
            "spec.model.source.secretRef",
            "secretRef is supported only for oci://, hf:// and modelscope:// sources",
            id="secretRef-on-pvc-source",
        ),
        pytest.param(
            _service({"model": {"source": {"uri": OCI_URI, "secretRef": {}}}}),
            "spec.model.source.secretRef",
            "secretRef.name is required",
            id="secretRef-without-name",
        ),
        pytest.param(
            _service({"scaling": {"externalScaler": {"tls": {"serverSecretName": "tls"}}}}),
            "spec.scaling.externalScaler.tls",
            BOTH_TLS_FIELDS,
            id="tls-without-authenticationRef",
        ),
        pytest.param(
            _service({"scaling": {"externalScaler": {"tls": {"authenticationRef": TLS_AUTH_REF}}}}),
            "spec.scaling.externalScaler.tls",
            BOTH_TLS_FIELDS,
            id="tls-without-serverSecretName",
        ),
        pytest.param(
            _service({"scaling": {"scaleDownStabilization": "1500ms"}}),
            "spec.scaling.scaleDownStabilization",
            STABILIZATION,
            id="stabilization-fractional-seconds",
        ),
        pytest.param(
            _service({"scaling": {"scaleDownStabilization": "61m"}}),
            "spec.scaling.scaleDownStabilization",
            STABILIZATION,
            id="stabilization-above-1h",
        ),
        pytest.param(
            _service({"scaling": {"scaleDownStabilization": "-1s"}}),
            "spec.scaling.scaleDownStabilization",
            STABILIZATION,
            id="stabilization-negative",
        ),
        pytest.param(
            _runtime({"accelerator": {"scheduler": {"name": "default", "queue": "q"}}}),
            "spec.accelerator.scheduler.queue",
            "scheduler.queue requires scheduler.name volcano",
            id="queue-with-another-scheduler",
        ),
        pytest.param(
            _runtime({"accelerator": {"scheduler": {"queue": "q"}}}),
            "spec.accelerator.scheduler.queue",
            "scheduler.queue requires scheduler.name volcano",
            id="queue-without-scheduler-name",
        ),
        pytest.param(
            _runtime({"metrics": {"path": "/metrics"}}),
            "spec.metrics",
            "metrics.queueDepth is required when metrics is set",
            id="metrics-without-queueDepth",
        ),
        pytest.param(
            _runtime({"container": {"port": {"name": "a-sixteen-chars1"}}}),
            "spec.container.port.name",
            "Too long: may not be",  # "more than 15 bytes" from 1.31, "longer than 15" before
            id="port-name-longer-than-15",
        ),
        pytest.param(
            _runtime({"container": {"port": {"name": "HTTP"}}}),
            "spec.container.port.name",
            "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            id="port-name-not-a-dns-label",
        ),
        pytest.param(
            _service({"resources": {"cpu": "-500m"}}),
            "spec.resources.cpu",
            NEGATIVE,
            id="negative-cpu",
        ),
        pytest.param(
            _service({"resources": {"memory": -1}}),
            "spec.resources.memory",
            NEGATIVE,
            id="negative-memory-as-integer",
        ),
        pytest.param(
            _service({"cache": {"size": "-50Gi"}}),
            "spec.cache.size",
            NEGATIVE,
            id="negative-cache-size",
        ),
        pytest.param(
            _service({"endpoint": {"resources": {"limits": {"memory": "-1e3"}}}}),
            "spec.endpoint.resources.limits.memory",
            NEGATIVE,
            id="negative-gateway-memory-limit",
        ),
        pytest.param(
            _service({"runtime": {"name": None, "selector": {"vendor": ["Example_GPU"]}}}),
            "spec.runtime.selector.vendor[0]",
            DNS_LABEL,
            id="selector-vendor-not-a-dns-label",
        ),
        pytest.param(
            _runtime({"vendor": "-example"}),
            "spec.vendor",
            DNS_LABEL,
            id="vendor-not-a-dns-label",
        ),
        pytest.param(
            _runtime({"health": {"startup": {"periodSeconds": -10}}}),
            "spec.health.startup.periodSeconds",
            "should be greater than or equal to 0",
            id="negative-probe-period",
        ),
        pytest.param(
            _runtime({"health": {"readiness": {"failureThreshold": -1}}}),
            "spec.health.readiness.failureThreshold",
            "should be greater than or equal to 0",
            id="negative-failure-threshold",
        ),
        pytest.param(
            _runtime({"health": {"startup": {"httpGet": {"port": 0}}}}),
            "spec.health.startup.httpGet.port",
            PROBE_PORT,
            id="probe-port-zero",
        ),
        pytest.param(
            _runtime({"health": {"liveness": {"tcpSocket": {"port": 65536}}}}),
            "spec.health.liveness.tcpSocket.port",
            PROBE_PORT,
            id="probe-port-above-65535",
        ),
        pytest.param(
            _runtime({"health": {"startup": {"grpc": {"port": 70000}}}}),
            "spec.health.startup.grpc.port",
            "should be less than or equal to 65535",
            id="grpc-probe-port-above-65535",
        ),
        pytest.param(
            _service({"scaling": {"metric": "kvCacheUtil", "target": 101}}),
            "spec.scaling.target",
            KV_CACHE_PERCENT,
            id="kvCacheUtil-target-above-100",
        ),
        pytest.param(
            _service({"scaling": {"metric": "kvCacheUtil", "target": 0}}),
            "spec.scaling.target",
            "should be greater than or equal to 1",
            id="kvCacheUtil-target-zero",
        ),
        pytest.param(
            _runtime({"health": {"readiness": {"httpGet": {"port": "http", "path": "/he alth"}}}}),
            "spec.health.readiness.httpGet.path",
            PRINTABLE_PATH,
            id="readiness-path-with-a-space",
        ),
        pytest.param(
            _runtime({"health": {"readiness": {"httpGet": {"port": "http", "path": "/santé"}}}}),
            "spec.health.readiness.httpGet.path",
            PRINTABLE_PATH,
            id="readiness-path-not-ascii",
        ),
        pytest.param(
            _runtime({"metrics": {**METRICS, "path": "/me trics"}}),
            "spec.metrics.path",
            PRINTABLE_PATH,
            id="metrics-path-with-a-space",
        ),
    ],
)
def test_violating_manifest_is_rejected_at_admission_naming_field_and_rule(
    resources: CustomResources, namespace: str, manifest: Manifest, field: str, message: str
) -> None:
    with pytest.raises(ApiException) as rejected:
        resources.create(manifest, namespace, dry_run=True)
    status = api_status(rejected.value)
    assert rejected.value.status == 422, status
    causes = status.get("details", {}).get("causes") or []
    assert any(
        cause.get("field") == field and message in cause.get("message", "") for cause in causes
    ), f"expected {message!r} on {field}; the server said: {status['message']}"


@pytest.mark.parametrize(
    ("manifest", "path", "stored"),
    [
        pytest.param(
            _service({"scaling": {"min": 2, "max": 2}}), ["scaling", "min"], 2, id="min-equals-max"
        ),
        pytest.param(
            _service({"scaling": {"scaleDownStabilization": "0s"}}),
            ["scaling", "scaleDownStabilization"],
            "0s",
            id="stabilization-0s",
        ),
        pytest.param(
            _service({"scaling": {"scaleDownStabilization": "1h"}}),
            ["scaling", "scaleDownStabilization"],
            "1h",
            id="stabilization-1h",
        ),
        pytest.param(
            _service({"scaling": {"scaleDownStabilization": "1m30s"}}),
            ["scaling", "scaleDownStabilization"],
            "1m30s",
            id="stabilization-compound-whole-seconds",
        ),
        pytest.param(
            _service({"scaling": {"drainTimeout": "0s"}}),
            ["scaling", "drainTimeout"],
            "0s",
            id="drainTimeout-zero",
        ),
        pytest.param(
            _service({"endpoint": {"coldStart": {"heartbeatInterval": "500ms"}}}),
            ["endpoint", "coldStart", "heartbeatInterval"],
            "500ms",
            id="heartbeatInterval-subsecond",
        ),
        pytest.param(
            _service({"model": {"source": {"uri": OCI_URI, "secretRef": {"name": "pull"}}}}),
            ["model", "source", "secretRef"],
            {"name": "pull"},
            id="secretRef-on-oci-source",
        ),
        pytest.param(
            _service({"model": {"source": {"secretRef": {"name": "hub-token"}}}}),
            ["model", "source", "secretRef"],
            {"name": "hub-token"},
            id="secretRef-on-hf-source",
        ),
        pytest.param(
            _service(
                {"model": {"source": {"uri": "ModelScope://a/b", "secretRef": {"name": "t"}}}}
            ),
            ["model", "source", "secretRef"],
            {"name": "t"},
            id="secretRef-on-modelscope-source",
        ),
        pytest.param(
            _service({"runtime": {"name": None, "selector": {"vendor": ["ascend", "nvidia"]}}}),
            ["runtime", "selector", "vendor"],
            ["ascend", "nvidia"],
            id="runtime-selector-only",
        ),
        pytest.param(
            _service(
                {
                    "scaling": {
                        "externalScaler": {
                            "tls": {"serverSecretName": "tls", "authenticationRef": TLS_AUTH_REF}
                        }
                    }
                }
            ),
            ["scaling", "externalScaler", "tls", "authenticationRef"],
            {"name": "scaler-client-tls", "kind": "TriggerAuthentication"},
            id="tls-complete-defaults-kind",
        ),
        pytest.param(
            _runtime({"accelerator": {"scheduler": {"name": "volcano", "queue": "q"}}}),
            ["accelerator", "scheduler"],
            {"name": "volcano", "queue": "q"},
            id="queue-with-volcano",
        ),
        pytest.param(
            _runtime({"container": {"port": {"name": "a-fifteen-chars"}}}),
            ["container", "port", "name"],
            "a-fifteen-chars",
            id="port-name-of-15",
        ),
        pytest.param(
            _service({"resources": {"cpu": "0", "memory": 0}, "cache": {"size": "-0"}}),
            ["resources", "cpu"],
            "0",
            id="zero-quantities",
        ),
        pytest.param(
            _service({"endpoint": {"resources": {"requests": {"cpu": "100m"}}}}),
            ["endpoint", "resources", "requests", "cpu"],
            "100m",
            id="positive-gateway-cpu",
        ),
        pytest.param(
            _service({"runtime": {"name": None, "selector": {"vendor": ["example", "nvidia"]}}}),
            ["runtime", "selector", "vendor"],
            ["example", "nvidia"],
            id="selector-names-a-plugin-vendor",
        ),
        pytest.param(
            _runtime({"vendor": "example"}),
            ["vendor"],
            "example",
            id="runtime-names-a-plugin-vendor",
        ),
        pytest.param(
            _runtime(
                {
                    "health": {
                        "startup": {"httpGet": {"port": "http"}, "periodSeconds": 0},
                        "liveness": {"tcpSocket": {"port": 65535}, "failureThreshold": 1},
                    }
                }
            ),
            ["health", "liveness", "tcpSocket", "port"],
            65535,
            id="probe-ports-by-name-and-at-the-bound",
        ),
        pytest.param(
            _service({"scaling": {"metric": "kvCacheUtil", "target": 100}}),
            ["scaling", "target"],
            100,
            id="kvCacheUtil-target-100",
        ),
        pytest.param(
            _service({"scaling": {"metric": "kvCacheUtil"}}),
            ["scaling", "target"],
            10,
            id="kvCacheUtil-target-defaulted",
        ),
        pytest.param(
            _service({"scaling": {"target": 500}}),
            ["scaling", "target"],
            500,
            id="queueDepth-target-above-100",
        ),
        pytest.param(
            _runtime(
                {"health": {"readiness": {"httpGet": {"port": "http", "path": "/v1/ok?a=~"}}}}
            ),
            ["health", "readiness", "httpGet", "path"],
            "/v1/ok?a=~",
            id="readiness-path-printable",
        ),
        pytest.param(
            _runtime({"health": {"liveness": {"httpGet": {"port": "http", "path": "/he alth"}}}}),
            ["health", "liveness", "httpGet", "path"],
            "/he alth",
            id="liveness-path-keeps-kubernetes-rules",
        ),
        pytest.param(
            _runtime({"metrics": METRICS}),
            ["metrics", "kvCacheUtil"],
            "vllm:kv_cache_usage_perc",
            id="metrics-with-kvCacheUtil",
        ),
    ],
)
def test_boundary_manifest_is_admitted(
    resources: CustomResources, namespace: str, manifest: Manifest, path: list[str], stored: Any
) -> None:
    admitted: Any = resources.create(manifest, namespace, dry_run=True)["spec"]
    for key in path:
        admitted = admitted[key]
    assert admitted == stored
