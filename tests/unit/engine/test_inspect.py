"""`Engine.inspect` (what `probemarker status` reads) and `waiting_of`: what the engine
holds of each probe, read without changing it."""

from __future__ import annotations

from typing import Any

import pytest

from probemarker.api.model import MarkerRef, Timing
from probemarker.engine.seen import Waiting, waiting_of
from probemarker.kube.watch.cache import entry_of
from probemarker.probe.outcome import Outcome
from probemarker.watch.markers import marker_projection
from probemarker.watch.pods import ContainerFacts, PodView, pod_projection, pod_view
from tests.fakes import until
from tests.unit.engine.test_engine import START, Runner, marker_entry, pod_entry, pod_raw, running

MARKER = MarkerRef("ns", "m")


def view_of(**meta: Any) -> PodView:
    raw = pod_raw()
    raw["metadata"].update(meta)
    return pod_view(pod_projection(raw))


RUNNING = ContainerFacts("app", "containerd://1", running=True, started=True, started_at=START)


@pytest.mark.parametrize(
    ("view", "facts", "held", "blocked", "now", "expected"),
    [
        (view_of(), RUNNING, False, None, START + 60, None),
        (
            view_of(deletionTimestamp="2027-01-01T00:00:00Z"),
            RUNNING,
            False,
            None,
            START,
            Waiting.POD_TERMINATING,
        ),
        (view_of(), None, False, None, START, Waiting.CONTAINER_MISSING),
        (view_of(), ContainerFacts("app"), False, None, START, Waiting.CONTAINER_NOT_CREATED),
        (
            view_of(),
            ContainerFacts("app", "c://1", running=True),
            False,
            None,
            START,
            Waiting.CONTAINER_NOT_STARTED,
        ),
        (view_of(), RUNNING, False, None, START + 4, Waiting.INITIAL_DELAY),
        (view_of(), RUNNING, True, None, START + 60, Waiting.COMMAND_HELD),
        (view_of(), RUNNING, False, "port 'web' is missing", START + 60, Waiting.CANNOT_RUN),
        # not running is not a wait: such a run is Failed (docs/engine.md)
        (view_of(), ContainerFacts("app", "c://1", running=False), True, None, START, None),
    ],
)
def test_waiting_follows_the_gate(
    view: PodView,
    facts: ContainerFacts | None,
    held: bool,
    blocked: str | None,
    now: float,
    expected: Waiting | None,
) -> None:
    timing = Timing(initial_delay_seconds=5)
    waiting, detail = waiting_of(view, "app", facts, timing, now=now, held=held, blocked=blocked)
    assert waiting is expected
    assert bool(detail) == (expected is not None)


def test_the_initial_delay_says_how_long_is_left() -> None:
    _, detail = waiting_of(
        view_of(), "app", RUNNING, Timing(initial_delay_seconds=30), now=START + 10
    )
    assert detail == "initialDelaySeconds 30: 20s left"


async def test_a_probe_short_of_its_threshold_shows_its_count_and_last_run() -> None:
    runner = Runner(Outcome.failed("down"))
    async with running(runner) as rig:
        rig.engine.sync_marker(marker_entry(failure=3).key, marker_entry(failure=3))
        rig.engine.sync_pod(pod_entry().key, pod_entry())
        await rig.tick(1)
        await rig.tick(2)
        (key,) = rig.engine._probes
        await until(lambda: rig.engine.dispatcher.due(key) is not None)
        (pod,) = list(rig.engine.inspect())
        (probe,) = pod.probes
        assert probe.thresholds.decided is None
        assert (str(probe.thresholds.last), probe.thresholds.run) == ("Failed", 2)
        assert probe.last is not None
        assert probe.last.outcome == Outcome.failed("down")
        assert probe.last.at == rig.clock.now()  # the wall clock is the fake one here
        assert probe.due is not None
        assert probe.due > rig.clock.now()
        assert probe.waiting is None
        assert not probe.running
        assert pod.desired is not None
        assert pod.desired.conditions == {}


async def test_a_held_command_and_a_missing_container_say_so() -> None:
    async with running(Runner()) as rig:
        rig.engine.sync_marker(marker_entry().key, marker_entry())
        other = marker_entry(containerName="sidecar")
        other.obj["metadata"]["name"] = "side"
        other = entry_of(other.obj, marker_projection)
        rig.engine.sync_marker(other.key, other)
        rig.engine.sync_pod(pod_entry().key, pod_entry())
        (key,) = rig.engine._probes
        rig.runner.busy_probes.add(key)  # type: ignore[union-attr]
        (pod,) = list(rig.engine.inspect())
        reasons = {(p.key.marker.name, p.key.container): p.waiting for p in pod.probes}
        assert reasons == {
            ("m", "app"): Waiting.COMMAND_HELD,
            ("side", "sidecar"): Waiting.CONTAINER_MISSING,
        }
        assert [p.key.marker for p in next(rig.engine.inspect(marker=MARKER)).probes] == [MARKER]
        assert list(rig.engine.inspect(pod=("ns", "other"))) == []
        assert len(list(rig.engine.inspect(pod=("ns", "g")))) == 1
        # -n: only that namespace's pods are read (issue 40)
        assert [p.view.name for p in rig.engine.inspect(namespace="ns")] == ["g"]
        assert list(rig.engine.inspect(namespace="other")) == []
        assert list(rig.engine.inspect(pod=("ns", "g"), namespace="other")) == []


async def test_a_terminating_pod_shows_its_probes_as_stopped_and_no_write() -> None:
    async with running(Runner()) as rig:
        rig.engine.sync_marker(marker_entry().key, marker_entry())
        raw = pod_raw()
        raw["metadata"]["deletionTimestamp"] = "2027-01-01T00:00:00Z"
        entry = entry_of(raw, pod_projection)
        rig.engine.sync_pod(entry.key, entry)
        (pod,) = list(rig.engine.inspect())
        assert [p.waiting for p in pod.probes] == [Waiting.POD_TERMINATING]
        assert pod.desired is None
        assert rig.engine.probe_count == 0  # nothing was started to answer
