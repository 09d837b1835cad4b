"""Warnings a restarted daemon must not raise again, and answers that alternate
(issue 29, found in review). Each test states the contract it holds the code to."""

from __future__ import annotations

from probemarker.watch.pods import PodUID
from probemarker.write.patch import build_patch
from tests.unit.engine.test_engine import Runner, running
from tests.unit.engine.test_warnings import NOW, Pod, answers, result_marker, warnings
from tests.unit.write.helpers import apply


async def _generation(pod: Pod, texts: list[str], runs: int) -> list[str]:
    """One daemon's life on pod g: `runs` periods, each plan applied to the pod."""
    async with running(Runner(*answers(*texts))) as rig:
        marker = result_marker()
        rig.engine.sync_marker(marker.key, marker)
        rig.engine.sync_pod(pod.entry().key, pod.entry())
        for run in range(1, runs + 1):
            await rig.tick(run)
            found = rig.engine.lookup(PodUID("pu"))
            assert found is not None
            desired = rig.engine.plan(found[0])
            assert desired is not None
            pod.raw = apply(pod.raw, build_patch(pod=found[0], desired=desired, now=NOW))
            rig.engine.sync_pod(pod.entry().key, pod.entry())
        return warnings(rig.sink, "InvalidResultValue")


async def test_a_restarted_daemon_does_not_warn_again_of_the_value_it_warned_of_last() -> None:
    """docs/api.md: no Warning about a rendered value anew after a restart. The
    answer was invalid value A, then (for good) invalid value B: the first daemon
    warned of both (B once the refresh interval had passed). `w` keeps the token of
    the *first* value of the streak (A), so a restarted daemon finds B "not recorded"
    and raises the Warning about B a second time, although nothing changed."""
    pod = Pod()
    first = await _generation(pod, ["bad answer A"] + ["bad answer B"] * 30, runs=15)
    assert len(first) == 2, first
    assert "bad answer B" in first[1], first
    again = await _generation(pod, ["bad answer B"], runs=3)
    assert again == [], again


async def test_two_invalid_answers_in_turn_are_each_reported_once() -> None:
    """docs/api.md: one InvalidResultValue Warning "once per pod, key and value". A
    probe whose answer alternates between two invalid values (a server flipping
    between "loading map" and "map loaded") is two values: two Warnings. The memory
    keeps only the last value reported per key, so each one that comes back after
    the other is "new" again: one Warning every refresh interval, forever (4 in
    40 s here, 360 an hour), for the same two values."""
    texts = ["loading map", "map loaded"] * 20
    async with running(Runner(*answers(*texts))) as rig:
        marker = result_marker()
        rig.engine.sync_marker(marker.key, marker)
        pod = Pod()
        rig.engine.sync_pod(pod.entry().key, pod.entry())
        for run in range(1, 41):
            await rig.tick(run)
            found = rig.engine.lookup(PodUID("pu"))
            assert found is not None
            rig.engine.plan(found[0])
        notes = warnings(rig.sink, "InvalidResultValue")
        assert len(notes) == 2, notes
