"""Kruise's PodProbeMarker e2e scenarios, run against the real daemon and the sim."""

from __future__ import annotations

from probemarker.sim.exec.runners import ExecReply
from tests.integration.world import (
    OWNED,
    World,
    annotations_of,
    condition,
    labels_of,
    marker,
    probe,
    running_daemon,
)

IDLE = probe(
    "idle",
    command="idle",
    condition="game.io/idle",
    succeeded={"labels": {"gameserver-idle": "true"}},
    failed={"labels": {"gameserver-idle": "false"}},
)
COST = probe(
    "cost",
    command="idle",
    succeeded={"annotations": {"controller.kubernetes.io/pod-deletion-cost": "-10"}},
    failed={"annotations": {"controller.kubernetes.io/pod-deletion-cost": "10"}},
)
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


async def test_labels_condition_annotation_flip_and_recover(world: World) -> None:
    await world.create_pod("game-0", labels={"app": "game"})
    await world.apply_marker(marker("idle", probes=[IDLE]))
    async with running_daemon(world.sim):
        pod = await world.wait_pod("game-0", lambda p: condition(p, "game.io/idle") is not None)
        assert labels_of(pod)["gameserver-idle"] == "true"
        cond = condition(pod, "game.io/idle")
        assert cond is not None
        assert (cond["status"], cond["reason"], cond["message"]) == ("True", "ProbeSucceeded", "ok")
        assert OWNED in annotations_of(pod)

        await world.apply_marker(marker("cost", probes=[COST]))
        pod = await world.wait_pod("game-0", lambda p: DELETION_COST in annotations_of(p))
        assert annotations_of(pod)[DELETION_COST] == "-10"

        world.script.set("game-0", "app", "idle", ExecReply(1, b"", b"busy: 3 players\n"))
        pod = await world.wait_pod(
            "game-0",
            lambda p: (
                annotations_of(p).get(DELETION_COST) == "10"
                and labels_of(p).get("gameserver-idle") == "false"
            ),
        )
        cond = condition(pod, "game.io/idle")
        assert cond is not None
        assert (cond["status"], cond["reason"], cond["message"]) == (
            "False",
            "ProbeFailed",
            "busy: 3 players",
        )

        world.script.set("game-0", "app", "idle", ExecReply(0, b"idle again\n"))
        pod = await world.wait_pod(
            "game-0",
            lambda p: (
                (condition(p, "game.io/idle") or {}).get("message") == "idle again"
                and annotations_of(p).get(DELETION_COST) == "-10"
            ),
        )
        assert labels_of(pod)["gameserver-idle"] == "true"
        assert annotations_of(pod)[DELETION_COST] == "-10"


async def test_marker_deletion_removes_what_it_wrote(world: World) -> None:
    await world.create_pod("game-0", labels={"app": "game", "keep": "me"})
    await world.apply_marker(marker("idle", probes=[IDLE]))
    async with running_daemon(world.sim):
        await world.wait_pod("game-0", lambda p: "gameserver-idle" in labels_of(p))
        await world.delete_marker("idle")
        pod = await world.wait_pod(
            "game-0",
            lambda p: (
                "gameserver-idle" not in labels_of(p)
                and condition(p, "game.io/idle") is None
                and OWNED not in annotations_of(p)
            ),
        )
        assert labels_of(pod) == {"app": "game", "keep": "me"}


async def test_pods_scaled_down_and_up(world: World) -> None:
    await world.apply_marker(marker("idle", probes=[IDLE]))
    async with running_daemon(world.sim):
        for name in ("game-0", "game-1"):
            await world.create_pod(name, labels={"app": "game"})
        for name in ("game-0", "game-1"):
            await world.wait_pod(name, lambda p: "gameserver-idle" in labels_of(p))
        await world.core.delete_namespaced_pod("game-1", "default", grace_period_seconds=0)
        await world.sim.kubelet.wait_removed("default", "game-1")
        await world.create_pod("game-2", labels={"app": "game"})
        await world.wait_pod("game-2", lambda p: "gameserver-idle" in labels_of(p))
