"""Counters, gauges and histograms, with labels, and their Prometheus text exposition (0.0.4).

The gateway and the aggregator serve a dozen series on a private registry. prometheus_client
would do that with 48 modules (an HTTP server, email parsing, gzip, WSGI...): 2.5 MiB of every
gateway's resident memory, a GiB per thousand idle services. These classes keep its interface
for what the processes use, and its output, numbers spelled alike (`_number`), but for the
`_created` series, left out: in the text format each would be one more series per counter and
histogram for Prometheus to store.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Self, cast

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The classic text format, which every Prometheus version scrapes."""

Labels = tuple[str, ...]


class Registry:
    """The series one process serves, in the order they were made."""

    def __init__(self) -> None:
        self.metrics: list[Metric] = []

    def render(self) -> bytes:
        return "".join(line + "\n" for metric in self.metrics for line in metric.lines()).encode()


class Metric:
    """One series, or, with label names, the family of its labelled series (`labels`)."""

    kind = ""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        registry: Registry | None,
        values: Labels = (),
    ) -> None:
        self.name = self._named(name)
        self.documentation = documentation
        self.labelnames: Labels = tuple(labelnames)
        self._values = values
        self._children: dict[Labels, Metric] = {}
        if registry is not None:
            registry.metrics.append(self)

    def labels(self, *values: str, **named: str) -> Self:
        """The series of these label values (made on first use, then kept)."""
        key = tuple(values) if values else tuple(named[name] for name in self.labelnames)
        if len(key) != len(self.labelnames):
            raise ValueError(f"{self.name} takes labels {self.labelnames}, got {key}")
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self._child(key)
        return cast(Self, child)

    @staticmethod
    def _named(name: str) -> str:
        """The series' name as served."""
        return name

    def _child(self, values: Labels) -> Metric:
        return type(self)(
            self.name, self.documentation, self.labelnames, registry=None, values=values
        )

    def lines(self) -> Iterator[str]:
        yield f"# HELP {self.name} {_escape(self.documentation, quote=False)}"
        yield f"# TYPE {self.name} {self.kind}"
        for series in self._children.values() if self.labelnames else (self,):
            yield from series.samples()

    def samples(self) -> Iterator[str]:
        raise NotImplementedError

    def _sample(self, name: str, value: float, extra: tuple[tuple[str, str], ...] = ()) -> str:
        pairs = (*zip(self.labelnames, self._values, strict=True), *extra)
        labels = ",".join(f'{key}="{_escape(value)}"' for key, value in pairs)
        return f"{name}{{{labels}}} {_number(value)}" if labels else f"{name} {_number(value)}"


class Counter(Metric):
    """Served as `<name>_total`, whether the name is given with the suffix or without."""

    kind = "counter"
    value = 0.0

    @staticmethod
    def _named(name: str) -> str:
        return name.removesuffix("_total") + "_total"

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("a counter only goes up")
        self.value += amount

    def samples(self) -> Iterator[str]:
        yield self._sample(self.name, self.value)


class Gauge(Metric):
    kind = "gauge"
    value = 0.0
    _function: Callable[[], float] | None = None

    def set(self, value: float) -> None:
        self.value = float(value)

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount

    def dec(self, amount: float = 1.0) -> None:
        self.value -= amount

    def set_function(self, function: Callable[[], float]) -> None:
        """Read the value from `function` at each scrape."""
        self._function = function

    def samples(self) -> Iterator[str]:
        value = self.value if self._function is None else float(self._function())
        yield self._sample(self.name, value)


class Histogram(Metric):
    kind = "histogram"

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Sequence[float],
        registry: Registry | None,
        values: Labels = (),
    ) -> None:
        super().__init__(name, documentation, labelnames, registry=registry, values=values)
        self.bounds = (*sorted(float(bound) for bound in buckets), math.inf)
        self.counts = [0] * len(self.bounds)
        self.sum = 0.0

    def _child(self, values: Labels) -> Metric:
        return Histogram(
            self.name,
            self.documentation,
            self.labelnames,
            buckets=self.bounds[:-1],
            registry=None,
            values=values,
        )

    def observe(self, value: float) -> None:
        self.sum += value
        for index, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[index] += 1
                return

    def samples(self) -> Iterator[str]:
        total = 0
        for bound, count in zip(self.bounds, self.counts, strict=True):
            total += count
            yield self._sample(f"{self.name}_bucket", total, (("le", _number(bound)),))
        yield self._sample(f"{self.name}_count", total)
        yield self._sample(f"{self.name}_sum", self.sum)


def _number(value: float) -> str:
    """`1.0`, `+Inf`, `2.5e+06` (exponents from 1e+06 on, sooner than Python's `repr`), as
    prometheus_client spells them: an `le` label spelled otherwise would be another series."""
    value = float(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


def _escape(text: str, *, quote: bool = True) -> str:
    text = text.replace("\\", r"\\").replace("\n", r"\n")
    return text.replace('"', r"\"") if quote else text
