"""A hanging exec probe never runs two commands at once in a container (issue 23, 1).

On a real cluster a command outlives its exec stream (containerd's streaming exec
ignores the client going away), and the sim now plays that: a probe `sleep` with
timeoutSeconds 1 used to pile one command per period into the container (13 at
24 s on a real node). The daemon holds the timed-out stream until the command ends
and skips the probe's periods meanwhile; the timeout is still reported at once.

Issue 30: the hold outlives the daemon through the pod's record (a restarted daemon
does not start the command again beside the one still running), and belongs to the
command (an edited command runs at the next period).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from probemarker.sim.exec.runners import ExecIO, ExecRequest
from tests.integration.world import (
    NS,
    World,
    eventually,
    flag,
    labels_of,
    marker,
    running_daemon,
)

OWNED = "probemarker.io/owned"


class Sleeper:
    """A stream handler that plays `sleep N`: counts the commands running at once."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.running = 0
        self.most = 0
        self.started = 0
        self.ended = 0

    async def __call__(self, request: ExecRequest, io: ExecIO) -> int:
        self.running += 1
        self.started += 1
        self.most = max(self.most, self.running)
        try:
            await asyncio.sleep(self.seconds)  # runs on after its client has gone
        finally:
            self.running -= 1
            self.ended += 1
        return 0


async def test_a_hanging_command_is_never_run_twice_at_once(world: World) -> None:
    sleeper = Sleeper(3.0)
    await world.create_pod("gs-1", labels={"app": "game"})
    world.sim.exec_handlers.register_stream(NS, "gs-1", "app", sleeper)
    await world.apply_marker(marker("m", probes=[flag("idle", timeout=1, period=1)]))
    async with running_daemon(world.sim) as daemon:
        # The timeout is reported at the deadline, not when the command ends.
        await world.wait_pod("gs-1", lambda p: labels_of(p).get("idle") == "no")
        assert sleeper.ended == 0
        assert daemon.exec is not None
        holds, engine = daemon.exec.holds, daemon.engine
        assert holds.held == 1
        await eventually(lambda: sleeper.ended >= 3, within=20)  # one after the other
        assert sleeper.most == 1, f"{sleeper.most} commands ran at once in the container"
        assert holds.stats.held_total >= 3
        assert holds.stats.ended >= 2
        assert engine.stats.periods_skipped >= 3  # ~2 periods per 3 s command
        assert not holds.stats.limit_hits
        assert labels_of(world.pod("gs-1"))["idle"] == "no"  # skipped periods decide nothing
    assert sleeper.most == 1


async def test_the_hold_limit_gives_a_held_stream_up_and_counts_it(world: World) -> None:
    sleeper = Sleeper(30.0)
    await world.create_pod("gs-1", labels={"app": "game"})
    world.sim.exec_handlers.register_stream(NS, "gs-1", "app", sleeper)
    await world.apply_marker(marker("m", probes=[flag("idle", timeout=1, period=1)]))
    async with running_daemon(world.sim, exec_hold_seconds=1.5) as daemon:
        assert daemon.exec is not None
        holds = daemon.exec.holds
        await eventually(lambda: holds.stats.limit_hits["time"] >= 1)
        # Given up after the limit: the probe runs again (its command may still run;
        # the limit bounds how long a probe is silenced, docs/kube-exec.md).
        await eventually(lambda: sleeper.started >= 2)
        assert holds.stats.ended == 0


def held_member(pod: dict[str, Any]) -> Any:
    """The `h` of the probe's entry in the pod's record (None: none)."""
    text = pod["metadata"].get("annotations", {}).get(OWNED)
    return None if text is None else json.loads(text).get("m#idle", {}).get("h")


async def test_a_restarted_daemon_does_not_run_a_held_command_again(world: World) -> None:
    sleeper = Sleeper(3.0)
    await world.create_pod("gs-1", labels={"app": "game"})
    world.sim.exec_handlers.register_stream(NS, "gs-1", "app", sleeper)
    await world.apply_marker(marker("m", probes=[flag("idle", timeout=1, period=1)]))
    async with running_daemon(world.sim, exec_hold_seconds=5) as daemon:
        # the timeout and the hold, in one write
        pod = await world.wait_pod("gs-1", lambda p: held_member(p) is not None)
        assert labels_of(pod)["idle"] == "no"
        held = held_member(pod)
        assert set(held) == {"c", "d", "t"}
    writes = world.pod_writes()
    assert sleeper.running == 1  # the daemon is gone, its command runs on
    async with running_daemon(world.sim, exec_hold_seconds=5) as daemon:
        assert daemon.exec is not None
        holds = daemon.exec.holds
        assert holds.stats.seeded == 1
        await eventually(lambda: sleeper.ended == 1, within=5)
        assert sleeper.started == 1  # not beside it: the record said it may still run
        assert world.pod_writes() == writes  # seeded: nothing written
        # The new daemon cannot see the command end: the limit, from the recorded
        # start, ends the hold; then the probe runs again, and the record follows.
        await eventually(lambda: sleeper.started == 2, within=8)
        await world.wait_pod("gs-1", lambda p: held_member(p) != held)
    assert sleeper.most == 1
    assert holds.stats.limit_hits["time"] >= 1


class Commands:
    """A stream handler: `hang` sleeps (runs on after its client has gone), anything
    else exits 0 at once."""

    def __init__(self) -> None:
        self.hanging = 0

    async def __call__(self, request: ExecRequest, io: ExecIO) -> int:
        if request.command[:1] == ("hang",):
            self.hanging += 1
            try:
                await asyncio.sleep(30)
            finally:
                self.hanging -= 1
        return 0


async def test_an_edited_command_runs_at_the_next_period_beside_the_held_one(
    world: World,
) -> None:
    commands = Commands()
    await world.create_pod("gs-1", labels={"app": "game"})
    world.sim.exec_handlers.register_stream(NS, "gs-1", "app", commands)
    hanging = flag("idle", command="hang", timeout=1, period=1)
    await world.apply_marker(marker("m", probes=[hanging]))
    async with running_daemon(world.sim) as daemon:
        assert daemon.exec is not None
        holds = daemon.exec.holds
        await world.wait_pod("gs-1", lambda p: labels_of(p).get("idle") == "no")
        assert holds.held == 1
        fixed = flag("idle", command="ok", timeout=1, period=1)
        await world.apply_marker(marker("m", probes=[fixed]))
        # the next period (1 s), not the old command's end (30 s)
        pod = await world.wait_pod("gs-1", lambda p: labels_of(p).get("idle") == "yes", within=4)
        assert held_member(pod) is None  # the new command holds nothing
        assert commands.hanging == 1  # the old one runs on, still held and counted
        assert holds.held == 1
