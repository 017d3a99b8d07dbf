"""The metrics page, written from the registries the processes serve.

The operator, the gateway and the aggregator each keep a private registry; what `/metrics`
serves is exactly what those registries collect, so the page is generated from them. The
noctaya.k8s package may not import the gateway, so the caller (`hack/gen-metrics-docs.py`)
hands each process's families in (`prometheus_families` reads the operator's).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from noctaya.k8s.docs.markdown import cell, code, table
from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

# The series prometheus_client exposes for a metric that has no child (no sample) yet.
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
}


@dataclass(frozen=True)
class Family:
    """One metric as the page lists it (by `name`, without a counter's `_total`): the series it
    is served as, its type, its label names (declared, whether or not a labelled series exists
    yet) and its help text."""

    name: str
    series: tuple[str, ...]
    kind: str
    labels: tuple[str, ...]
    documentation: str


@dataclass(frozen=True)
class MetricSource:
    """One process's metrics, under its name."""

    process: str
    families: Sequence[Family]


def metrics_page(intro: str, sources: Sequence[MetricSource]) -> str:
    text = intro
    for source in sources:
        rows = (
            (
                "<br>".join(code(name) for name in family.series),
                family.kind,
                ", ".join(code(name) for name in family.labels),
                cell(family.documentation),
            )
            for family in sorted(source.families, key=lambda family: family.name)
        )
        text += f"\n## {source.process}\n\n" + table(("Series", "Type", "Labels", "Meaning"), rows)
    return text


def prometheus_families(registry: CollectorRegistry, holder: object) -> list[Family]:
    """The families a prometheus_client registry collects; `holder` is the object holding its
    metrics, which knows their declared label names."""
    labels = _label_names(holder)
    families = []
    for family in registry.collect():
        series = list(dict.fromkeys(sample.name for sample in family.samples)) or [
            family.name + suffix for suffix in _SUFFIXES.get(family.type, ("",))
        ]
        names = labels.get(family.name, _sample_labels(family.samples))
        families.append(
            Family(family.name, tuple(series), family.type, names, family.documentation)
        )
    return families


def _label_names(holder: object) -> dict[str, tuple[str, ...]]:
    """Declared label names of the holder's metrics, children created or not.

    prometheus_client keeps them only in `_labelnames`; a collected family shows labels only
    for children that exist.
    """
    return {
        metric._name: tuple(metric._labelnames)
        for metric in vars(holder).values()
        if isinstance(metric, MetricWrapperBase)
    }


def _sample_labels(samples: Iterable[object]) -> tuple[str, ...]:
    names: set[str] = set()
    for sample in samples:
        names.update(getattr(sample, "labels", {}))
    return tuple(sorted(names - {"le"}))
