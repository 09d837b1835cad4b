"""A daemon process replaced by another, as a DaemonSet rollout or a deleted daemon pod
replaces it (tests/cluster/test_disruption.py shows the same on a real node): the old
process stops on SIGTERM, a new one starts, with a changed setting, against the same
API server. What the new one must do is the daemon's own (docs/engine.md): seed from what the
pods show (labels, annotations with `{{.Result}}` values, conditions, the ownership
record with its noted Warnings) and so write nothing, raise no event (not the Warning
the old one raised for two markers that disagree), change nothing on any pod; then
follow a change in a container as before.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from probemarker.sim.exec.runners import ExecReply
from probemarker.sim.server.discovery.catalog import PODS
from tests.integration.process import DaemonProcess, daemon
from tests.integration.world import (
    NS,
    World,
    annotations_of,
    condition,
    labels_of,
    marker,
    probe,
)

ROOT = str(Path(__file__).resolve().parents[2])  # the checkout, for the daemon's process
PODS_HERE = ("t-0", "t-1", "t-2")
KIND = "probemarker.test/steady"
ANSWER = "probemarker.test/answer"
WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})


def _markers() -> list[dict[str, Any]]:
    """`steady`: label, `{{.Result}}` annotation and condition; `rival`: a label key
    `steady` sets too, to another value (a ConflictingMarkers Warning on each pod)."""
    steady = probe(
        "p",
        condition=KIND,
        succeeded={"labels": {"probe": "ok", "tier": "a"}, "annotations": {ANSWER: "{{.Result}}"}},
        failed={"labels": {"probe": "bad"}},
    )
    rival = probe("r", command="rival", succeeded={"labels": {"tier": "b"}})
    return [marker("steady", probes=[steady]), marker("rival", probes=[rival])]


def _marked(pod: dict[str, Any]) -> bool:
    return (
        labels_of(pod).get("probe") == "ok"
        and annotations_of(pod).get(ANSWER) == "ok"
        and (condition(pod, KIND) or {}).get("status") == "True"
    )


def _versions(world: World) -> dict[str, str]:
    return {
        p["metadata"]["name"]: p["metadata"]["resourceVersion"]
        for p in world.sim.store.list(PODS, namespace=NS).items
    }


def _writes(world: World) -> list[str]:
    """Every write request the API server took since the last reset (exec aside)."""
    return [
        f"{r.verb} {r.resource}/{r.subresource} {r.name}"
        for r in world.sim.accounting.records
        if r.verb in WRITES and r.subresource != "exec"
    ]


async def _stops(proc: DaemonProcess) -> None:
    proc.signal(signal.SIGTERM)
    assert await proc.exit_code(within=15) == 0, proc.outline()
    assert proc.events()[-1] == "daemon.stopped", proc.outline()


async def test_a_replacement_process_writes_nothing_warns_nothing_and_changes_nothing(
    world: World,
) -> None:
    for name in PODS_HERE:
        await world.create_pod(name, labels={"app": "game"})
    for body in _markers():
        await world.apply_marker(body)
    env = {"PYTHONPATH": ROOT}
    async with daemon(world.sim.kubeconfig_path, env=env) as old:
        for name in PODS_HERE:
            await world.wait_pod(name, _marked)
        await world.script.wait_calls(2 * len(PODS_HERE))  # a round of both probes more
        assert len(world.events("ConflictingMarkers")) == len(PODS_HERE)
        world.sim.accounting.reset()
        before = _versions(world)
        await _stops(old)
    # The rollout's change of a setting (tests/cluster/test_disruption.py does the same).
    env["PROBEMARKER_CLEANUP_DELAY_SECONDS"] = "37"
    async with daemon(world.sim.kubeconfig_path, env=env) as new:
        await new.wait_event("daemon.ready")
        # Three rounds of both probes on every pod: a write of the first would be out.
        await world.script.wait_calls(3 * 2 * len(PODS_HERE), within=20)
        # No pod write, no event (created or counted): the old one's stop wrote none either.
        assert _writes(world) == []
        assert _versions(world) == before  # no pod changed: nothing flipped
        # It works: a change in a container is followed, both ways.
        world.script.set("t-0", "app", "check", ExecReply(1, b"", b"down\n"))
        await world.wait_pod("t-0", lambda p: labels_of(p).get("probe") == "bad")
        del world.script.replies[("t-0", "app", "check")]
        await world.wait_pod("t-0", _marked)
        await _stops(new)
    # Its log, read whole now: the only transitions are the two the test caused, and
    # the Warning the old one raised was not raised again on the pods left alone.
    decided = [(line["pod"], line["previous"], line["state"])
               for line in new.lines if line.get("event") == "probe.decided"]  # fmt: skip
    assert decided == [(f"{NS}/t-0", "Succeeded", "Failed"), (f"{NS}/t-0", "Failed", "Succeeded")]
    warned = {line["pod"] for line in new.lines if line.get("event") == "write.conflict"}
    assert warned <= {f"{NS}/t-0"}, new.outline()
