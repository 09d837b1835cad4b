"""Marker intake: PodProbeMarker objects from the watch, validated by our own rules.

Stage: watch -> match (the marker side). Input: a marker projection from the
informer. Output: a `Marker`, or an `InvalidMarker` naming every problem; and the
`MarkerTable` of every namespace's markers, which the engine matches pods against.
A marker that got past the API server without the CRD's rules (an older CRD,
Kruise's CRD, rules turned off) is reported by the engine with a Warning event and
one log line (docs/development.md: the same rules in three places); it never crashes the daemon,
and an invalid edit never acts as a deletion (`MarkerTable`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from probemarker.api import rules
from probemarker.api.fields import FieldError
from probemarker.api.model import Marker, MarkerRef
from probemarker.api.parse import InvalidMarker, marker_ref_text, parse_marker
from probemarker.kit.clock import Clock
from probemarker.kit.projection import projector
from probemarker.kube.connect.resources import Resource

KIND = "PodProbeMarker"


def marker_resource(group: str = rules.GROUP) -> Resource:
    """Ours (probemarker.io) or, opted in, Kruise's (apps.kruise.io); same spec."""
    return Resource(group, rules.VERSION, rules.PLURAL)


# What the daemon keeps of a marker: identity, generation, spec.
marker_projection = projector(("apiVersion", "kind", "metadata.generation", "spec"))


def read_marker(doc: Mapping[str, Any], *, api_version: str = rules.API_VERSION) -> Marker:
    """The validated marker, or `InvalidMarker`. List items may lack apiVersion and
    kind (core lists omit them), so the watched resource's are filled in."""
    full = {"apiVersion": api_version, "kind": KIND, **doc}
    try:
        return parse_marker(full)
    except InvalidMarker:
        raise
    except (KeyError, TypeError, ValueError) as err:  # a shape validation did not foresee
        problem = FieldError(
            "spec", f"cannot be read ({err!r}); check it with `probemarker validate`"
        )
        raise InvalidMarker(marker_ref_text(full), (problem,)) from err


@dataclass(frozen=True, slots=True)
class MarkerChange:
    """What one `MarkerTable.update` did, for the engine to act on and report."""

    runs_changed: bool  # the spec the namespace's pods run changed (or went away)
    frozen_changed: bool  # whether the marker's writes are frozen changed
    invalid: InvalidMarker | None = None  # newly reported as invalid (once per content)
    kept_generation: int | None = None  # with `invalid`: the valid spec still running
    fixed: bool = False  # valid again after being reported invalid


class MarkerTable:
    """The markers of every namespace: the valid spec each runs, and the ones whose
    writes are *frozen*, kept as they are (docs/engine.md):

    - an invalid update keeps the last valid spec running (`runs_changed` False);
    - a marker only ever seen invalid runs nothing, and is frozen: what its probes
      wrote is neither changed nor removed until it is fixed or deleted;
    - a deleted marker is frozen for `cleanup_delay` seconds of `clock`, so a marker
      re-created meanwhile (to change its immutable selector) takes over without a
      gap; after that its writes are cleaned up.
    """

    def __init__(self, *, clock: Clock, cleanup_delay: float, api_version: str) -> None:
        self._clock = clock
        self._delay = cleanup_delay
        self._api_version = api_version
        self._running: dict[str, dict[MarkerRef, Marker]] = {}
        self._invalid: dict[MarkerRef, Any] = {}  # the spec reported as invalid
        self._deleted: dict[MarkerRef, float] = {}  # deleted -> when it thaws

    def __len__(self) -> int:
        return sum(len(m) for m in self._running.values())

    def running(self, namespace: str) -> Iterable[Marker]:
        """The valid spec of every marker of `namespace` that runs."""
        return self._running.get(namespace, {}).values()

    def update(self, ref: MarkerRef, obj: Mapping[str, Any] | None, uid: str = "") -> MarkerChange:
        """The marker `ref` is now `obj` (None: deleted)."""
        markers = self._running.setdefault(ref.namespace, {})
        old = markers.get(ref)
        frozen_before = self._is_frozen(ref)
        invalid: InvalidMarker | None = None
        fixed = False
        if obj is None:
            markers.pop(ref, None)
            if old is not None or self._invalid.pop(ref, None) is not None:
                self._deleted[ref] = self._clock.now() + self._delay
        else:
            self._deleted.pop(ref, None)
            try:
                markers[ref] = read_marker(obj, api_version=self._api_version)
            except InvalidMarker as err:
                spec = obj.get("spec")
                # Once per content, not per resync (a marker with no spec at all too).
                if ref not in self._invalid or self._invalid[ref] != spec:
                    self._invalid[ref] = spec
                    invalid = err
            else:
                fixed = self._invalid.pop(ref, None) is not None
        return MarkerChange(
            runs_changed=old != markers.get(ref),
            frozen_changed=frozen_before != self._is_frozen(ref),
            invalid=invalid,
            kept_generation=None if invalid is None or old is None else old.generation,
            fixed=fixed,
        )

    def frozen(self, namespace: str) -> dict[str, float | None]:
        """The frozen markers of `namespace` by name, each with when it thaws
        (None: when it is fixed or deleted)."""
        frozen: dict[str, float | None] = {}
        for ref in [*self._invalid, *self._deleted]:
            if self._is_frozen(ref) and ref.namespace == namespace:  # prunes every thawed one
                frozen[ref.name] = self._deleted.get(ref)
        return frozen

    def _is_frozen(self, ref: MarkerRef) -> bool:
        if ref in self._invalid and ref not in self._running.get(ref.namespace, {}):
            return True
        end = self._deleted.get(ref)
        if end is not None and end <= self._clock.now():
            del self._deleted[ref]  # the delay is over: clean up
            return False
        return end is not None
