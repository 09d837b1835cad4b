"""One Prometheus metric family, in the few shapes /metrics builds.

Stage: observation (pure), under metrics.py and the modules of its families. Input:
a name (without the `probemarker_` prefix, `P`), its help text and its values.
Output: a family of prometheus_client: a counter by labels, its series sorted
(`counter`), a counter without labels (`one`, `ones` for several), a gauge
(`gauge`), and a histogram bucket's bound as the exposition writes it (`le`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

__all__ = ["P", "counter", "gauge", "le", "one", "ones"]

P = "probemarker_"


def le(bound: float) -> str:
    """A bucket's upper bound as the exposition writes it: `0.005`, `1.0`, `+Inf`."""
    return "+Inf" if math.isinf(bound) else repr(bound)


def counter(
    name: str, doc: str, labels: Sequence[str], values: Iterable[tuple[Sequence[str], float]]
) -> CounterMetricFamily:
    family = CounterMetricFamily(P + name, doc, labels=labels)
    for label_values, value in sorted(values):
        family.add_metric(label_values, value)
    return family


def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(P + name, doc, value=value)


def one(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(P + name, doc, value=value)


def ones(*rows: tuple[str, str, float]) -> list[Metric]:
    """A counter without labels per (name, doc, value)."""
    return [one(name, doc, value) for name, doc, value in rows]
