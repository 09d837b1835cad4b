"""The Warnings a hostile answer or a pair of markers can raise, with an injected clock:
`InvalidResultValue` once per pod, key and value however many (issue 29, defect 4),
at most once per refresh interval for an answer that is a new invalid value every
run (defect 5), `ConflictingMarkers` once per key and pair of owners whatever the
values (defect 3), and none again from a restarted daemon (the record carries them)."""

from __future__ import annotations

from typing import Any

from probemarker.kube.watch.cache import Entry, entry_of
from probemarker.probe.outcome import Outcome
from probemarker.sim.store.objmeta import prune_empty
from probemarker.watch.markers import marker_projection
from probemarker.watch.pods import PodUID, pod_projection
from probemarker.write.patch import build_patch
from tests.unit.engine.test_engine import Runner, Sink, pod_raw, running
from tests.unit.write.helpers import apply

NOW = "2026-11-28T00:00:00Z"


def result_marker(
    name: str = "m",
    *,
    probes: int = 1,
    keys: int = 1,
    template: str = "{{.Result}}",
    prefix: str = "r.io",
    version: int = 1,
) -> Entry[dict[str, Any]]:
    """A marker whose probes each render `keys` labels from their answer."""
    entries = [
        {
            "name": f"p{p}",
            "containerName": "app",
            "probe": {"exec": {"command": ["check"]}, "periodSeconds": 1},
            "markerPolicy": [
                {
                    "state": "Succeeded",
                    "labels": {f"{prefix}/p{p}-k{k}": template for k in range(keys)},
                }
            ],
        }
        for p in range(probes)
    ]
    raw = {
        "apiVersion": "probemarker.io/v1alpha1",
        "kind": "PodProbeMarker",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"{name}-u",
            "resourceVersion": str(version),
            "generation": version,
        },
        "spec": {"selector": {"matchLabels": {"app": "game"}}, "probes": entries},
    }
    return entry_of(raw, marker_projection)


def answers(*texts: str) -> list[Outcome]:
    return [Outcome.succeeded("ok", answer=text) for text in texts]


def warnings(sink: Sink, reason: str) -> list[str]:
    return [note for _, why, note in sink.events if why == reason]


async def tick_and_plan(rig: Any, runs: int) -> None:
    """One more period (until `runs` runs in all), then the writer's plan of pod g."""
    await rig.tick(runs)
    found = rig.engine.lookup(PodUID("pu"))
    assert found is not None
    rig.engine.plan(found[0])


class Pod:
    """Pod g as the API server keeps it: the engine's plans are applied to it."""

    def __init__(self) -> None:
        self.raw = prune_empty(pod_raw())  # as a client sees it: no empty maps

    def entry(self) -> Any:
        return entry_of(self.raw, pod_projection)


async def test_each_of_75_invalid_values_is_reported_once() -> None:
    """Defect 4: 3 probes x 25 keys, an answer that never changes. Before: the per-pod
    memory was cleared at 64 and the 75 were reported again on every plan."""
    async with running(Runner(*answers("not a label value"))) as rig:
        marker = result_marker(probes=3, keys=25)
        rig.engine.sync_marker(marker.key, marker)
        pod = Pod()
        rig.engine.sync_pod(pod.entry().key, pod.entry())
        for run in range(1, 11):
            await tick_and_plan(rig, run * 3)
        assert len(warnings(rig.sink, "InvalidResultValue")) == 75
        assert rig.engine.stats.invalid_values == {"label": 75}


async def test_an_answer_that_is_new_every_run_is_reported_at_most_once_per_refresh() -> None:
    """Defect 5: a clock in the answer is a new invalid value every period; before,
    one Warning every period (3,600 an hour at period 1 s)."""
    texts = [f"at 12:00:{n:02d} UTC" for n in range(30)]
    async with running(Runner(*answers(*texts))) as rig:
        marker = result_marker()
        rig.engine.sync_marker(marker.key, marker)
        pod = Pod()
        rig.engine.sync_pod(pod.entry().key, pod.entry())
        for run in range(1, 31):
            await tick_and_plan(rig, run)
        # 30 s of new values with the default refresh of 10 s: at 1, 11 and 21 s.
        notes = warnings(rig.sink, "InvalidResultValue")
        assert len(notes) == 3, notes
        assert rig.engine.stats.invalid_values_kept == 27
        assert "at 12:00:00 UTC" in notes[0]
        assert "at 12:00:10 UTC" in notes[1]


async def test_a_conflict_whose_values_change_is_one_warning() -> None:
    """Defect 3: two markers render one key from answers that change every period;
    before, a new ConflictingMarkers Warning for every value."""
    texts = [f"v{n}" for n in range(10)]
    async with running(Runner(*answers(*texts))) as rig:
        for entry in (result_marker("a", template="a-{{.Result}}"), result_marker("b")):
            rig.engine.sync_marker(entry.key, entry)
        pod = Pod()
        rig.engine.sync_pod(pod.entry().key, pod.entry())
        for run in range(1, 9):
            await tick_and_plan(rig, run * 2)
        [note] = warnings(rig.sink, "ConflictingMarkers")
        assert "a#p0 wins" in note


async def test_a_restarted_daemon_raises_no_warning_again() -> None:
    """The record carries the Warnings raised (`w`): a new engine on the pod the old
    one wrote raises neither InvalidResultValue nor ConflictingMarkers again."""
    markers = (
        result_marker("a", template="a-{{.Result}}"),
        result_marker("b", template="b-{{.Result}}"),
        result_marker("c", template="{{.Result}}{{.Result}}"),  # 80 characters: too long
    )
    pod = Pod()
    for generation in ("first", "restarted"):
        async with running(Runner(*answers("v" * 40))) as rig:
            for entry in markers:
                rig.engine.sync_marker(entry.key, entry)
            rig.engine.sync_pod(pod.entry().key, pod.entry())
            for run in range(1, 4):
                await rig.tick(run * 3)
                found = rig.engine.lookup(PodUID("pu"))
                assert found is not None
                view = found[0]
                desired = rig.engine.plan(view)
                assert desired is not None
                pod.raw = apply(pod.raw, build_patch(pod=view, desired=desired, now=NOW))
                rig.engine.sync_pod(pod.entry().key, pod.entry())
            raised = {why for _, why, _ in rig.sink.events} - {"ProbeSucceeded"}
            if generation == "first":
                assert raised == {"InvalidResultValue", "ConflictingMarkers"}
            else:  # and no transition: the seeded state stands
                assert rig.sink.events == []


async def test_what_is_remembered_is_bounded_by_the_keys_rendered_now() -> None:
    """A marker edited again and again, each time rendering other keys: the per-pod
    memory keeps the slots of the keys rendered now, not of every key ever."""
    async with running(Runner(*answers("not a label value"))) as rig:
        pod = Pod()
        rig.engine.sync_pod(pod.entry().key, pod.entry())
        for edit in range(1, 6):
            marker = result_marker(keys=10, prefix=f"e{edit}.io", version=edit)
            rig.engine.sync_marker(marker.key, marker)
            await tick_and_plan(rig, edit)
            [state] = rig.engine._pods.values()
            assert len(state.invalid_reported) == 10
            assert {slot[2].split("/")[0] for slot in state.invalid_reported} == {f"e{edit}.io"}
        assert len(warnings(rig.sink, "InvalidResultValue")) == 50  # each new key once
