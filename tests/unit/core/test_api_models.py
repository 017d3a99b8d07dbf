"""The API models: contract defaults, wire names, round trips, value types and rule boundaries."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from noctaya.core.api import (
    CacheStrategy,
    ColdStartMode,
    ConditionStatus,
    Endpoint,
    InvalidResource,
    LLMServiceStatus,
    Phase,
    ScalingMetric,
    parse_inferenceruntime,
    parse_llmservice,
)
from noctaya.core.values import Duration, Quantity


def service_spec(**fields: Any) -> dict[str, Any]:
    return {
        "model": {"source": {"uri": "hf://Qwen/Qwen3-8B"}},
        "runtime": {"name": "vllm-nvidia-a10"},
        **fields,
    }


def runtime_spec(**fields: Any) -> dict[str, Any]:
    return {
        "vendor": "nvidia",
        "container": {"image": "vllm/vllm-openai:v0.25.1", "port": {}},
        "accelerator": {"resourceName": "nvidia.com/gpu"},
        **fields,
    }


def problems(parse: Any, manifest: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidResource) as caught:
        parse(manifest)
    return caught.value.problems


def test_minimal_service_gets_every_contract_default() -> None:
    spec = parse_llmservice(service_spec()).spec
    assert spec.resources.accelerators == 1
    assert (spec.scaling.min, spec.scaling.max, spec.scaling.target) == (0, 1, 10)
    assert spec.scaling.metric is ScalingMetric.QUEUE_DEPTH
    assert spec.scaling.activation_timeout == Duration.parse("5m")
    assert spec.scaling.scale_down_stabilization == Duration.parse("5m")
    assert spec.scaling.drain_timeout == Duration.parse("2m")
    assert spec.cache.strategy is CacheStrategy.NODE_LOCAL_PVC
    assert spec.cache.prewarm is False
    assert spec.cache.size is None
    assert spec.endpoint.open_ai_compatible is True
    assert spec.endpoint.max_queue == 100
    assert spec.endpoint.cold_start.mode is ColdStartMode.KEEPALIVE
    assert spec.endpoint.cold_start.heartbeat_interval == Duration.parse("10s")


def test_minimal_runtime_gets_every_contract_default() -> None:
    spec = parse_inferenceruntime(runtime_spec(metrics={"queueDepth": "q"})).spec
    assert spec.family == "vllm"
    assert spec.priority == 0
    assert (spec.container.port.name, spec.container.port.container_port) == ("http", 8000)
    assert spec.lifecycle.pre_stop_drain is False
    assert spec.lifecycle.termination_grace_period_seconds is None
    assert spec.metrics is not None
    assert (spec.metrics.path, spec.metrics.port) == ("/metrics", "http")


def test_wire_names_are_camel_case_including_the_irregular_ones() -> None:
    service = parse_llmservice(service_spec(imagePullSecrets=[{"name": "registry"}]))
    wire = service.to_wire()
    assert wire["spec"]["endpoint"]["openAICompatible"] is True
    assert wire["spec"]["endpoint"]["coldStart"]["heartbeatInterval"] == "10s"
    assert wire["spec"]["imagePullSecrets"] == [{"name": "registry"}]
    status = LLMServiceStatus.model_validate({"endpointURL": "http://svc.ai.svc/v1"})
    assert status.endpoint_url == "http://svc.ai.svc/v1"
    assert status.to_wire()["endpointURL"] == "http://svc.ai.svc/v1"


def test_python_field_names_are_accepted_as_well_as_wire_names() -> None:
    assert Endpoint(open_ai_compatible=False, max_queue=5).to_wire()["openAICompatible"] is False
    assert Endpoint.model_validate({"openAICompatible": False}).open_ai_compatible is False


def test_full_manifest_round_trips_through_the_wire_form() -> None:
    manifest = {
        "apiVersion": "serving.noctaya.io/v1alpha1",
        "kind": "LLMService",
        "metadata": {"name": "qwen3-8b", "namespace": "ai", "generation": 3, "uid": "u-1"},
        "spec": service_spec(
            resources={"accelerators": 2, "cpu": "8", "memory": "64Gi"},
            scaling={
                "min": 1,
                "max": 3,
                "target": 4,
                "activationTimeout": "2m0s",
                "scaleDownStabilization": "1m30s",
                "drainTimeout": "15s",
                "externalScaler": {
                    "tls": {
                        "serverSecretName": "qwen3-8b-scaler-tls",
                        "authenticationRef": {
                            "name": "keda-tls",
                            "kind": "ClusterTriggerAuthentication",
                        },
                    }
                },
            },
            cache={"strategy": "SharedPVC", "size": "100Gi", "storageClassName": "nfs"},
            endpoint={
                "maxQueue": 50,
                "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "256Mi"}},
                "authentication": {"secretRef": {"name": "api-key", "key": "token"}},
                "coldStart": {"mode": "reject", "heartbeatInterval": "2s"},
            },
        ),
        "status": {
            "phase": "Ready",
            "resolvedRuntime": "vllm-nvidia-a10",
            "replicas": 1,
            "endpointURL": "http://qwen3-8b.ai.svc/v1",
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "observedGeneration": 3,
                    "lastTransitionTime": "2026-01-02T03:04:05Z",
                    "reason": "Available",
                    "message": "Serving pods are ready",
                }
            ],
        },
    }
    service = parse_llmservice(manifest)
    wire = service.to_wire()
    assert parse_llmservice(wire) == service
    assert wire["status"] == manifest["status"]
    assert (
        wire["spec"]["scaling"]["externalScaler"] == manifest["spec"]["scaling"]["externalScaler"]
    )
    assert wire["spec"]["endpoint"]["resources"] == manifest["spec"]["endpoint"]["resources"]
    assert wire["metadata"]["generation"] == 3
    assert service.status.phase is Phase.READY
    assert service.status.conditions[0].status is ConditionStatus.TRUE
    assert service.status.conditions[0].last_transition_time == datetime(
        2026, 1, 2, 3, 4, 5, tzinfo=UTC
    )


def test_durations_print_in_go_form_and_quantities_in_canonical_form() -> None:
    spec = parse_llmservice(
        service_spec(
            scaling={"activationTimeout": "90s", "drainTimeout": "1.5s"},
            resources={"cpu": 2, "memory": "1.5Gi"},
        )
    ).spec
    wire = spec.to_wire()
    assert wire["scaling"]["activationTimeout"] == "1m30s"
    assert wire["scaling"]["drainTimeout"] == "1.5s"
    assert spec.resources.cpu == Quantity.parse("2")
    assert wire["resources"] == {"accelerators": 1, "cpu": "2", "memory": "1536Mi"}


def test_unknown_env_sources_pass_through_while_known_ones_are_checked() -> None:
    env = [
        {"name": "UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        {
            "name": "TOKEN",
            "valueFrom": {"fileKeyRef": {"volumeName": "v", "path": "p", "key": "k"}},
        },
        {"name": "MODEL", "value": "{{ .Model.Path }}"},
    ]
    container = {"image": "img", "port": {}, "env": env}
    runtime = parse_inferenceruntime(runtime_spec(container=container))
    assert runtime.spec.to_wire()["container"]["env"] == env
    broken = [{"name": "UID"}, {"name": "X", "valueFrom": {"fieldRef": {}}}]
    assert problems(
        parse_inferenceruntime, runtime_spec(container={**container, "env": broken})
    ) == ["spec.container.env[1].valueFrom.fieldRef.fieldPath: Required value"]


@pytest.mark.parametrize("text", ["0s", "1h", "1.5m", "2000ms", "3599s", "1h0m0s"])
def test_stabilization_accepts_whole_seconds_from_zero_to_one_hour(text: str) -> None:
    spec = parse_llmservice(service_spec(scaling={"scaleDownStabilization": text})).spec
    assert spec.scaling.scale_down_stabilization == Duration.parse(text)


@pytest.mark.parametrize("text", ["1h0m1s", "1500ms", "-1s", "1s1ns"])
def test_stabilization_rejects_fractions_negatives_and_more_than_an_hour(text: str) -> None:
    assert problems(parse_llmservice, service_spec(scaling={"scaleDownStabilization": text})) == [
        "spec.scaling.scaleDownStabilization: "
        "scaleDownStabilization must be a whole number of seconds from 0s to 1h"
    ]


def test_zero_drain_timeout_and_tiny_positive_timeouts_are_allowed() -> None:
    scaling = {"drainTimeout": "0s", "activationTimeout": "1ns"}
    endpoint = {"coldStart": {"heartbeatInterval": "1ms"}}
    spec = parse_llmservice(service_spec(scaling=scaling, endpoint=endpoint)).spec
    assert spec.scaling.drain_timeout == Duration(0)
    assert spec.endpoint.cold_start.heartbeat_interval == Duration.parse("1ms")


def test_min_may_equal_max() -> None:
    spec = parse_llmservice(service_spec(scaling={"min": 2, "max": 2})).spec
    assert (spec.scaling.min, spec.scaling.max) == (2, 2)


def test_secret_ref_is_allowed_for_oci_sources_whatever_the_scheme_case() -> None:
    uri = "OCI://registry.example/models/qwen@sha256:" + "a" * 64
    model = {"source": {"uri": uri, "secretRef": {"name": "pull"}}}
    source = parse_llmservice(service_spec(model=model)).spec.model.source
    assert source is not None
    assert source.secret_ref is not None
    assert source.secret_ref.name == "pull"


def test_reserved_fields_are_accepted_by_the_api() -> None:
    spec = parse_llmservice(
        service_spec(
            model={"catalogRef": "qwen3-8b"},
            resources={"fraction": {"memory": "12Gi", "cores": 50}},
            scaling={"metric": "kvCacheUtil"},
            cache={"strategy": "BakedImage"},
        )
    ).spec
    assert spec.model.catalog_ref == "qwen3-8b"
    assert spec.resources.fraction is not None
    assert str(spec.resources.fraction.memory) == "12Gi"
    assert spec.scaling.metric is ScalingMetric.KV_CACHE_UTIL
    assert spec.cache.strategy is CacheStrategy.BAKED_IMAGE
    sharing = {"resourceName": "nvidia.com/gpu", "sharing": {"supported": True}}
    runtime = parse_inferenceruntime(runtime_spec(accelerator=sharing))
    assert runtime.spec.accelerator.sharing is not None
    assert runtime.spec.accelerator.sharing.supported is True


def test_scheduler_queue_is_accepted_with_volcano() -> None:
    scheduler = {"name": "volcano", "queue": "llm"}
    accelerator = {"resourceName": "huawei.com/Ascend910", "scheduler": scheduler}
    runtime = parse_inferenceruntime(runtime_spec(vendor="ascend", accelerator=accelerator))
    assert runtime.spec.accelerator.scheduler is not None
    assert runtime.spec.accelerator.scheduler.queue == "llm"


def test_parse_accepts_a_bare_spec_and_fills_in_the_header() -> None:
    service = parse_llmservice(service_spec())
    assert (service.api_version, service.kind) == ("serving.noctaya.io/v1alpha1", "LLMService")


def test_parse_rejects_other_kinds_and_api_versions_by_name() -> None:
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "spec": service_spec()}
    assert problems(parse_llmservice, manifest) == [
        'apiVersion: must be "serving.noctaya.io/v1alpha1", got "v1"',
        'kind: must be "LLMService", got "ConfigMap"',
    ]


def test_parse_rejects_a_non_mapping_without_a_traceback() -> None:
    assert problems(parse_llmservice, ["not", "a", "mapping"]) == ["expected a mapping, got list"]  # type: ignore[arg-type]


def test_every_problem_is_reported_at_once_in_one_message() -> None:
    manifest = service_spec(scaling={"min": 3, "max": 2, "target": 0})
    with pytest.raises(InvalidResource) as caught:
        parse_llmservice(manifest)
    assert caught.value.problems == [
        "spec.scaling.max: min must not exceed max",
        "spec.scaling.target: Invalid value 0: must be greater than or equal to 1",
    ]
    assert caught.value.message == "invalid LLMService: " + "; ".join(caught.value.problems)


def test_integers_must_fit_their_kubernetes_format() -> None:
    assert problems(parse_llmservice, service_spec(scaling={"max": 2**31})) == [
        "spec.scaling.max: Invalid value 2147483648: must fit in a 32-bit integer"
    ]


def test_condition_reason_must_be_a_kubernetes_reason() -> None:
    status = {
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "lastTransitionTime": "2026-01-02T03:04:05Z",
                "reason": "not a reason",
                "message": "",
            }
        ]
    }
    found = problems(parse_llmservice, {"spec": service_spec(), "status": status})
    assert len(found) == 1
    assert found[0].startswith('status.conditions[0].reason: Invalid value "not a reason"')


@pytest.mark.parametrize(
    ("parse", "kind"),
    [(parse_llmservice, "LLMService"), (parse_inferenceruntime, "InferenceRuntime")],
)
@pytest.mark.parametrize(
    "header",
    [
        {"apiVersion": "serving.noctaya.io/v1alpha1", "kind": None, "metadata": {"name": "x"}},
        {"kind": None},
        {"metadata": {"name": "x"}},
        {"status": {}},
    ],
    ids=["whole-header", "kind-only", "metadata-only", "status-only"],
)
def test_a_manifest_without_spec_is_missing_its_spec_not_a_bare_spec(
    parse: Any, kind: str, header: dict[str, Any]
) -> None:
    manifest = {key: kind if key == "kind" else value for key, value in header.items()}
    assert problems(parse, manifest) == ["spec: Required value"]
