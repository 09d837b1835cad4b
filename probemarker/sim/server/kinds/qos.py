"""A pod's QoS class, as k8s.io/kubernetes pkg/apis/core/v1/helper/qos GetPodQOS computes it.

Only cpu and memory count.  No requests or limits anywhere: BestEffort.  Every
container (init ones included) limiting both cpu and memory, with requests
(when given) equal to the limits: Guaranteed.  Anything else: Burstable.
Quantities are compared by value (`1` == `1000m`, `1Gi` == `1024Mi`).
Pure; the API server sets it on pod create (`defaults`), and the kubelet's pod status
(probemarker.sim.kubelet.podstatus) reports it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = ["parse_quantity", "pod_qos_class"]

_COMPUTE = ("cpu", "memory")
_SUFFIXES = {
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[a-zA-Z]*)$")


def parse_quantity(text: Any) -> Decimal | None:
    """The value of a resource.Quantity string (None if it is not one)."""
    match = _QUANTITY.match(str(text).strip())
    if match is None:
        return None
    number, suffix = match.groups()
    try:
        if suffix[:1] in ("e", "E") and len(suffix) > 1:
            return Decimal(number + suffix)
        if suffix not in _SUFFIXES:
            return None
        return Decimal(number) * _SUFFIXES[suffix]
    except InvalidOperation:
        return None


def _compute(resources: Mapping[str, Any] | None) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    for name in _COMPUTE:
        value = parse_quantity((resources or {}).get(name)) if (resources or {}).get(name) else None
        if value is not None and value != 0:
            out[name] = value
    return out


def pod_qos_class(pod: Mapping[str, Any]) -> str:
    """BestEffort, Burstable or Guaranteed for `pod` (see the module docstring)."""
    spec = pod.get("spec") or {}
    containers = list(spec.get("initContainers") or []) + list(spec.get("containers") or [])
    any_set, guaranteed = False, True
    for container in containers:
        resources = container.get("resources") or {}
        requests, limits = _compute(resources.get("requests")), _compute(resources.get("limits"))
        any_set = any_set or bool(requests) or bool(limits)
        limited = set(limits) == set(_COMPUTE)
        if not limited or any(requests.get(n, limits[n]) != limits[n] for n in _COMPUTE):
            guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
