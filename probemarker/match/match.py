"""Match: which probes should run on a pod, and what changed since last time.

Stage: watch -> **match** -> schedule (pure). Input: a `PodView` and the valid
markers of its namespace. Output: the probes that should run, keyed by `ProbeKey`
(pod UID, container, marker, probe), and the difference from the previous set
(start / change / stop).

A probe runs for (pod, container, marker, probe) when (docs/engine.md): the marker is in the
pod's namespace, its selector matches the pod's current labels, the probe's container
exists in the pod (a regular container or a restartable init container), and the pod
is neither terminal nor being deleted. Whether the container is running is not a
matching question: the decide stage's gate handles it, as the kubelet's worker does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from probemarker.api.model import LabelSelector, Marker, ProbeSpec, SelectorRequirement
from probemarker.identity.probes import ProbeKey
from probemarker.watch.pods import PodView


def requirement_matches(req: SelectorRequirement, labels: Mapping[str, str]) -> bool:
    """One matchExpressions entry, as apimachinery's labels.Requirement.Matches."""
    if req.operator == "Exists":
        return req.key in labels
    if req.operator == "DoesNotExist":
        return req.key not in labels
    if req.operator == "In":
        return req.key in labels and labels[req.key] in req.values
    # NotIn: a pod without the key matches (Kubernetes semantics).
    return req.key not in labels or labels[req.key] not in req.values


def selector_matches(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    """matchLabels and matchExpressions, ANDed. (An empty selector never gets here:
    validation refuses it.)"""
    for key, value in selector.match_labels.items():
        if labels.get(key) != value:
            return False
    return all(requirement_matches(req, labels) for req in selector.match_expressions)


def match_pod(pod: PodView, markers: Iterable[Marker]) -> dict[ProbeKey, ProbeSpec]:
    """The probes that should run on `pod` now (empty for a terminal or deleting pod)."""
    if not pod.active or not pod.uid:
        return {}
    found: dict[ProbeKey, ProbeSpec] = {}
    for marker in markers:
        if marker.ref.namespace != pod.namespace:
            continue
        if not selector_matches(marker.selector, pod.labels):
            continue
        for probe in marker.probes:
            if probe.container_name in pod.containers:
                key = ProbeKey(pod.uid, probe.container_name, marker.ref, probe.name)
                found[key] = probe
    return found


@dataclass(frozen=True, slots=True)
class MatchDiff:
    """How the probes of one pod change: new ones, changed specs, and gone ones."""

    start: tuple[ProbeKey, ...] = ()
    change: tuple[ProbeKey, ...] = ()
    stop: tuple[ProbeKey, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.start or self.change or self.stop)


def diff_matches(old: Mapping[ProbeKey, ProbeSpec], new: Mapping[ProbeKey, ProbeSpec]) -> MatchDiff:
    """Keys sorted, so the engine acts in a deterministic order."""
    return MatchDiff(
        start=tuple(sorted(k for k in new if k not in old)),
        change=tuple(sorted(k for k in new if k in old and old[k] != new[k])),
        stop=tuple(sorted(k for k in old if k not in new)),
    )
