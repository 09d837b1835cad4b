"""A probe's identity on a pod, shared by every stage from matching on.

Stage: values (pure). A probe's identity is (pod UID, container name, marker
namespace/name, probe name), docs/engine.md: results are never keyed by container ID,
and one marker's probes never collide with another's. `OwnerRef` is the part of it the
pod's ownership record names (the marker is always in the pod's namespace).
"""

from __future__ import annotations

from dataclasses import dataclass

from probemarker.api.model import MarkerRef
from probemarker.watch.pods import PodUID

__all__ = ["OwnerRef", "ProbeKey"]


@dataclass(frozen=True, slots=True, order=True)
class OwnerRef:
    """A marker's probe, as the ownership record names it: `marker#probe`.

    Marker names are DNS subdomains and probe names may not contain `#`, so the text
    form is unambiguous (it is also how Kruise names a marker's probes).
    """

    marker: str
    probe: str

    def __str__(self) -> str:
        return f"{self.marker}#{self.probe}"

    @classmethod
    def parse(cls, text: str) -> OwnerRef:
        marker, sep, probe = text.partition("#")
        if not sep or not marker or not probe:
            raise ValueError(f"not an owner reference (marker#probe): {text!r}")
        return cls(marker, probe)


@dataclass(frozen=True, slots=True, order=True)
class ProbeKey:
    """One probe on one container of one pod, run for one marker."""

    pod_uid: PodUID
    container: str
    marker: MarkerRef
    probe: str

    @property
    def owner(self) -> OwnerRef:
        return OwnerRef(self.marker.name, self.probe)

    def __str__(self) -> str:
        return f"{self.marker}#{self.probe}@{self.pod_uid}/{self.container}"
