"""The API server misbehaving: no pod becomes Failed because of it, every result lands
after it recovers, and no change is missed when watches break or history is lost."""

from __future__ import annotations

import anyio

from probemarker.sim.exec.runners import ExecReply
from tests.integration.world import World, eventually, flag, labels_of, marker, running_daemon


async def test_500_and_429_for_a_while_then_results_land(world: World) -> None:
    for name in ("g0", "g1"):
        await world.create_pod(name, labels={"app": "game"})
    await world.apply_marker(marker("m", probes=[flag("idle")]))
    async with running_daemon(world.sim) as daemon:
        for name in ("g0", "g1"):
            await world.wait_pod(name, lambda p: labels_of(p).get("idle") == "yes")
        exec_rule = world.sim.faults.fail_requests(code=500, subresource="exec")
        patch_rule = world.sim.faults.fail_requests(code=429, subresource="status", retry_after=1)
        world.script.set("g0", "app", "check", ExecReply(1, b"busy\n"))
        await world.sim.accounting.wait_for(at_least=4, code=500, subresource="exec", within=10)
        assert labels_of(world.pod("g0"))["idle"] == "yes"  # Unknown: nothing changed
        world.sim.faults.remove(exec_rule)  # the probe now fails; its write gets 429s
        await world.sim.accounting.wait_for(at_least=2, code=429, subresource="status", within=10)
        assert labels_of(world.pod("g0"))["idle"] == "yes"
        world.sim.faults.remove(patch_rule)
        await world.wait_pod("g0", lambda p: labels_of(p).get("idle") == "no")
        assert labels_of(world.pod("g1"))["idle"] == "yes"  # never Failed by the outage
        assert daemon.writer.stats.failures.get("ApiTooManyRequests", 0) >= 2


async def test_server_down_for_30_seconds(world: World) -> None:
    await world.create_pod("g", labels={"app": "game"})
    await world.apply_marker(marker("m", probes=[flag("idle")]))
    async with running_daemon(world.sim):
        await world.wait_pod("g", lambda p: labels_of(p).get("idle") == "yes")
        world.script.set("g", "app", "check", ExecReply(1, b"busy\n"))
        with anyio.fail_after(40):
            await world.sim.faults.outage(30)
        # During the outage every exec failed to connect: Unknown, nothing written.
        await world.wait_pod("g", lambda p: labels_of(p).get("idle") == "no", within=40)


async def test_watches_closed_and_history_dropped_miss_nothing(world: World) -> None:
    await world.apply_marker(marker("m", probes=[flag("idle")]))
    async with running_daemon(world.sim):

        async def chaos() -> None:
            while True:
                await anyio.sleep(0.3)
                world.sim.faults.close_watches(abrupt=True)
                world.sim.faults.drop_history()

        async with anyio.create_task_group() as group:
            group.start_soon(chaos)
            for i in range(6):
                await world.create_pod(f"g{i}", labels={"app": "game"})
            await world.apply_marker(marker("n", probes=[flag("ready", command="ready")]))
            await world.label("g0", {"app": "other"})
            for i in range(1, 6):
                await world.wait_pod(
                    f"g{i}",
                    lambda p: {"idle", "ready"} <= set(labels_of(p)),
                    within=20,
                )
            await world.wait_pod(
                "g0", lambda p: not {"idle", "ready"} & set(labels_of(p)), within=20
            )
            group.cancel_scope.cancel()


async def test_a_conflict_rereads_the_pod_and_lands(world: World) -> None:
    await world.create_pod("g", labels={"app": "game"})
    world.sim.faults.fail_requests(code=409, subresource="status", times=2)
    await world.apply_marker(marker("m", probes=[flag("idle")]))
    async with running_daemon(world.sim) as daemon:
        await world.wait_pod("g", lambda p: labels_of(p).get("idle") == "yes")
        assert daemon.writer.stats.rereads == 2
        assert world.sim.accounting.count(verb="get", resource="pods", subresource="") == 2


async def test_an_api_server_restart_writes_nothing_on_steady_pods(world: World) -> None:
    """The daemon's side of tests/cluster/test_disruption.py's API server restart: the
    server goes away (connections refused, watches cut) while probes run (Unknown: their
    execs cannot connect), and comes back with its history; the daemon watches again,
    writes nothing and changes no pod, and follows a change afterwards."""
    names = ("g0", "g1")
    for name in names:
        await world.create_pod(name, labels={"app": "game"})
    await world.apply_marker(marker("m", probes=[flag("idle", condition="game.io/idle")]))
    async with running_daemon(world.sim) as daemon:
        for name in names:
            await world.wait_pod(name, lambda p: labels_of(p).get("idle") == "yes")
        await eventually(lambda: daemon.writer.depth == 0)
        writes = world.pod_writes()
        versions = {n: world.pod(n)["metadata"]["resourceVersion"] for n in names}
        unknown = daemon.engine.stats.runs[("exec", "Unknown")]
        watches = [daemon.pods.counters.watches, daemon.markers.counters.watches]

        async def probes_fail_to_connect() -> None:
            await eventually(lambda: daemon.engine.stats.runs[("exec", "Unknown")] >= unknown + 2)

        with anyio.fail_after(20):
            await world.sim.faults.outage(0, during=probes_fail_to_connect)
        await eventually(  # both informers watch again
            lambda: (
                daemon.pods.counters.watches > watches[0]
                and daemon.markers.counters.watches > watches[1]
            ),
            within=20,
        )
        await world.script.wait_calls(2 * len(names))  # every probe ran again since
        await eventually(lambda: daemon.writer.depth == 0)
        assert world.pod_writes() == writes
        assert {n: world.pod(n)["metadata"]["resourceVersion"] for n in names} == versions
        world.script.set("g0", "app", "check", ExecReply(1, b"busy\n"))
        await world.wait_pod("g0", lambda p: labels_of(p).get("idle") == "no")
        assert world.pod_writes() == writes + 1
