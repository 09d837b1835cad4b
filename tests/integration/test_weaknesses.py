"""Each of Kruise's weaknesses (SPEC §6), with a test that shows we do not have it."""

from __future__ import annotations

import anyio

from probemarker.sim.exec.runners import ExecReply
from tests.integration.world import (
    OWNED,
    World,
    annotations_of,
    condition,
    flag,
    labels_of,
    marker,
    probe,
    running_daemon,
)
from tests.rbac_check import disallowed


async def test_two_probes_on_one_container_do_not_overwrite_each_other(world: World) -> None:
    await world.create_pod("g", labels={"app": "game"})
    world.script.set("g", "app", "role", ExecReply(1, b"secondary\n"))
    await world.apply_marker(
        marker(
            "m",
            probes=[
                probe("idle", command="idle", condition="game.io/idle"),
                probe("role", command="role", condition="game.io/primary"),
            ],
        )
    )
    async with running_daemon(world.sim):
        pod = await world.wait_pod(
            "g",
            lambda p: (
                condition(p, "game.io/idle") is not None
                and condition(p, "game.io/primary") is not None
            ),
        )
    assert (condition(pod, "game.io/idle") or {})["status"] == "True"
    assert (condition(pod, "game.io/primary") or {})["status"] == "False"
    assert (condition(pod, "game.io/primary") or {})["message"] == "secondary"


async def test_a_restarted_daemon_writes_nothing_and_flaps_nothing(world: World) -> None:
    await world.create_pod("g", labels={"app": "game"})
    await world.apply_marker(
        marker("m", probes=[flag("idle", condition="game.io/idle", success=2, failure=2)])
    )
    async with running_daemon(world.sim):
        await world.wait_pod("g", lambda p: labels_of(p).get("idle") == "yes")
    writes, before = world.pod_writes(), world.pod("g")
    async with running_daemon(world.sim):
        await world.script.wait_calls(4)  # two thresholds' worth of runs
        await anyio.sleep(0.2)  # past the writer's coalescing window
    assert world.pod_writes() == writes
    after = world.pod("g")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


async def test_a_period_change_applies_from_the_next_run(world: World) -> None:
    await world.create_pod("g", labels={"app": "game"})
    await world.apply_marker(marker("m", probes=[flag("idle", period=1)]))
    async with running_daemon(world.sim):
        await world.script.wait_calls(2)
        await world.apply_marker(marker("m", probes=[flag("idle", period=3600)]))
        await anyio.sleep(0.1)
        seen = len(world.script.calls)
        await anyio.sleep(2.5)
        # At most the run already booked on the old grid; then once an hour.
        assert len(world.script.calls) - seen <= 1
        await world.apply_marker(marker("m", probes=[flag("idle", period=1)]))
        await world.script.wait_calls(2, within=5)


async def test_a_command_change_applies_from_the_next_run(world: World) -> None:
    await world.create_pod("g", labels={"app": "game"})
    world.script.set("g", "app", "busy", ExecReply(1, b"busy\n"))
    await world.apply_marker(marker("m", probes=[flag("idle", command="idle")]))
    async with running_daemon(world.sim):
        await world.wait_pod("g", lambda p: labels_of(p).get("idle") == "yes")
        await world.apply_marker(marker("m", probes=[flag("idle", command="busy")]))
        await world.wait_pod("g", lambda p: labels_of(p).get("idle") == "no")


async def test_deleting_marker_way_leaves_gateway_alone(world: World) -> None:
    await world.create_pod("g", labels={"app": "game"})
    await world.apply_marker(marker("way", probes=[flag("w", condition="x.io/way")]))
    await world.apply_marker(marker("gateway", probes=[flag("gw", condition="x.io/gateway")]))
    async with running_daemon(world.sim):
        await world.wait_pod("g", lambda p: {"w", "gw"} <= set(labels_of(p)))
        await world.delete_marker("way")
        pod = await world.wait_pod("g", lambda p: "w" not in labels_of(p))
        assert labels_of(pod)["gw"] == "yes"
        assert condition(pod, "x.io/gateway") is not None
        assert condition(pod, "x.io/way") is None
        await world.script.wait_calls(2)
        assert labels_of(world.pod("g"))["gw"] == "yes"


async def test_a_pod_relabelled_out_of_the_selector_is_cleaned_up(world: World) -> None:
    await world.create_pod("g", labels={"app": "game", "team": "a"})
    await world.apply_marker(marker("m", probes=[flag("idle", condition="game.io/idle")]))
    async with running_daemon(world.sim):
        await world.wait_pod("g", lambda p: "idle" in labels_of(p))
        await world.label("g", {"app": "other"})
        pod = await world.wait_pod(
            "g", lambda p: "idle" not in labels_of(p) and OWNED not in annotations_of(p)
        )
        assert condition(pod, "game.io/idle") is None
        assert labels_of(pod) == {"app": "other", "team": "a"}
        calls = len(world.script.calls)
        await anyio.sleep(1.5)
        assert len(world.script.calls) == calls  # no longer probed


async def test_a_marker_deleted_while_the_daemon_was_down_is_cleaned_up(world: World) -> None:
    await world.create_pod("g", labels={"app": "game"})
    await world.apply_marker(marker("m", probes=[flag("idle", condition="game.io/idle")]))
    async with running_daemon(world.sim):
        await world.wait_pod("g", lambda p: "idle" in labels_of(p))
    await world.delete_marker("m")
    async with running_daemon(world.sim):
        pod = await world.wait_pod(
            "g", lambda p: "idle" not in labels_of(p) and condition(p, "game.io/idle") is None
        )
    assert OWNED not in annotations_of(pod)


async def test_unknown_is_never_written(world: World) -> None:
    await world.create_pod("g", labels={"app": "game"})
    await world.apply_marker(marker("m", probes=[flag("idle", condition="game.io/idle")]))
    async with running_daemon(world.sim):
        await world.wait_pod("g", lambda p: labels_of(p).get("idle") == "yes")
        writes = world.pod_writes()
        rule = world.sim.faults.fail_requests(code=500, resource="pods", subresource="exec")
        world.script.set("g", "app", "check", ExecReply(1, b"", b"would fail\n"))
        await world.sim.accounting.wait_for(at_least=3, code=500, subresource="exec", within=10)
        assert world.pod_writes() == writes
        assert labels_of(world.pod("g"))["idle"] == "yes"
        world.sim.faults.remove(rule)
        await world.wait_pod("g", lambda p: labels_of(p).get("idle") == "no")


async def test_every_request_is_allowed_by_the_projects_role(world: World) -> None:
    await world.create_pod("g", labels={"app": "game"})
    await world.apply_marker(marker("m", probes=[flag("idle", condition="game.io/idle")]))
    world.sim.accounting.reset()
    async with running_daemon(world.sim):
        await world.wait_pod("g", lambda p: "idle" in labels_of(p))
        await world.delete_marker("m")
        await world.wait_pod("g", lambda p: "idle" not in labels_of(p))
    daemon = [
        r
        for r in world.sim.accounting.records
        if r.resource != "podprobemarkers" or r.verb != "delete"
    ]
    assert len(daemon) == len(world.sim.accounting.records) - 1  # only the test's own delete
    assert disallowed(daemon) == []
