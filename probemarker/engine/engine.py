"""The engine: the probe table between the watches and the writer.

Stage: watch -> **match -> schedule -> probe -> decide** -> write. Input: the
informers' stores (read whenever a change is announced, so the engine always acts on
the newest state of an object), and the dispatcher's calls to run a probe. Output:
pod UIDs whose desired state may have changed (`mark`), the desired state itself on
the writer's request (`plan`), and events/log lines on transitions (`Reporter`).

Invariants:
- a probe is identified by `ProbeKey` (pod UID, container, marker, probe); deleting a
  marker or a probe stops exactly its keys, and a pod's probes are recomputed on every
  change of the pod or of a marker in its namespace (`match.match_pod`);
- a new probe is seeded from the pod's ownership record and conditions, so a
  restarted daemon publishes no new state until a threshold is met again (a new
  message of the same state waits in the writer for its refresh interval);
- one run per probe at a time; its next run is scheduled when it ends, on its grid
  (`schedule.timing.next_due`): a slot that passed is skipped and counted, not drifted;
- one copy of a command in a container at a time, whatever probe runs it: runs of
  one command on one container (two probes with the same argv) take turns (the
  runner's `turn`), and a period that comes due while a previous run of the same
  command may still run (an exec stream held past its deadline, `probe.holds`) is
  skipped and counted (`periods_skipped`), producing no outcome. From the first
  period so skipped, the pod's record says so (`plan`, in the entry of every probe
  that runs it; a command that ends before a run of it is due costs no write, issue
  43), and a probe started on a pod whose record holds its command, in any probe's
  entry (a probe renamed while the daemon was down), is held likewise (a restarted
  daemon, issue 30; issue 40);
- a result of a run started with a command that has since changed is dropped;
  Unknown is never counted or written (docs/engine.md);
- a terminating or finished pod is not probed and gets no plan (`plan` is None): it
  keeps what it shows, a draining primary still looks like one (docs/engine.md);
- a marker edited into an invalid spec keeps running its last valid one; a marker
  invalid since the daemon first saw it runs nothing, and what its probes wrote is
  held (neither changed nor removed) until it is fixed or deleted. Only deletion
  cleans up, and only `cleanup_delay` seconds after it, so a marker deleted and
  re-created (the way to change its selector) takes its keys back without a gap;
- nothing here does I/O but the probe handlers (through the runner) and the sink.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any

import structlog

from probemarker.api import rules
from probemarker.api.model import MarkerRef, ProbeSpec
from probemarker.decide.decide import Gate, gate, observe, result_of, step
from probemarker.engine.dials import EngineSettings, EngineStats
from probemarker.engine.inspection import Inspection
from probemarker.engine.report import EventSink, Reporter
from probemarker.engine.seen import LastRun, PodSeen
from probemarker.engine.table import PodEntry, ProbeEntry
from probemarker.identity.commands import HeldCommand
from probemarker.identity.probes import OwnerRef, ProbeKey
from probemarker.kit.clock import Clock
from probemarker.kube.watch.cache import Entry, ObjectKey
from probemarker.match.match import diff_matches, match_pod
from probemarker.probe.handler import probe_target
from probemarker.probe.outcome import Outcome, Result
from probemarker.probe.ports import unresolved_port
from probemarker.probe.runner import ProbeRunner, action_kind
from probemarker.schedule.dispatcher import Dispatcher
from probemarker.schedule.timing import first_due, next_due
from probemarker.watch.markers import MarkerTable
from probemarker.watch.pods import ContainerFacts, PodUID, PodView, pod_view
from probemarker.write.desired import Decided, DesiredPod, InvalidValue, desired_state
from probemarker.write.ownership import OWNED_KEY, parse_record

log = structlog.get_logger("probemarker.engine")

Raw = dict[str, Any]


class Engine:
    """See the module docstring. Feed it with `sync_marker`/`sync_pod`; run its
    `dispatcher`; give `lookup` and `plan` to the writer."""

    def __init__(
        self,
        *,
        runner: ProbeRunner,
        sink: EventSink,
        mark: Callable[[PodUID], None],
        clock: Clock,
        wall: Callable[[], float],
        settings: EngineSettings | None = None,
        api_version: str = rules.API_VERSION,
    ) -> None:
        self.settings = settings or EngineSettings()
        self._runner = runner
        self._report = Reporter(sink)
        self._mark = mark
        self._clock = clock
        self._wall = wall
        self._api_version = api_version
        self._step = self.settings.phase_step
        self._markers = MarkerTable(
            clock=clock, cleanup_delay=self.settings.cleanup_delay, api_version=api_version
        )
        self._pods: dict[PodUID, PodEntry] = {}
        self._uids: dict[ObjectKey, PodUID] = {}
        self._by_namespace: dict[str, set[PodUID]] = {}
        self._probes: dict[ProbeKey, ProbeEntry] = {}
        self.stats = EngineStats()
        self.dispatcher: Dispatcher[ProbeKey] = Dispatcher(
            run=self._run,
            clock=clock,
            max_concurrent=self.settings.max_concurrent,
            tick=self.settings.tick,
            late_after=self.settings.late_after,
            # The namespaces share the slots (issue 40): the marker's is the pod's.
            flow=lambda key: key.marker.namespace,
        )
        self._inspection = Inspection(
            pods=self._pods,
            uids=self._uids,
            by_namespace=self._by_namespace,
            probes=self._probes,
            markers=self._markers,
            runner=runner,
            dispatcher=self.dispatcher,
            wall=wall,
            desired=self._desired,
        )

    def __repr__(self) -> str:
        return (
            f"Engine(markers={len(self._markers)}, pods={len(self._pods)}, "
            f"probes={len(self._probes)})"
        )

    @property
    def probe_count(self) -> int:
        return len(self._probes)

    @property
    def namespaces(self) -> frozenset[str]:
        """The namespaces with pods on the node: the tenants of its shared budgets."""
        return frozenset(ns for ns, uids in self._by_namespace.items() if uids)

    # -- markers -------------------------------------------------------------------------

    def sync_marker(self, key: ObjectKey, entry: Entry[Raw] | None) -> None:
        """The marker at `key` is now `entry` (None: deleted); rematch its namespace."""
        ref = MarkerRef(key.namespace, key.name)
        change = self._markers.update(ref, None if entry is None else entry.obj)
        if change.invalid is not None and entry is not None:
            self._report.invalid_marker(
                ref, entry.uid, self._api_version, str(change.invalid), kept=change.kept_generation
            )
        if change.fixed:
            log.info("marker.fixed", marker=str(ref))
        if change.runs_changed or change.frozen_changed:
            for uid in sorted(self._by_namespace.get(key.namespace, ())):
                self._rematch(self._pods[uid], force_mark=change.frozen_changed)

    # -- pods ----------------------------------------------------------------------------

    def sync_pod(self, key: ObjectKey, entry: Entry[Raw] | None) -> None:
        """The pod at `key` is now `entry` (None: deleted)."""
        known = self._uids.get(key)
        if known is not None and (entry is None or entry.uid != known):
            self._drop_pod(known)
        if entry is None:
            return
        view = pod_view(entry.obj)
        if not view.uid:
            log.warning("pod.malformed", pod=str(key), problem="no metadata.uid")
            return
        pod = self._pods.get(view.uid)
        if pod is None:
            pod = PodEntry(key, view, entry.resource_version)
            self._pods[view.uid] = pod
            self._uids[key] = view.uid
            self._by_namespace.setdefault(view.namespace, set()).add(view.uid)
        else:
            pod.view, pod.resource_version = view, entry.resource_version
        for probe_key in pod.probes:
            facts = view.containers.get(probe_key.container)
            probe = self._probes.get(probe_key)
            if probe is not None and facts is not None:
                probe.thresholds = observe(probe.thresholds, facts)
        self._rematch(pod)
        self._mark(view.uid)  # our keys may have been changed by someone else

    def _drop_pod(self, uid: PodUID) -> None:
        pod = self._pods.pop(uid, None)
        if pod is None:
            return
        self._uids.pop(pod.key, None)
        uids = self._by_namespace.get(pod.view.namespace, set())
        uids.discard(uid)
        if not uids:
            self._by_namespace.pop(pod.view.namespace, None)
            self.dispatcher.forget(pod.view.namespace)
        for key in pod.probes:
            self._probes.pop(key, None)
            self.dispatcher.cancel(key)
        self._mark(uid)  # the writer's flush finds no pod and drops what it kept of it

    def _rematch(self, pod: PodEntry, *, force_mark: bool = False) -> None:
        new = match_pod(pod.view, self._markers.running(pod.view.namespace))
        diff = diff_matches(pod.probes, new)
        if not diff:
            if force_mark:
                self._mark(pod.view.uid)  # what is held may have changed
            return
        now = self._clock.now()
        for key in diff.stop:
            self._probes.pop(key, None)
            self.dispatcher.cancel(key)
        for key in diff.change:
            probe = self._probes[key]
            old_period = probe.spec.timing.period_seconds
            probe.respec(new[key])
            period = probe.spec.timing.period_seconds
            due = self.dispatcher.due(key)
            if period != old_period and due is not None:
                # A new period applies from the next run: at the sooner of the old slot
                # and the first slot of the new grid.
                self.dispatcher.schedule(
                    key, min(due, first_due(str(key), period, now, self._step))
                )
        record = parse_record(pod.view.annotations.value(OWNED_KEY), pod_uid=pod.view.uid)[0]
        # Commands that may still run, whichever probe's entry names them: a hold is the
        # command's in its container, so a probe renamed meanwhile is held all the same.
        recorded = sorted({o.held for o in record.values() if o.held is not None}, key=str)
        for key in diff.start:
            spec = new[key]
            facts = pod.view.containers.get(key.container)
            if facts is not None:
                for held in recorded:  # its command may still run in the container
                    self._runner.seed(spec.handler, key, held, facts.container_id)
            self._probes[key] = ProbeEntry.seeded(spec, record.get(key.owner), pod.view, facts)
            period = spec.timing.period_seconds
            self.dispatcher.schedule(key, first_due(str(key), period, now, self._step))
        pod.probes = new
        self._mark(pod.view.uid)

    # -- running one probe ---------------------------------------------------------------

    async def _run(self, key: ProbeKey, due: float) -> None:
        """The dispatcher's callback: gate, run, decide, then book the next slot."""
        try:
            probe, pod = self._probes.get(key), self._pods.get(key.pod_uid)
            if probe is None or pod is None:
                return
            handler = probe.spec.handler
            facts = pod.view.containers.get(key.container)
            passage = gate(facts, probe.spec.timing, now=self._wall())
            if passage is Gate.WAIT or facts is None:
                return
            if passage is not Gate.RUN:
                await self._run_gated(key, probe, pod, facts, passage)
                return
            # Another probe's run of the same command on this container goes first.
            async with self._runner.turn(handler, key, facts.container_id):
                if self._runner.skips(handler, key, facts.container_id):
                    # A previous run of its command may still run in the container
                    # (issue 23): no second one beside it. Skipped, not queued; the last
                    # outcome stands. The pod's record says so from now on (issue 43:
                    # not before a run is skipped for it).
                    self.stats.periods_skipped += 1
                    return
                await self._run_gated(key, probe, pod, facts, passage)
        finally:
            self._book_next(key, due)

    async def _run_gated(
        self, key: ProbeKey, probe: ProbeEntry, pod: PodEntry, facts: ContainerFacts, passage: Gate
    ) -> None:
        """Run `probe` past its gate (`passage`: RUN or NOT_RUNNING) and decide."""
        spec, kind, wall = probe.spec, action_kind(probe.spec.handler), self._wall()
        took = 0.0
        if passage is Gate.NOT_RUNNING:
            outcome = Outcome.failed(f"container {key.container} is not running")
        elif (blocked := await self._blocked(key, probe, pod.view, facts)) is not None:
            outcome = Outcome.unknown(blocked)
        else:
            target = probe_target(pod.view, key, facts)
            started = self._clock.now()
            outcome = await self._runner.run(spec, target)
            took = self._clock.now() - started
            self.stats.durations[kind].observe(took)
        self.stats.runs[(kind, str(outcome.result))] += 1
        probe.last = LastRun(wall, took, outcome)
        self._apply(key, spec, outcome)

    async def _blocked(
        self, key: ProbeKey, probe: ProbeEntry, view: PodView, facts: ContainerFacts
    ) -> str | None:
        """Why `probe` cannot run on this pod (a named port the container lacks, a
        handler this install lacks), reported on the pod once per cause; or None."""
        port = unresolved_port(probe.spec.handler, facts.ports)
        cause: tuple[str, str] | None = None  # the event's reason, the problem
        if port is not None:
            cause = (
                "PortNotFound",
                f"port {port!r} is not among the ports of container {key.container}",
            )
        elif (missing := await self._runner.unavailable(probe.spec.handler)) is not None:
            cause = "ProbeUnsupported", missing
        problem = None if cause is None else cause[1]
        if cause is not None and problem != probe.blocked:
            self._report.cannot_run(view, key, reason=cause[0], problem=cause[1])
        probe.blocked = problem
        return problem

    def _book_next(self, key: ProbeKey, due: float) -> None:
        probe = self._probes.get(key)
        if probe is None or self.dispatcher.due(key) is not None:
            return  # gone, or already rescheduled (a period change)
        when, missed = next_due(due, probe.spec.timing.period_seconds, self._clock.now())
        self.stats.missed_slots += missed
        self.dispatcher.schedule(key, when)

    def _apply(self, key: ProbeKey, spec: ProbeSpec, outcome: Outcome) -> None:
        probe, pod = self._probes.get(key), self._pods.get(key.pod_uid)
        if probe is None or pod is None or probe.spec.handler != spec.handler:
            self.stats.dropped_results += 1  # the probe changed or went away meanwhile
            return
        if outcome.result is Result.UNKNOWN:
            if probe.unknown_streak == 0:  # one line per streak, not per run
                log.warning("probe.unknown", probe=str(key), reason=outcome.message)
            probe.unknown_streak += 1
            return
        if probe.unknown_streak:
            log.info("probe.known_again", probe=str(key), unknown_runs=probe.unknown_streak)
            probe.unknown_streak = 0
        before = probe.thresholds.decided
        probe.thresholds, decision = step(
            probe.thresholds, outcome, probe.spec.timing, result=result_of(probe.spec, outcome)
        )
        if decision is None:
            return
        if before is None or before.state is not decision.state:
            self.stats.transitions[str(decision.state)] += 1
            previous = None if before is None else before.state
            self._report.transition(
                pod.view, key, decision.state, decision.message, previous=previous
            )
        self._mark(key.pod_uid)

    # -- the writer's side ---------------------------------------------------------------

    def lookup(self, uid: PodUID) -> tuple[PodView, str] | None:
        pod = self._pods.get(uid)
        return None if pod is None else (pod.view, pod.resource_version)

    def plan(self, view: PodView) -> DesiredPod | None:
        """The desired state of `view`'s pod from every decided probe on it; None for a
        pod that gets no write (terminating, finished, or not known here)."""
        pod = self._pods.get(view.uid)
        if pod is None or not view.active or not pod.view.active:
            return None
        desired = self._desired(pod, view)
        standing = {c.identity: c for c in desired.conflicts}
        for identity, conflict in sorted(standing.items(), key=lambda item: str(item[0])):
            if identity not in pod.conflicts and not conflict.recorded:
                self._report.conflict(view, conflict)
        pod.conflicts = frozenset(standing)
        live = {key.owner: spec for key, spec in pod.probes.items()}
        self._report_invalid(pod, view, desired.invalid, live)
        if desired.record_problem != pod.record_problem:
            pod.record_problem = desired.record_problem
            if desired.record_problem is not None:  # one line per pod per problem
                log.warning(
                    "pod.record_problem",
                    pod=f"{view.namespace}/{view.name}",
                    problem=desired.record_problem,
                )
        return desired

    def _desired(self, pod: PodEntry, view: PodView) -> DesiredPod:
        """The desired state of `view` (the pod `pod` as the writer sees it), with
        nothing reported: `plan` reports what it finds, `inspect` only reads."""
        decided = []
        live: dict[OwnerRef, ProbeSpec | None] = {}
        commands = self._held_commands(pod)
        for key, spec in pod.probes.items():
            live[key.owner] = spec
            probe = self._probes.get(key)
            if probe is not None and probe.thresholds.decided is not None:
                verdict = probe.thresholds.decided
                decided.append(
                    Decided(key.owner, probe.spec, verdict.state, verdict.message, verdict.result)
                )
        frozen = self._markers.frozen(view.namespace)
        desired = desired_state(
            pod=view, decided=decided, live=live, frozen_markers=frozen, held_commands=commands
        )
        ends = [end for o in desired.record if (end := frozen.get(o.marker)) is not None]
        if ends:
            desired = replace(desired, revisit_after=max(0.0, min(ends) - self._clock.now()))
        return desired

    # -- what it holds, for `probemarker status` ---------------------------------------

    def inspect(
        self,
        *,
        pod: tuple[str, str] | None = None,
        marker: MarkerRef | None = None,
        namespace: str | None = None,
    ) -> Iterator[PodSeen]:
        """What the engine holds of every pod with a probe, one pod at a time; only
        `pod` (namespace, name), only `marker`'s probes, only `namespace`'s pods when
        given (engine/inspection.py). Read only when asked: nothing is kept or reported."""
        return self._inspection.pods_seen(pod=pod, marker=marker, namespace=namespace)

    def _held_commands(self, pod: PodEntry) -> dict[OwnerRef, HeldCommand]:
        """The probes of `pod` whose command may still run in their container: the
        pod's record says so, so that a restarted daemon does not run it again."""
        commands = {}
        for key, spec in pod.probes.items():
            facts = pod.view.containers.get(key.container)
            container_id = "" if facts is None else facts.container_id
            command = self._runner.held(spec.handler, key, container_id)
            if command is not None:
                commands[key.owner] = command
        return commands

    def _report_invalid(
        self,
        pod: PodEntry,
        view: PodView,
        invalid: tuple[InvalidValue, ...],
        live: Mapping[OwnerRef, ProbeSpec | None],
    ) -> None:
        """One Warning per pod, key and invalid value, as `PodEntry.invalid_to_report`
        says; each counted."""
        report, kept = pod.invalid_to_report(
            invalid, live, now=self._clock.now(), refresh=self.settings.warning_refresh
        )
        self.stats.invalid_values_kept += kept
        for bad in report:
            self.stats.invalid_values[bad.kind] += 1
            self._report.invalid_value(view, bad)
