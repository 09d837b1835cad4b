"""The engine and commands that may still run (issue 30): a probe started on a pod
whose record says its command may still run is seeded with that hold (and skips its
periods); the plan records what the runner holds. Scripted runner, fake clock; and
the real exec handler's holds (issue 43: on the record only once a run was skipped)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import cast

import pytest

from probemarker.api.model import ExecAction
from probemarker.identity.commands import HeldCommand, command_digest
from probemarker.identity.probes import OwnerRef
from probemarker.kube.connect.client import KubeClient
from probemarker.probe.exec import ExecHandler
from probemarker.probe.execresult import ExecResult, ExecTransportError, TransportFailure
from probemarker.probe.holds import CommandHolds, HoldSlot
from probemarker.probe.holdtable import CommandKey
from probemarker.probe.outcome import Outcome
from probemarker.probe.runner import ProbeRunner
from probemarker.watch.pods import PodUID
from probemarker.write.ownership import OWNED_KEY, Owned, parse_record
from probemarker.write.patch import build_patch
from tests.fakes import FakeClock, until
from tests.unit.engine.test_engine import Rig, Runner, marker_entry, pod_entry, running
from tests.unit.probe.test_holds import Stream

DIGEST = command_digest(["check"])
HELD = HeldCommand(command=DIGEST, container="1", started=1_800_000_000)
RECORD = '{"#uid":"pu","m#p":{"h":{"c":"1","d":"' + HELD.command + '","t":1800000000}}}'


async def test_a_probe_whose_record_holds_its_command_is_seeded_and_skips_its_periods() -> None:
    runner = Runner(Outcome.failed("timed out"))
    async with running(runner) as rig:
        entry = marker_entry(failure=3)
        rig.engine.sync_marker(entry.key, entry)
        pod = pod_entry(annotations={OWNED_KEY: RECORD})
        rig.engine.sync_pod(pod.key, pod)
        ((key, held, container_id),) = runner.seeded
        assert (held, container_id) == (HELD, "containerd://1")
        assert rig.decided() is None  # an entry without a state seeds no state
        for skipped in (1, 2, 3):
            rig.clock.advance(1.0)
            await until(lambda: rig.engine.stats.periods_skipped >= skipped)  # noqa: B023
        assert runner.runs == 0
        runner.holding[key] = held  # what the holds answer: the record stays as it is
        found = rig.engine.lookup(PodUID("pu"))
        assert found is not None
        desired = rig.engine.plan(found[0])
        assert desired is not None
        assert build_patch(pod=found[0], desired=desired, now="2026-11-23T00:00:00Z") == []


async def test_the_plan_records_the_held_command_and_drops_it_when_it_ends() -> None:
    runner = Runner(Outcome.failed("timed out"))
    async with running(runner) as rig:
        entry = marker_entry()
        rig.engine.sync_marker(entry.key, entry)
        rig.engine.sync_pod(pod_entry().key, pod_entry())
        await rig.tick(1)
        (key,) = rig.engine._probes
        runner.holding[key] = HELD
        found = rig.engine.lookup(PodUID("pu"))
        assert found is not None
        desired = rig.engine.plan(found[0])
        assert desired is not None
        record, _ = parse_record(desired.annotations[OWNED_KEY], pod_uid="pu")
        assert record == {key.owner: Owned(record[key.owner].state, condition="x.io/p", held=HELD)}
        del runner.holding[key]
        desired = rig.engine.plan(found[0])
        assert desired is not None
        record, _ = parse_record(desired.annotations[OWNED_KEY], pod_uid="pu")
        assert record[key.owner].held is None


async def test_a_renamed_probe_is_seeded_from_the_entry_of_its_old_name() -> None:
    """Issue 40, 2: the hold is the command's, so a probe renamed while the daemon was
    down finds its command held under the old name's entry."""
    runner = Runner(Outcome.failed("timed out"))
    record = RECORD.replace('"m#p"', '"m#old-name"')
    async with running(runner) as rig:
        entry = marker_entry()
        rig.engine.sync_marker(entry.key, entry)
        pod = pod_entry(annotations={OWNED_KEY: record})
        rig.engine.sync_pod(pod.key, pod)
        ((key, held, container_id),) = runner.seeded
        assert (key.probe, held, container_id) == ("p", HELD, "containerd://1")
        rig.clock.advance(1.0)
        await until(lambda: rig.engine.stats.periods_skipped >= 1)
        assert runner.runs == 0


class TimingOut:
    """`run_exec` as it ends when a command outlives its time limit: the stream goes to
    the holder, and the run is a timeout. `streams[i].end.set()` ends run i's command."""

    def __init__(self) -> None:
        self.streams: list[Stream] = []

    async def __call__(self, client: object, *, holder: HoldSlot, **_: object) -> ExecResult:
        stream = Stream()
        self.streams.append(stream)
        if holder.admit():
            holder.hold(stream)
        return ExecTransportError(
            TransportFailure.DEADLINE, "timed out", upgraded=True, timed_out=True
        )


@contextlib.asynccontextmanager
async def real_holds(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Rig, Holds]]:
    """The engine with the real exec handler and its real `CommandHolds` (one fake clock
    for both, the wall clock too); every exec times out (`TimingOut`), and what the
    holds ask of the pod's record is noted in `changed`."""
    timing_out = TimingOut()
    monkeypatch.setattr("probemarker.probe.exec.run_exec", timing_out)
    clock = FakeClock(1_800_000_000.0)
    changed: list[CommandKey] = []
    holds = CommandHolds(clock=clock, wall=clock.now, changed=changed.append)
    handler = ExecHandler(cast(KubeClient, None), holds=holds)
    async with handler, running(ProbeRunner({ExecAction: handler}), clock=clock) as rig:
        entry = marker_entry()
        rig.engine.sync_marker(entry.key, entry)
        rig.engine.sync_pod(pod_entry().key, pod_entry())
        yield rig, Holds(holds, timing_out.streams, changed)


@dataclass
class Holds:
    holds: CommandHolds
    streams: list[Stream]
    changed: list[CommandKey]


def recorded_hold(rig: Rig) -> HeldCommand | None:
    """The `h` of the probe's entry in the plan of the pod (None: none)."""
    found = rig.engine.lookup(PodUID("pu"))
    assert found is not None
    desired = rig.engine.plan(found[0])
    assert desired is not None
    record, _ = parse_record(desired.annotations[OWNED_KEY], pod_uid="pu")
    return record[OwnerRef("m", "p")].held


async def period(rig: Rig, *, runs: int, skipped: int) -> None:
    """One period on: until the engine has run `runs` and skipped `skipped` in all."""
    rig.clock.advance(1.0)
    stats = rig.engine.stats
    await until(
        lambda: (
            sum(stats.runs.values()) >= runs
            and stats.periods_skipped >= skipped
            and rig.engine.dispatcher.running == 0
        )
    )
    assert (sum(stats.runs.values()), stats.periods_skipped) == (runs, skipped)


async def test_a_command_that_ends_before_its_next_run_is_due_is_never_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 43, 3: a run that timed out, whose command ended a moment later, wrote the
    hold onto the pod when the timeout came and removed it at the command's end."""
    async with real_holds(monkeypatch) as (rig, h):
        await period(rig, runs=1, skipped=0)  # times out: held
        assert h.holds.busy(CommandKey("ns", PodUID("pu"), "app", DIGEST), "1")
        assert str(rig.decided().state) == "Failed"
        assert recorded_hold(rig) is None  # the timeout's write holds no `h`
        assert list(rig.engine.inspect())  # asking for the status records nothing
        h.streams[0].end.set()  # the command ends before its next run is due
        await until(lambda: h.holds.held == 0)
        await period(rig, runs=2, skipped=0)  # which runs
        assert h.changed == []  # nothing asked the pod's record to change, ever
        assert recorded_hold(rig) is None
        assert h.holds.stats.recorded == 0


async def test_a_command_still_running_when_a_run_is_due_is_recorded_once_and_removed_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with real_holds(monkeypatch) as (rig, h):
        await period(rig, runs=1, skipped=0)  # times out: held
        started = int(rig.clock.now())
        assert recorded_hold(rig) is None
        await period(rig, runs=1, skipped=1)  # still running: skipped, and recorded
        key = CommandKey("ns", PodUID("pu"), "app", DIGEST)
        assert h.changed == [key]
        assert recorded_hold(rig) == HeldCommand(command=DIGEST, container="1", started=started)
        await period(rig, runs=1, skipped=2)  # skipped again: the record stands
        assert h.changed == [key]
        h.streams[0].end.set()  # the command ends: the record follows
        await until(lambda: h.holds.held == 0)
        assert h.changed == [key, key]
        assert recorded_hold(rig) is None
        await period(rig, runs=2, skipped=2)
