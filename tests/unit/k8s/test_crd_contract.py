"""Every field path of the API contract's tables is in the generated CRDs, as the contract says.

The expectations below are transcribed from the API contract, not from the models: a model
change that drifts from the contract fails here. Two deliberate widenings of the contract:
vendors are DNS labels (any installed vendor plugin, not only the built-in nvidia and ascend),
and quantities, probe timings and probe ports carry the bounds Pod validation would enforce
later.
"""

from __future__ import annotations

from typing import Any

import pytest
from noctaya.k8s.crds import INFERENCERUNTIME, LLMSERVICE
from noctaya.k8s.crds.definitions import ResourceDefinition

STRING = {"type": "string"}
INTEGER = {"type": "integer"}
BOOLEAN = {"type": "boolean"}
OBJECT = {"type": "object"}
ARRAY = {"type": "array"}
QUANTITY = {"x-kubernetes-int-or-string": True}
NON_NEGATIVE_QUANTITY = {
    **QUANTITY,
    "x-kubernetes-validations": [
        {
            "rule": "type(self) == int ? self >= 0 : "
            "!self.startsWith('-') || !quantity(self).isLessThan(quantity('0'))",
            "message": "must be greater than or equal to 0",
        }
    ],
}
PROBE_PORT = {
    **QUANTITY,
    "x-kubernetes-validations": [
        {
            "rule": "type(self) == string ? size(self) > 0 : self >= 1 && self <= 65535",
            "message": "must be a port number from 1 to 65535 or a name",
        }
    ],
}
DURATION = {"type": "string"}
VENDOR = {**STRING, "minLength": 1, "maxLength": 63, "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}

LLMSERVICE_FIELDS: dict[str, dict[str, Any]] = {
    "spec.model": OBJECT,
    "spec.model.source": OBJECT,
    "spec.model.source.uri": {**STRING, "minLength": 1},
    "spec.model.source.secretRef": OBJECT,
    "spec.model.source.secretRef.name": STRING,
    "spec.model.catalogRef": STRING,
    "spec.runtime": OBJECT,
    "spec.runtime.name": STRING,
    "spec.runtime.selector.vendor": {**ARRAY, "minItems": 1},
    "spec.runtime.selector.vendor[]": VENDOR,
    "spec.runtime.argsOverride": ARRAY,
    "spec.runtime.argsOverride[]": STRING,
    "spec.resources": {**OBJECT, "default": {}},
    "spec.resources.accelerators": {**INTEGER, "default": 1, "minimum": 1},
    "spec.resources.cpu": NON_NEGATIVE_QUANTITY,
    "spec.resources.memory": NON_NEGATIVE_QUANTITY,
    "spec.resources.fraction": OBJECT,
    "spec.resources.fraction.memory": NON_NEGATIVE_QUANTITY,
    "spec.resources.fraction.cores": NON_NEGATIVE_QUANTITY,
    "spec.scaling": {**OBJECT, "default": {}},
    "spec.scaling.min": {**INTEGER, "default": 0, "minimum": 0},
    "spec.scaling.max": {**INTEGER, "default": 1, "minimum": 1},
    "spec.scaling.metric": {
        **STRING,
        "default": "queueDepth",
        "enum": ["queueDepth", "kvCacheUtil"],
    },
    "spec.scaling.target": {**INTEGER, "default": 10, "minimum": 1},
    "spec.scaling.activationTimeout": {**DURATION, "default": "5m"},
    "spec.scaling.scaleDownStabilization": {**DURATION, "default": "5m"},
    "spec.scaling.drainTimeout": {**DURATION, "default": "2m"},
    "spec.scaling.externalScaler.tls.serverSecretName": {**STRING, "minLength": 1},
    "spec.scaling.externalScaler.tls.authenticationRef.name": {**STRING, "minLength": 1},
    "spec.scaling.externalScaler.tls.authenticationRef.kind": {
        **STRING,
        "default": "TriggerAuthentication",
        "enum": ["TriggerAuthentication", "ClusterTriggerAuthentication"],
    },
    "spec.cache": {**OBJECT, "default": {}},
    "spec.cache.strategy": {
        **STRING,
        "default": "NodeLocalPVC",
        "enum": ["NodeLocalPVC", "HostPath", "SharedPVC", "BakedImage", "None"],
    },
    "spec.cache.size": NON_NEGATIVE_QUANTITY,
    "spec.cache.storageClassName": STRING,
    "spec.cache.prewarm": {**BOOLEAN, "default": False},
    "spec.endpoint": {**OBJECT, "default": {}},
    "spec.endpoint.openAICompatible": {**BOOLEAN, "default": True},
    "spec.endpoint.maxQueue": {**INTEGER, "default": 100, "minimum": 1},
    "spec.endpoint.resources.requests.cpu": NON_NEGATIVE_QUANTITY,
    "spec.endpoint.resources.requests.memory": NON_NEGATIVE_QUANTITY,
    "spec.endpoint.resources.limits.cpu": NON_NEGATIVE_QUANTITY,
    "spec.endpoint.resources.limits.memory": NON_NEGATIVE_QUANTITY,
    "spec.endpoint.authentication.secretRef.name": {**STRING, "minLength": 1},
    "spec.endpoint.authentication.secretRef.key": {**STRING, "minLength": 1},
    "spec.endpoint.coldStart": {**OBJECT, "default": {}},
    "spec.endpoint.coldStart.mode": {
        **STRING,
        "default": "keepalive",
        "enum": ["keepalive", "reject"],
    },
    "spec.endpoint.coldStart.heartbeatInterval": {**DURATION, "default": "10s"},
    "spec.imagePullSecrets": ARRAY,
    "spec.imagePullSecrets[].name": STRING,
    "status.phase": {
        **STRING,
        "enum": ["Pending", "Loading", "Ready", "ScaledToZero", "Degraded"],
    },
    "status.resolvedRuntime": STRING,
    "status.replicas": INTEGER,
    "status.endpointURL": STRING,
    "status.conditions": {
        **ARRAY,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    },
}

INFERENCERUNTIME_FIELDS: dict[str, dict[str, Any]] = {
    "spec.family": {**STRING, "default": "vllm", "enum": ["vllm", "llamacpp"]},
    "spec.vendor": VENDOR,
    "spec.priority": {**INTEGER, "default": 0, "format": "int32"},
    "spec.container": OBJECT,
    "spec.container.image": {**STRING, "minLength": 1},
    "spec.container.args": ARRAY,
    "spec.container.args[]": STRING,
    "spec.container.env": ARRAY,
    "spec.container.env[].name": STRING,
    "spec.container.env[].value": STRING,
    "spec.container.env[].valueFrom": OBJECT,
    "spec.container.port": OBJECT,
    "spec.container.port.name": {
        **STRING,
        "default": "http",
        "maxLength": 15,
        "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
    },
    "spec.container.port.containerPort": {
        **INTEGER,
        "default": 8000,
        "minimum": 1,
        "maximum": 65535,
    },
    "spec.accelerator.resourceName": {**STRING, "minLength": 1},
    "spec.accelerator.sharing.supported": {**BOOLEAN, "default": False},
    "spec.accelerator.nodeSelector": {**OBJECT, "additionalProperties": STRING},
    "spec.accelerator.tolerations": ARRAY,
    "spec.accelerator.tolerations[].key": STRING,
    "spec.accelerator.scheduler.name": STRING,
    "spec.accelerator.scheduler.queue": STRING,
    "spec.health.readiness.httpGet.path": STRING,
    "spec.health.readiness.httpGet.port": PROBE_PORT,
    "spec.health.liveness.exec.command": ARRAY,
    "spec.health.startup.periodSeconds": {**INTEGER, "minimum": 0},
    "spec.health.startup.failureThreshold": {**INTEGER, "minimum": 0},
    "spec.health.startup.initialDelaySeconds": {**INTEGER, "minimum": 0},
    "spec.health.startup.timeoutSeconds": {**INTEGER, "minimum": 0},
    "spec.health.startup.successThreshold": {**INTEGER, "minimum": 0},
    "spec.health.startup.terminationGracePeriodSeconds": {**INTEGER, "minimum": 1},
    "spec.health.startup.tcpSocket.port": PROBE_PORT,
    "spec.health.startup.grpc.port": {**INTEGER, "minimum": 1, "maximum": 65535},
    "spec.lifecycle.terminationGracePeriodSeconds": {**INTEGER, "minimum": 1},
    "spec.lifecycle.preStopDrain": {**BOOLEAN, "default": False},
    "spec.metrics.path": {**STRING, "default": "/metrics"},
    "spec.metrics.port": {**STRING, "default": "http"},
    "spec.metrics.queueDepth": STRING,
    "spec.metrics.kvCacheUtil": STRING,
    "spec.metrics.running": STRING,
    "spec.metrics.ttft": STRING,
    "status.conditions": {
        **ARRAY,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    },
}

REQUIRED = {
    "LLMService": {"": ["spec"], "spec": ["model", "runtime"], "spec.model.source": ["uri"]},
    "InferenceRuntime": {
        "": ["spec"],
        "spec": ["vendor", "container", "accelerator"],
        "spec.container": ["image", "port"],
        "spec.accelerator": ["resourceName"],
    },
}

CEL_MESSAGES = {
    "LLMService": {
        "spec.model": ["set exactly one of source or catalogRef"],
        "spec.model.source": [
            "uri must not contain credentials (user:password@ or token@, or any @ in an hf:// "
            "or modelscope:// URI); the Secret that secretRef names holds them",
            "secretRef is supported only for oci://, hf:// and modelscope:// sources",
            "secretRef.name is required",
        ],
        "spec.runtime": ["set exactly one of name or selector.vendor"],
        "spec.scaling": [
            "min must not exceed max",
            "activationTimeout must be greater than zero",
            "scaleDownStabilization must be a whole number of seconds from 0s to 1h",
            "drainTimeout must not be negative",
            "target is a percent of KV cache from 1 to 100 when metric is kvCacheUtil",
        ],
        "spec.scaling.externalScaler.tls": [
            "serverSecretName and authenticationRef.name are both required when tls is set"
        ],
        "spec.endpoint.coldStart": ["heartbeatInterval must be greater than zero"],
    },
    "InferenceRuntime": {
        "spec.accelerator.scheduler": ["scheduler.queue requires scheduler.name volcano"],
        "spec.health.readiness.httpGet": ["path must be printable ASCII without spaces"],
        "spec.metrics": [
            "metrics.queueDepth is required when metrics is set",
            "path must be printable ASCII without spaces",
        ],
    },
}

PRINTER_COLUMNS = {
    "LLMService": [
        {"name": "Phase", "jsonPath": ".status.phase", "type": "string"},
        {"name": "Runtime", "jsonPath": ".status.resolvedRuntime", "type": "string"},
        {"name": "Replicas", "jsonPath": ".status.replicas", "type": "integer"},
        {"name": "Age", "jsonPath": ".metadata.creationTimestamp", "type": "date"},
    ],
    "InferenceRuntime": [
        {"name": "Family", "jsonPath": ".spec.family", "type": "string"},
        {"name": "Vendor", "jsonPath": ".spec.vendor", "type": "string"},
        {"name": "Image", "jsonPath": ".spec.container.image", "type": "string", "priority": 1},
        {"name": "Age", "jsonPath": ".metadata.creationTimestamp", "type": "date"},
    ],
}


def _node(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """`spec.runtime.selector.vendor[]` → the item schema of that array."""
    node = schema
    for part in path.split(".") if path else []:
        name, items = part.removesuffix("[]"), part.endswith("[]")
        assert name in node.get("properties", {}), f"{path}: no property {name!r}"
        node = node["properties"][name]
        if items:
            node = node["items"]
    return node


def _version(definition: ResourceDefinition) -> dict[str, Any]:
    versions = definition.to_crd()["spec"]["versions"]
    assert len(versions) == 1
    return versions[0]


def _fields() -> list[tuple[ResourceDefinition, str, dict[str, Any]]]:
    return [(LLMSERVICE, path, want) for path, want in LLMSERVICE_FIELDS.items()] + [
        (INFERENCERUNTIME, path, want) for path, want in INFERENCERUNTIME_FIELDS.items()
    ]


@pytest.mark.parametrize(
    ("definition", "path", "expected"),
    _fields(),
    ids=[f"{d.kind}:{p}" for d, p, _ in _fields()],
)
def test_contract_field_has_its_type_default_enum_and_bounds(
    definition: ResourceDefinition, path: str, expected: dict[str, Any]
) -> None:
    node = _node(definition.schema(), path)
    for key, value in expected.items():
        assert node.get(key) == value, f"{definition.kind} {path}.{key}: {node.get(key)!r}"
    if "default" not in expected:
        assert "default" not in node, f"{path} has a default the contract does not give"


@pytest.mark.parametrize("definition", [LLMSERVICE, INFERENCERUNTIME], ids=lambda d: d.kind)
def test_required_fields_match_the_contract(definition: ResourceDefinition) -> None:
    for path, required in REQUIRED[definition.kind].items():
        assert _node(definition.schema(), path).get("required") == required, path


@pytest.mark.parametrize("definition", [LLMSERVICE, INFERENCERUNTIME], ids=lambda d: d.kind)
def test_cross_field_rules_sit_on_their_nodes_with_human_messages(
    definition: ResourceDefinition,
) -> None:
    schema = definition.schema()
    for path, messages in CEL_MESSAGES[definition.kind].items():
        rules = _node(schema, path)["x-kubernetes-validations"]
        assert [rule["message"] for rule in rules] == messages, path
        assert all(rule["rule"].strip() for rule in rules)


def test_durations_are_bounded_strings_so_cel_duration_calls_stay_within_the_cost_budget() -> None:
    scaling = _node(LLMSERVICE.schema(), "spec.scaling")
    for field in ("activationTimeout", "scaleDownStabilization", "drainTimeout"):
        node = scaling["properties"][field]
        assert node["type"] == "string"
        assert node["maxLength"] <= 64
        assert "pattern" in node


@pytest.mark.parametrize("definition", [LLMSERVICE, INFERENCERUNTIME], ids=lambda d: d.kind)
def test_printer_columns_match_the_reference(definition: ResourceDefinition) -> None:
    assert _version(definition)["additionalPrinterColumns"] == PRINTER_COLUMNS[definition.kind]


def test_llmservice_is_namespaced_with_short_name_llms_and_a_status_subresource() -> None:
    crd = LLMSERVICE.to_crd()
    assert crd["metadata"]["name"] == "llmservices.serving.noctaya.io"
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"]["shortNames"] == ["llms"]
    assert crd["spec"]["names"]["kind"] == "LLMService"
    assert _version(LLMSERVICE)["name"] == "v1alpha1"
    assert _version(LLMSERVICE)["subresources"] == {"status": {}}
    assert _version(LLMSERVICE)["served"] is _version(LLMSERVICE)["storage"] is True


def test_inferenceruntime_is_cluster_scoped_with_short_name_ir_and_a_status_subresource() -> None:
    crd = INFERENCERUNTIME.to_crd()
    assert crd["metadata"]["name"] == "inferenceruntimes.serving.noctaya.io"
    assert crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["names"]["shortNames"] == ["ir"]
    assert _version(INFERENCERUNTIME)["subresources"] == {"status": {}}
