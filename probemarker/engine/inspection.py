"""The inspection: what the engine holds, read for `probemarker status`.

Stage: engine (read only). Input: the engine's tables (engine/table.py: its pods and
probes, and where to find them), the markers it runs, what the runner and the
dispatcher know of each probe now, and the hub's desired state of a pod. Output: a
`PodSeen` per pod, with a `ProbeSeen` per probe (engine/seen.py), taken only when
someone asks (`Engine.inspect`, for the status socket).

Invariants:
- nothing here is kept, reported or changed: reading the status never changes what
  the engine does next;
- one pod at a time, lazily: a pod's desired state is built when its turn comes and
  dropped by the caller before the next, so reading the status never holds every
  pod's at once; a filtered question reads only the pods it names;
- a probe of a marker that selects a pod but is not run (a container the pod lacks, a
  pod being deleted or finished) has a row too, saying why it waits (`waiting_of`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from probemarker.api.model import MarkerRef
from probemarker.decide.decide import ThresholdState
from probemarker.engine.seen import PodSeen, ProbeSeen, waiting_of
from probemarker.engine.table import PodEntry, ProbeEntry
from probemarker.identity.probes import ProbeKey
from probemarker.kube.watch.cache import ObjectKey
from probemarker.match.match import selector_matches
from probemarker.probe.runner import ProbeRunner, action_kind
from probemarker.schedule.dispatcher import Dispatcher
from probemarker.watch.markers import MarkerTable
from probemarker.watch.pods import PodUID, PodView
from probemarker.write.desired import DesiredPod

__all__ = ["Inspection"]


@dataclass(frozen=True, slots=True)
class Inspection:
    """The engine's tables as the inspection reads them (the engine's own, never
    copied): `desired` is the hub's desired state of a pod, built without reporting."""

    pods: Mapping[PodUID, PodEntry]
    uids: Mapping[ObjectKey, PodUID]
    by_namespace: Mapping[str, set[PodUID]]
    probes: Mapping[ProbeKey, ProbeEntry]
    markers: MarkerTable
    runner: ProbeRunner
    dispatcher: Dispatcher[ProbeKey]
    wall: Callable[[], float]
    desired: Callable[[PodEntry, PodView], DesiredPod]

    def pods_seen(
        self,
        *,
        pod: tuple[str, str] | None = None,
        marker: MarkerRef | None = None,
        namespace: str | None = None,
    ) -> Iterator[PodSeen]:
        """Every pod with a probe (or a marker that selects it and cannot probe it: a
        container it lacks, a pod terminating), by namespace/name; only `pod`
        (namespace, name), only `marker`'s probes, only `namespace`'s pods when given.
        Read only when asked: nothing here is kept or reported.

        One pod at a time, lazily: a pod's desired state (every value its probes render,
        up to the 256 KiB of annotations a pod may hold) is built when its turn comes
        and dropped by the caller before the next, so reading the status never holds
        every pod's at once. A filtered question reads only the pods it names: its
        namespace's (`marker` is in its pods' namespace), or the one pod."""
        if pod is not None:
            uid = self.uids.get(ObjectKey(*pod))
            uids: Iterable[PodUID] = () if uid is None else (uid,)
        elif marker is not None or namespace is not None:
            within = marker.namespace if marker is not None else namespace
            uids = self.by_namespace.get(within or "", ())
        else:
            uids = self.pods
        entries = sorted(
            (entry for uid in uids if (entry := self.pods.get(uid)) is not None),
            key=lambda entry: (entry.view.namespace, entry.view.name),
        )
        now = self.wall()
        for entry in entries:
            view = entry.view
            if namespace is not None and view.namespace != namespace:
                continue
            rows = [
                self._seen(key, probe, view, now)
                for key in sorted(entry.probes)
                if (marker is None or key.marker == marker)
                and (probe := self.probes.get(key)) is not None
            ]
            rows += self._not_probed(view, marker, now)
            if rows:
                # Not bound to a name here: this frame keeps no pod's desired state
                # while the next pod's is built.
                yield PodSeen(view, tuple(rows), self.desired(entry, view) if view.active else None)

    def _seen(self, key: ProbeKey, probe: ProbeEntry, view: PodView, now: float) -> ProbeSeen:
        spec = probe.spec
        facts = view.containers.get(key.container)
        held = facts is not None and self.runner.busy(spec.handler, key, facts.container_id)
        waiting, detail = waiting_of(
            view, key.container, facts, spec.timing, now=now, held=held, blocked=probe.blocked
        )
        return ProbeSeen(
            key=key,
            spec=spec,
            kind=action_kind(spec.handler),
            thresholds=probe.thresholds,
            last=probe.last,
            due=self.dispatcher.due(key),
            running=self.dispatcher.is_running(key),
            waiting=waiting,
            detail=detail,
            unknown_runs=probe.unknown_streak,
        )

    def _not_probed(self, view: PodView, marker: MarkerRef | None, now: float) -> list[ProbeSeen]:
        """The probes of markers that select `view` but are not run: a container the pod
        lacks, or a pod being deleted or finished (`match_pod` leaves both out)."""
        rows = []
        for found in sorted(self.markers.running(view.namespace), key=lambda m: str(m.ref)):
            if marker is not None and found.ref != marker:
                continue
            if not selector_matches(found.selector, view.labels):
                continue
            for spec in found.probes:
                facts = view.containers.get(spec.container_name)
                if view.active and facts is not None:
                    continue  # it runs (a row of its own)
                key = ProbeKey(view.uid, spec.container_name, found.ref, spec.name)
                waiting, detail = waiting_of(view, spec.container_name, facts, spec.timing, now=now)
                rows.append(
                    ProbeSeen(
                        key=key,
                        spec=spec,
                        kind=action_kind(spec.handler),
                        thresholds=ThresholdState(),
                        waiting=waiting,
                        detail=detail,
                    )
                )
        return rows
