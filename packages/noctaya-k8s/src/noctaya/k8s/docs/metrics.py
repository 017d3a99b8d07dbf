"""The metrics page, written from the Prometheus registries the processes serve.

The operator, the gateway and the aggregator each keep a private registry; what `/metrics`
serves is exactly what those registries collect, so the page is generated from them. The
noctaya.k8s package may not import the gateway, so the caller (`hack/gen-metrics-docs.py`)
hands each process's registry in.
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
class MetricSource:
    """One process's series: its name, its registry, and the object holding its metrics."""

    process: str
    registry: CollectorRegistry
    holder: object


def metrics_page(intro: str, sources: Sequence[MetricSource]) -> str:
    text = intro
    for source in sources:
        text += f"\n## {source.process}\n\n" + table(
            ("Series", "Type", "Labels", "Meaning"), _rows(source)
        )
    return text


def _rows(source: MetricSource) -> Iterable[tuple[str, str, str, str]]:
    labels = _label_names(source.holder)
    for family in sorted(source.registry.collect(), key=lambda family: family.name):
        series = list(dict.fromkeys(sample.name for sample in family.samples)) or [
            family.name + suffix for suffix in _SUFFIXES.get(family.type, ("",))
        ]
        label_names = labels.get(family.name, _sample_labels(family.samples))
        yield (
            "<br>".join(code(name) for name in series),
            family.type,
            ", ".join(code(name) for name in label_names),
            cell(family.documentation),
        )


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
