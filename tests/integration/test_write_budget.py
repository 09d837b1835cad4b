"""Events never delay a status write (issue 15, 11): they have a budget of their own."""

from __future__ import annotations

import anyio

from probemarker.sim.exec.runners import ExecReply
from tests.integration.world import World, flag, labels_of, marker, running_daemon

PODS = 6


async def create_pods(world: World) -> None:
    async with anyio.create_task_group() as group:
        for i in range(PODS):
            group.start_soon(lambda n=f"g{i}": world.create_pod(n, labels={"app": "game"}))


async def test_events_take_no_token_of_the_status_writes(world: World) -> None:
    # A write budget of exactly one burst for the pods' first writes, refilled slowly: a
    # write that has to wait for a token waits 5 s. Each pod's first result is a
    # transition, so an event too; events are recorded at once, before the writer's
    # coalescing window ends. Sharing the bucket, they took its tokens first.
    await create_pods(world)
    await world.apply_marker(marker("m", probes=[flag("idle")]))
    async with running_daemon(world.sim, write_qps=0.2, write_burst=PODS) as daemon:
        for i in range(PODS):
            await world.wait_pod(f"g{i}", lambda p: labels_of(p).get("idle") == "yes", within=4)
        # One token per pod, none of which had to be waited for.
        assert (daemon.limiter.granted, daemon.limiter.waited) == (PODS, 0)


async def test_a_starved_event_budget_delays_no_status_write(world: World) -> None:
    await create_pods(world)
    await world.apply_marker(marker("m", probes=[flag("idle")]))
    # One event, then one every 100 s: every other event waits, no status write does.
    # (The shutdown gives the queued events half a second, then leaves them.)
    starved = {"event_qps": 0.01, "event_burst": 1, "shutdown_grace_seconds": 0.5}
    async with running_daemon(world.sim, **starved) as daemon:
        for i in range(PODS):
            await world.wait_pod(f"g{i}", lambda p: labels_of(p).get("idle") == "yes", within=4)
        world.script.set("g0", "app", "check", ExecReply(1, b"", b"busy\n"))
        await world.wait_pod("g0", lambda p: labels_of(p).get("idle") == "no", within=4)
        assert (daemon.limiter.granted, daemon.limiter.waited) == (PODS + 1, 0)
        events = daemon.events.stats
        assert (daemon.event_limiter.granted, events.created, events.dropped) == (1, 1, 0)
        assert daemon.event_limiter.waiting == 1  # the sender, with the rest queued
