"""The engine and commands that may still run (issue 30): a probe started on a pod
whose record says its command may still run is seeded with that hold (and skips its
periods); the plan records what the runner holds. Scripted runner, fake clock."""

from __future__ import annotations

from probemarker.match.identity import HeldCommand, command_digest
from probemarker.probe.outcome import Outcome
from probemarker.watch.pods import PodUID
from probemarker.write.ownership import OWNED_KEY, Owned, parse_record
from probemarker.write.patch import build_patch
from tests.fakes import until
from tests.unit.engine.test_engine import Runner, marker_entry, pod_entry, running

HELD = HeldCommand(command=command_digest(["check"]), container="1", started=1_800_000_000)
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
