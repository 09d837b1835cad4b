"""One node, many tenants (issue 40): no namespace slows, wedges or hides another's exec
probes, and a command is never started twice at once in a container, whatever probe
runs it.

Each namespace here is a tenant: it has pods on the node and markers of its own. The
flooding one hangs exec commands (they run on after their client has gone, as on a
real cluster) by the dozen.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from probemarker.sim.exec.runners import ExecIO, ExecRequest
from tests.integration.world import (
    NS,
    OWNED,
    World,
    eventually,
    flag,
    labels_of,
    marker,
    running_daemon,
)

FLOOD = "flood"  # the namespace that hangs commands


class Commands:
    """A stream handler: `hang` sleeps 30 s (running on after its client has gone),
    `slow` sleeps `slow` seconds the first time and none after, anything else exits 0
    at once. Counts what runs at once."""

    def __init__(self, *, slow: float = 0.0) -> None:
        self.slow = slow
        self.hanging = 0
        self.most = 0
        self.started: list[tuple[str, ...]] = []

    async def __call__(self, request: ExecRequest, io: ExecIO) -> int:
        self.started.append(request.command)
        word = request.command[:1]
        if word == ("hang",):
            self.hanging += 1
            self.most = max(self.most, self.hanging)
            try:
                await asyncio.sleep(30)
            finally:
                self.hanging -= 1
        elif word == ("slow",) and self.started.count(request.command) == 1:
            await asyncio.sleep(self.slow)
        return 0


class Busy:
    """A stream handler whose command takes `seconds` (within its timeout); `code` is
    its exit code."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.code = 0

    async def __call__(self, request: ExecRequest, io: ExecIO) -> int:
        await asyncio.sleep(self.seconds)
        return self.code


async def create_pod_in(world: World, namespace: str, name: str, handler: Commands | Busy) -> None:
    world.sim.exec_handlers.register_stream(namespace, name, "app", handler)
    await world.create_pod_in(namespace, name)


def owned(pod: dict[str, Any]) -> dict[str, Any]:
    text = pod["metadata"].get("annotations", {}).get(OWNED)
    return {} if text is None else dict(json.loads(text))


async def test_a_renamed_probe_does_not_start_its_held_command_again(world: World) -> None:
    """Issue 40, 2: each rename of a probe whose command hangs started one more copy."""
    commands = Commands()
    await create_pod_in(world, NS, "gs-1", commands)
    hanging: dict[str, Any] = {"command": "hang", "timeout": 1, "period": 1}
    await world.apply_marker(marker("m", probes=[flag("idle", **hanging)]))
    async with running_daemon(world.sim, exec_hold_seconds=20) as daemon:
        assert daemon.exec is not None
        await world.wait_pod("gs-1", lambda p: labels_of(p).get("idle") == "no")
        assert commands.hanging == 1
        for name in ("idle-2", "idle-3"):  # the same command under a new name
            await world.apply_marker(marker("m", probes=[flag(name, **hanging)]))
            # the record follows: the new name's entry holds the command
            await world.wait_pod("gs-1", lambda p: "h" in owned(p).get(f"m#{name}", {}))  # noqa: B023
            await asyncio.sleep(2.5)  # two periods and more
            assert commands.hanging == 1, "a renamed probe started its held command again"
        assert daemon.exec.holds.held == 1
    assert commands.most == 1


async def test_a_probe_renamed_while_the_daemon_was_down_waits_for_the_held_command(
    world: World,
) -> None:
    commands = Commands()
    await create_pod_in(world, NS, "gs-1", commands)
    hanging: dict[str, Any] = {"command": "hang", "timeout": 1, "period": 1}
    await world.apply_marker(marker("m", probes=[flag("idle", **hanging)]))
    async with running_daemon(world.sim, exec_hold_seconds=20):
        await world.wait_pod("gs-1", lambda p: "h" in owned(p).get("m#idle", {}))
    await world.apply_marker(marker("m", probes=[flag("renamed", **hanging)]))
    async with running_daemon(world.sim, exec_hold_seconds=20) as daemon:
        assert daemon.exec is not None
        assert daemon.exec.holds.stats.seeded == 1  # from the old name's entry
        await world.wait_pod("gs-1", lambda p: "h" in owned(p).get("m#renamed", {}))
        await asyncio.sleep(2.5)
        assert commands.hanging == 1
    assert commands.most == 1


async def test_two_probes_with_one_command_on_a_container_never_run_it_twice(
    world: World,
) -> None:
    commands = Commands()
    await create_pod_in(world, NS, "gs-1", commands)
    probes = [flag(name, command="hang", timeout=1, period=1) for name in ("a", "b", "c")]
    await world.apply_marker(marker("m", probes=probes))
    async with running_daemon(world.sim, exec_hold_seconds=20) as daemon:
        # the probe that ran first decides; the others wait for the command as it does
        await world.wait_pod("gs-1", lambda p: "no" in labels_of(p).values())
        await asyncio.sleep(3)
        assert daemon.engine.stats.periods_skipped >= 3
        pod = world.pod("gs-1")
        record = owned(pod)
        # one hold, named in the entry of every probe that runs the command
        assert record["m#a"]["h"] == record["m#b"]["h"] == record["m#c"]["h"]
    assert commands.most == 1
    assert len(commands.started) == 1


async def test_a_namespace_filling_the_held_streams_leaves_another_its_share(
    world: World,
) -> None:
    """Issue 40, 1: a namespace filled the held streams with hanging commands; another
    namespace's command that outlived its timeout by half a second was then held by
    time for the whole limit, its probe Failed all that while (a readiness gate on it
    kept its pod out of its Service for 10 minutes)."""
    flood = Commands()
    await world.create_namespace(FLOOD)
    for i in range(4):
        await create_pod_in(world, FLOOD, f"f-{i}", flood)
    await world.create_marker_in(
        FLOOD, marker("m", probes=[flag("idle", command="hang", timeout=1, period=1)])
    )
    theirs = Commands(slow=1.5)
    await create_pod_in(world, NS, "gs-1", theirs)
    async with running_daemon(world.sim, exec_hold_seconds=30, max_held_exec_streams=4) as daemon:
        assert daemon.exec is not None
        holds = daemon.exec.holds
        await eventually(lambda: holds.held == 4)  # every stream the flood's
        await world.apply_marker(
            marker("m", probes=[flag("ready", command="slow", timeout=1, period=1)])
        )
        # The timeout first, then the command ends (1.5 s): its probe runs again and passes.
        await world.wait_pod("gs-1", lambda p: labels_of(p).get("ready") == "no", within=5)
        await world.wait_pod("gs-1", lambda p: labels_of(p).get("ready") == "yes", within=5)
        assert holds.stats.limit_hits["share"] == 1  # one flood stream gave way
        assert holds.stats.ended >= 1
        assert flood.most == 4  # the flood's commands: each still held, by time or stream


async def test_a_namespace_filling_the_slots_does_not_slow_another(world: World) -> None:
    """Issue 40, 3: while a namespace's slow probes filled --max-concurrent-probes,
    another namespace's runs queued behind their backlog (6.7 s slot waits, a flip's
    p99 from 1.05 s to 3.15 s on the sim)."""
    slow = Busy(2.9)  # each run takes a slot for 2.9 s, and comes due again at once
    await world.create_namespace(FLOOD)
    for i in range(24):
        await create_pod_in(world, FLOOD, f"f-{i}", slow)
    await world.create_marker_in(FLOOD, marker("m", probes=[flag("busy", timeout=3, period=1)]))
    theirs = Busy(0.0)
    await create_pod_in(world, NS, "gs-1", theirs)
    await world.apply_marker(marker("m", probes=[flag("ready", period=1)]))
    async with running_daemon(world.sim, max_concurrent_probes=8) as daemon:
        dispatcher = daemon.engine.dispatcher
        await world.wait_pod("gs-1", lambda p: labels_of(p).get("ready") == "yes")
        await eventually(lambda: dispatcher.waiting_by_flow().get(FLOOD, 0) >= 8)
        assert dispatcher.running_by_flow()[FLOOD] == 6  # 8 less a quarter
        flips = []
        for code, label in ((1, "no"), (0, "yes"), (1, "no")):
            theirs.code = code
            started = asyncio.get_running_loop().time()
            await world.wait_pod("gs-1", lambda p: labels_of(p).get("ready") == label)  # noqa: B023
            flips.append(asyncio.get_running_loop().time() - started)
        # a period (1 s) and the write: never the flood's backlog (3 to 6 s before)
        assert max(flips) < 2.0, flips
        assert dispatcher.stats.slot_wait_max_by_flow.get(NS, 0.0) < 0.2
        assert dispatcher.stats.slot_waits_by_flow[FLOOD] > 0  # the flood waits for its own
