"""`noctaya render` and `noctaya validate`: the operator's answer for manifests, without a cluster.

Documents are decoded strictly (`parse_*`: a typo is an error, not a silently dropped field),
with the rules admission runs (the CRD's schema and CEL rules, and the API server's own checks
of names, labels and annotations), then every valid LLMService is planned by the operator's
`ServicePlanner` against the InferenceRuntimes in the same files and rendered by the operator's
`render_serving`, so a problem reads exactly as the operator's condition would
(`Reason: message`), and a clean service renders exactly the objects the operator applies (it
adds only the owner reference and its applied-hash annotation, which need the live service).
Settings that are valid but do nothing are warnings, which fail nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from noctaya.core.api import InvalidResource, LLMService, parse_inferenceruntime, parse_llmservice
from noctaya.core.api.json_shape import quote
from noctaya.core.api.llmservice import ScalingMetric
from noctaya.core.api.yaml_documents import ManifestYAMLError, read_documents
from noctaya.core.errors import NoctayaError
from noctaya.core.ineffective_settings import ineffective_runtime_settings, ineffective_settings
from noctaya.core.plan.gateway import GatewayDefaults
from noctaya.core.plan.planner import PlanSettings
from noctaya.core.plugins import VendorRegistry
from noctaya.core.runtime_selection import pinned_runtime_name
from noctaya.k8s import kinds
from noctaya.k8s.manifest_yaml import dump_manifest
from noctaya.k8s.planning import ServicePlanner
from noctaya.k8s.reader import KubeObject
from noctaya.k8s.render.serving import RenderedService, render_serving
from noctaya.k8s.runtime.resources import ResourceKind

_Resource = TypeVar("_Resource")
DEFAULT_NAMESPACE = "default"
_KINDS = '"LLMService", "InferenceRuntime"'
_YAML_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class Problem:
    """One thing wrong, said where: `file: LLMService ns/name: spec.scaling.max: ...`."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass(frozen=True)
class _Document:
    where: str
    body: Mapping[str, Any]


@dataclass
class Outcome:
    """What the operator would create, or everything that stops it."""

    objects: list[KubeObject] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    documents: int = 0

    def yaml(self) -> str:
        return "".join(dump_manifest(obj) for obj in self.objects)


def render_files(
    paths: Sequence[Path],
    vendors: VendorRegistry,
    *,
    gateway_image: str,
    gateway_replicas: int,
    gateway_defaults: GatewayDefaults | None = None,
    namespace: str = DEFAULT_NAMESPACE,
) -> Outcome:
    """Validate, plan and render every service in `paths` against the runtimes in `paths`."""
    outcome = Outcome()
    documents = _read_all(_expand(paths, outcome.problems), outcome.problems)
    outcome.documents = len(documents)
    runtimes: dict[str, KubeObject] = {}
    invalid_runtimes: dict[str, str] = {}
    services: dict[tuple[str, str], tuple[str, LLMService]] = {}
    for document in documents:
        kind = document.body.get("kind")
        if kind == "InferenceRuntime":
            name = _name(document.body)
            where = f"{document.where}: InferenceRuntime {name}"
            decoded = _decodes(parse_inferenceruntime, document.body, where, outcome.problems)
            if decoded is None:
                invalid_runtimes.setdefault(name, document.where)
                continue
            outcome.warnings += [
                Problem(where, f"warning: {text}") for text in ineffective_runtime_settings(decoded)
            ]
            if _unique(name, name, runtimes, where, outcome.problems):
                runtimes[name] = dict(document.body)
        elif kind == "LLMService":
            body = _with_namespace(document.body, namespace)
            key = (str(body["metadata"]["namespace"]), _name(body))
            where = f"{document.where}: LLMService {key[0]}/{key[1]}"
            service = _decodes(parse_llmservice, body, where, outcome.problems)
            if service is not None and _unique(key, key[1], services, where, outcome.problems):
                services[key] = (where, service)
        else:
            outcome.problems.append(
                Problem(document.where, f"kind: supported values: {_KINDS}, got {quote(kind)}")
            )
    planner = ServicePlanner(
        _ManifestReader(runtimes),
        vendors,
        PlanSettings(
            gateway_image, gateway_replicas, gateway_defaults=gateway_defaults or GatewayDefaults()
        ),
    )
    for where, service in services.values():
        runtime = None
        try:
            _check_pinned_runtime(service, invalid_runtimes)
            runtime = planner.resolve_runtime(service)
            rendered = render_serving(planner.plan(service))
        except NoctayaError as error:
            outcome.problems.append(Problem(where, f"{error.reason}: {error.message}"))
        else:
            outcome.objects += applied_objects(rendered)
        outcome.warnings += [
            Problem(where, f"warning: {text}")
            for text in [*ineffective_settings(service, runtime), *_unset_percent_target(service)]
        ]
    return outcome


def _unset_percent_target(service: LLMService) -> list[str]:
    """kvCacheUtil with the target left at queueDepth's default: valid, and most likely meant
    as requests, not as a tenth of one replica's cache."""
    scaling = service.spec.scaling
    if scaling.metric is not ScalingMetric.KV_CACHE_UTIL or "target" in scaling.model_fields_set:
        return []
    return [
        f"spec.scaling.target: left at queueDepth's default {scaling.target}, which for "
        f"kvCacheUtil asks for a backend replica per {scaling.target} % of one replica's KV "
        "cache in use; set the percent each replica should run at, such as 70"
    ]


def _check_pinned_runtime(service: LLMService, invalid: Mapping[str, str]) -> None:
    """A pinned runtime that is in the files but invalid is that, not "not found"."""
    selection = service.spec.runtime
    vendors = list(selection.selector.vendor or []) if selection.selector else []
    pinned = pinned_runtime_name(selection.name, vendors)
    if pinned is not None and pinned in invalid:
        raise NoctayaError(
            "RuntimeResolution",
            f"InferenceRuntime {quote(pinned)} in {invalid[pinned]} is invalid "
            "(its problems are listed with it), so no service can use it",
        )


def applied_objects(rendered: RenderedService) -> list[KubeObject]:
    """The rendered objects the operator writes, in the order it writes them."""
    ordered = (
        rendered.scaled_object,
        rendered.demand_secret,
        rendered.cache_pvc,
        rendered.prewarm_job,
        rendered.deployment,
        rendered.backend_service,
        *rendered.endpoint_access,
        rendered.gateway_deployment,
        rendered.gateway_service,
        rendered.gateway_pdb,
        rendered.aggregator,
        rendered.scaler_service,
    )
    return [obj for obj in ordered if obj is not None]


def _decodes(
    parse: Callable[[Mapping[str, Any]], _Resource],
    body: Mapping[str, Any],
    where: str,
    problems: list[Problem],
) -> _Resource | None:
    """The decoded resource, or None with each of its problems listed on its own line."""
    missing_name = [] if _name(body) else ["metadata.name: Required value"]
    try:
        resource = parse(body)
    except InvalidResource as invalid:
        problems += [Problem(where, line) for line in missing_name + invalid.problems]
        return None
    if missing_name:
        problems += [Problem(where, line) for line in missing_name]
        return None
    return resource


def _unique(
    key: Hashable, name: str, seen: Container[Hashable], where: str, problems: list[Problem]
) -> bool:
    """A second object of the same kind and name would overwrite the first on `kubectl apply`."""
    if key in seen:
        problems.append(Problem(where, f"metadata.name: Duplicate value {quote(name)}"))
        return False
    return True


def _name(body: Mapping[str, Any]) -> str:
    metadata = body.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return name if isinstance(name, str) else ""


def _with_namespace(body: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """The namespace the document names, else the one given (as `kubectl apply -n` does)."""
    metadata = body.get("metadata")
    metadata = dict(metadata) if isinstance(metadata, Mapping) else {}
    if not metadata.get("namespace"):
        metadata["namespace"] = namespace
    return {**body, "metadata": metadata}


def _expand(paths: Iterable[Path], problems: list[Problem]) -> list[Path]:
    """Files as given; a directory stands for its `*.yaml`/`*.yml` files, in name order."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix in _YAML_SUFFIXES)
            if not found:
                problems.append(Problem(str(path), "directory holds no .yaml or .yml files"))
            files += found
        else:
            files.append(path)
    return files


def _read_all(files: Iterable[Path], problems: list[Problem]) -> list[_Document]:
    """Each file's documents through the core's bounded reader; a file it refuses is one problem."""
    documents: list[_Document] = []
    for path in files:
        try:
            with path.open("rb") as file:
                bodies = read_documents(file, source=str(path))
        except OSError as error:
            problems.append(Problem(str(path), f"cannot read: {error}"))
            continue
        except ManifestYAMLError as error:
            problems.append(Problem(error.where, error.problem))
            continue
        for index, body in enumerate(bodies, start=1):
            where = str(path) if len(bodies) == 1 else f"{path} (document {index})"
            documents.append(_Document(where, body))
    return documents


class _ManifestReader:
    """A `Reader` over the runtimes given on the command line: the cluster the planner sees."""

    def __init__(self, runtimes: Mapping[str, KubeObject]) -> None:
        self._runtimes = dict(runtimes)

    def get(self, kind: ResourceKind, namespace: str, name: str) -> KubeObject | None:
        return self._runtimes.get(name) if kind == kinds.INFERENCE_RUNTIME else None

    def list(self, kind: ResourceKind, namespace: str, label_selector: str) -> list[KubeObject]:
        return list(self._runtimes.values()) if kind == kinds.INFERENCE_RUNTIME else []
