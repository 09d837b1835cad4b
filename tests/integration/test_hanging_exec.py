"""A hanging exec probe never runs two commands at once in a container (issue 23, 1).

On a real cluster a command outlives its exec stream (containerd's streaming exec
ignores the client going away), and the sim now plays that: a probe `sleep` with
timeoutSeconds 1 used to pile one command per period into the container (13 at
24 s on a real node). The daemon holds the timed-out stream until the command ends
and skips the probe's periods meanwhile; the timeout is still reported at once.
"""

from __future__ import annotations

import asyncio

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
