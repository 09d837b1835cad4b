"""The engine over a pod's and a marker's life (issue 15): a terminating or finished
pod keeps what it shows, an invalid edit keeps the last valid spec running, a deleted
marker is cleaned up only after the clean-up delay (so a re-created one takes over
without a gap), a broken ownership record is logged once. Fake clock, scripted runner.

Each test writes the engine's plan onto the pod (the sim's JSON patch) the way the
writer would, so "no write" is checked as a patch, not as an internal detail."""

from __future__ import annotations

import copy
from typing import Any

from structlog.testing import capture_logs

from probemarker.kube.watch.cache import Entry, entry_of
from probemarker.probe.outcome import Outcome
from probemarker.sim.store.objmeta import prune_empty
from probemarker.watch.pods import PodUID, pod_projection
from probemarker.write.patch import build_patch
from tests.unit.engine.test_engine import Rig, Runner, marker_entry, pod_entry, pod_raw, running
from tests.unit.write.helpers import apply

NOW = "2026-11-23T00:00:00Z"
UID = PodUID("pu")
ROLE = [{"state": "Succeeded", "labels": {"role": "primary"}}]


def ops(rig: Rig) -> list[dict[str, Any]]:
    """The patch the writer would send for the pod now ([] for no plan)."""
    found = rig.engine.lookup(UID)
    assert found is not None
    view = found[0]
    desired = rig.engine.plan(view)
    return [] if desired is None else build_patch(pod=view, desired=desired, now=NOW)


# The pod as the server holds it, by resourceVersion: an entry holds a projection only.
_RAW: dict[str, dict[str, Any]] = {}


def stored(raw: dict[str, Any]) -> Entry[Any]:
    """The informer's entry for `raw`, which is kept to be patched later."""
    entry = entry_of(raw, pod_projection)
    _RAW[entry.resource_version] = raw
    return entry


def written(rig: Rig, pod: Entry[Any]) -> Entry[Any]:
    """Apply the engine's plan to `pod` and tell the engine about the new version."""
    raw = apply(prune_empty(copy.deepcopy(_RAW[pod.resource_version])), ops(rig))
    raw["metadata"]["resourceVersion"] = str(int(pod.resource_version) + 1)
    entry = stored(raw)
    rig.engine.sync_pod(entry.key, entry)
    return entry


async def decided_pod(rig: Rig, marker: Entry[Any]) -> Entry[Any]:
    """The marker's probe decided Succeeded on the pod, and written onto it."""
    rig.engine.sync_marker(marker.key, marker)
    pod = stored(pod_raw())
    rig.engine.sync_pod(pod.key, pod)
    await rig.tick(1)
    pod = written(rig, pod)
    assert pod.obj["metadata"]["labels"]["role"] == "primary"
    assert ops(rig) == []
    return pod


def changed(pod: Entry[Any], change: str) -> Entry[Any]:
    raw = copy.deepcopy(_RAW[pod.resource_version])
    if change == "deleting":
        raw["metadata"]["deletionTimestamp"] = NOW
    else:
        raw["status"]["phase"] = change
    raw["metadata"]["resourceVersion"] = str(int(pod.resource_version) + 1)
    return stored(raw)


async def test_a_terminating_or_finished_pod_keeps_what_it_shows() -> None:
    for change in ("deleting", "Succeeded", "Failed"):
        async with running(Runner(Outcome.succeeded("up"))) as rig:
            pod = await decided_pod(rig, marker_entry(markerPolicy=ROLE))
            rig.engine.sync_pod(pod.key, changed(pod, change))
            assert rig.engine.probe_count == 0, change  # probing stops
            assert ops(rig) == [], change  # and nothing is removed: role=primary stays


async def test_an_invalid_edit_keeps_the_last_valid_spec_running() -> None:
    async with running(Runner(Outcome.succeeded("up"))) as rig:
        valid = marker_entry(markerPolicy=ROLE)
        valid.obj["metadata"]["generation"] = 3
        await decided_pod(rig, entry_of(valid.obj, lambda o: o))
        broken = marker_entry(markerPolicy=ROLE)
        broken.obj["metadata"]["generation"] = 4
        broken.obj["spec"]["probes"][0]["podConditionType"] = "Ready"  # reserved
        rig.engine.sync_marker(broken.key, broken)
        assert rig.engine.probe_count == 1
        assert ops(rig) == []  # neither the label nor the condition is removed
        runs = rig.runner.runs if isinstance(rig.runner, Runner) else 0
        await rig.tick(runs + 1)  # and it still runs
        (event,) = [e for e in rig.sink.events if e[1] == "InvalidMarker"]
        assert "keeps running its last valid spec (generation 3)" in event[2]
        assert "podConditionType" in event[2]


async def test_a_marker_invalid_from_the_start_holds_what_its_probes_wrote() -> None:
    """A restarted daemon meets a marker edited into an invalid spec while it was
    down: it knows no valid spec, runs nothing, and removes nothing either."""
    async with running(Runner(Outcome.succeeded("up"))) as first:
        pod = await decided_pod(first, marker_entry(markerPolicy=ROLE))
    async with running() as rig:
        broken = marker_entry(markerPolicy=ROLE)
        broken.obj["spec"]["probes"][0]["podConditionType"] = "Ready"
        rig.engine.sync_marker(broken.key, broken)
        rig.engine.sync_pod(pod.key, pod)
        assert rig.engine.probe_count == 0
        assert ops(rig) == []
        (event,) = [e for e in rig.sink.events if e[1] == "InvalidMarker"]
        assert "runs none of its probes" in event[2]
        rig.engine.sync_marker(broken.key, None)  # deleted: cleaned up (delay 0 here)
        rig.clock.advance(rig.engine.settings.cleanup_delay)
        assert ops(rig) != []


async def test_a_deleted_marker_is_cleaned_up_after_the_delay_and_a_recreated_one_takes_over() -> (
    None
):
    async with running(Runner(Outcome.succeeded("up"))) as rig:
        marker = marker_entry(markerPolicy=ROLE)
        pod = await decided_pod(rig, marker)
        rig.engine.sync_marker(marker.key, None)
        assert rig.engine.probe_count == 0
        assert ops(rig) == []  # held for the delay
        delay = rig.engine.settings.cleanup_delay
        assert delay == 30.0  # the default
        desired = rig.engine.plan(pod_view_of(rig))
        assert desired is not None
        assert desired.revisit_after == delay  # the writer comes back then
        rig.clock.advance(delay / 2)
        rig.engine.sync_marker(marker.key, marker)  # re-created: seeded from the record
        assert str(rig.decided().state) == "Succeeded"
        assert ops(rig) == []
        rig.engine.sync_marker(marker.key, None)  # deleted for good
        rig.clock.advance(delay - 1)
        assert ops(rig) == []
        rig.clock.advance(1)
        paths = {op["path"] for op in ops(rig) if op["op"] == "remove"}
        assert "/metadata/labels/role" in paths
        assert written(rig, pod).obj["metadata"].get("labels", {}).get("role") is None


async def test_a_broken_ownership_record_is_logged_once_per_problem() -> None:
    async with running() as rig:
        marker = marker_entry(markerPolicy=ROLE)
        rig.engine.sync_marker(marker.key, marker)
        pod = pod_entry(annotations={"probemarker.io/owned": "{oops"})
        with capture_logs() as logs:
            rig.engine.sync_pod(pod.key, pod)
            for _ in range(3):
                ops(rig)
        problems = [line for line in logs if line["event"] == "pod.record_problem"]
        assert len(problems) == 1
        assert problems[0]["pod"] == "ns/g"
        assert "not JSON" in problems[0]["problem"]


def pod_view_of(rig: Rig) -> Any:
    found = rig.engine.lookup(UID)
    assert found is not None
    return found[0]


async def test_a_marker_without_a_spec_is_reported_once() -> None:
    """A looser CRD (Kruise's) stores a marker with no spec at all: one warning, however
    often a re-list delivers it again."""
    async with running() as rig:
        entry = marker_entry()
        del entry.obj["spec"]
        for _ in range(3):
            rig.engine.sync_marker(entry.key, entry)
        assert [e[:2] for e in rig.sink.events] == [("PodProbeMarker", "InvalidMarker")]
