"""The two CustomResourceDefinitions: names, scope, printer columns and the generated schemas."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from noctaya.core.api import (
    API_GROUP,
    API_VERSION,
    InferenceRuntime,
    InferenceRuntimeSpec,
    InferenceRuntimeStatus,
    LLMService,
    LLMServiceSpec,
    LLMServiceStatus,
)
from noctaya.core.api.names import LLMSERVICE_NAME, NameRule
from noctaya.k8s.crds.schema import Schema, openapi_schema, structural_problems
from pydantic import BaseModel

CATEGORY = "noctaya"


@dataclass(frozen=True)
class PrinterColumn:
    name: str
    json_path: str
    type: str = "string"
    priority: int = 0

    def to_crd(self) -> dict[str, Any]:
        column: dict[str, Any] = {"name": self.name, "jsonPath": self.json_path, "type": self.type}
        if self.priority:
            column["priority"] = self.priority
        return column


AGE = PrinterColumn("Age", ".metadata.creationTimestamp", "date")


@dataclass(frozen=True)
class ResourceDefinition:
    resource: type[BaseModel]
    spec: type[BaseModel]
    status: type[BaseModel]
    plural: str
    short_names: tuple[str, ...]
    namespaced: bool
    columns: tuple[PrinterColumn, ...]
    name_rule: NameRule | None = None
    """A narrower name than every object's RFC 1123 subdomain, in the CRD's `metadata` schema."""

    @property
    def kind(self) -> str:
        return self.resource.__name__

    @property
    def name(self) -> str:
        return f"{self.plural}.{API_GROUP}"

    def to_crd(self) -> dict[str, Any]:
        return {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": self.name},
            "spec": {
                "group": API_GROUP,
                "names": {
                    "kind": self.kind,
                    "listKind": f"{self.kind}List",
                    "plural": self.plural,
                    "singular": self.kind.lower(),
                    "shortNames": list(self.short_names),
                    "categories": [CATEGORY],
                },
                "scope": "Namespaced" if self.namespaced else "Cluster",
                "versions": [
                    {
                        "name": API_VERSION,
                        "served": True,
                        "storage": True,
                        "subresources": {"status": {}},
                        "additionalPrinterColumns": [c.to_crd() for c in self.columns],
                        "schema": {"openAPIV3Schema": self.schema()},
                    }
                ],
            },
        }

    def schema(self) -> Schema:
        schema: Schema = {
            "type": "object",
            "description": " ".join((self.resource.__doc__ or "").split()),
            "required": ["spec"],
            "properties": {
                "apiVersion": {
                    "type": "string",
                    "description": "Versioned schema of this representation of an object.",
                },
                "kind": {
                    "type": "string",
                    "description": "REST resource this object represents.",
                },
                "metadata": self._metadata_schema(),
                "spec": openapi_schema(self.spec),
                "status": openapi_schema(self.status),
            },
        }
        problems = structural_problems(schema)
        if problems:
            raise ValueError(f"{self.kind} schema is not structural: " + "; ".join(problems))
        return schema

    def _metadata_schema(self) -> Schema:
        """`name` (and `generateName`) are the only metadata fields a CRD may restrict."""
        if self.name_rule is None:
            return {"type": "object"}
        return {"type": "object", "properties": {"name": self.name_rule.schema()}}


LLMSERVICE = ResourceDefinition(
    resource=LLMService,
    spec=LLMServiceSpec,
    status=LLMServiceStatus,
    plural="llmservices",
    short_names=("llms",),
    namespaced=True,
    columns=(
        PrinterColumn("Phase", ".status.phase"),
        PrinterColumn("Runtime", ".status.resolvedRuntime"),
        PrinterColumn("Replicas", ".status.replicas", "integer"),
        AGE,
    ),
    name_rule=LLMSERVICE_NAME,
)

INFERENCERUNTIME = ResourceDefinition(
    resource=InferenceRuntime,
    spec=InferenceRuntimeSpec,
    status=InferenceRuntimeStatus,
    plural="inferenceruntimes",
    short_names=("ir",),
    namespaced=False,
    columns=(
        PrinterColumn("Family", ".spec.family"),
        PrinterColumn("Vendor", ".spec.vendor"),
        PrinterColumn("Image", ".spec.container.image", priority=1),
        AGE,
    ),
)

DEFINITIONS = (LLMSERVICE, INFERENCERUNTIME)
