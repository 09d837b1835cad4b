"""A hanging exec probe never runs two commands at once in a container (issue 23, 1).

On a real cluster a command outlives its exec stream (containerd's streaming exec
ignores the client going away), and the sim now plays that: a probe `sleep` with
timeoutSeconds 1 used to pile one command per period into the container (13 at
24 s on a real node). The daemon holds the timed-out stream until the command ends
and skips the probe's periods meanwhile; the timeout is still reported at once.

Issue 30: the hold outlives the daemon through the pod's record (a restarted daemon
does not start the command again beside the one still running), and belongs to the
command (an edited command runs at the next period).

Issue 43, 3 ("a slow run is not a write"): the record holds a command only once a run
of it came due while it still ran. A command that outlives its timeout by less than a
period (an exec through a loaded API server) costs no write; one still running at
its next run costs one write then and one at its end.
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
    history,
    labels_of,
    marker,
    running_daemon,
)

OWNED = "probemarker.io/owned"


class Sleeper:
    """A stream handler that plays `sleep N`: counts the commands running at once.
    `then`: the seconds of every command after the first (default: the same); `code`:
    the exit code of each."""

    def __init__(self, seconds: float, *, then: float | None = None, code: int = 0) -> None:
        self.seconds = seconds
        self.then = seconds if then is None else then
        self.code = code
        self.running = 0
        self.most = 0
        self.started = 0
        self.ended = 0

    async def __call__(self, request: ExecRequest, io: ExecIO) -> int:
        self.running += 1
        self.started += 1
        self.most = max(self.most, self.running)
        try:
            # runs on after its client has gone
            await asyncio.sleep(self.seconds if self.started == 1 else self.then)
        finally:
            self.running -= 1
            self.ended += 1
        return self.code


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


def collapsed(values: list[Any]) -> list[Any]:
    """`values` with each run of equal neighbours kept once."""
    return [v for i, v in enumerate(values) if i == 0 or v != values[i - 1]]


async def test_a_command_that_ends_within_a_period_of_its_timeout_costs_no_write(
    world: World,
) -> None:
    """Issue 43, 3: on a loaded node each exec that took 1.2 s against timeoutSeconds 1
    wrote the hold onto the pod and removed it a moment later (42 pod writes a minute
    with nothing changing). Its command ends before its next run is due: no record."""
    sleeper = Sleeper(1.5)  # half a second past its timeout, 1.5 s before its next run
    await world.create_pod("gs-1", labels={"app": "game"})
    world.sim.exec_handlers.register_stream(NS, "gs-1", "app", sleeper)
    await world.apply_marker(marker("m", probes=[flag("idle", timeout=1, period=3)]))
    async with history(world, "gs-1") as seen, running_daemon(world.sim) as daemon:
        await world.wait_pod("gs-1", lambda p: labels_of(p).get("idle") == "no")
        assert daemon.exec is not None
        holds = daemon.exec.holds
        await eventually(lambda: holds.stats.ended >= 3, within=15)  # three runs, each held
        assert daemon.engine.stats.periods_skipped == 0
        assert holds.stats.recorded == 0
    assert world.pod_writes() == 1  # the timeout's result, and nothing else
    assert [held_member(p) for p in seen if held_member(p) is not None] == []
    assert sleeper.most == 1  # held all the same: never two at once


async def test_a_command_running_at_its_next_run_is_recorded_once_and_removed_once(
    world: World,
) -> None:
    """A command that still runs when its next run is due (that run is skipped) goes on
    the record then, in a write of its own, and comes off it when it ends."""
    # through two due runs, then `false` at once: Failed throughout, one transition
    sleeper = Sleeper(3.5, then=0.0, code=1)
    await world.create_pod("gs-1", labels={"app": "game"})
    world.sim.exec_handlers.register_stream(NS, "gs-1", "app", sleeper)
    await world.apply_marker(marker("m", probes=[flag("idle", timeout=1, period=1)]))
    async with history(world, "gs-1") as seen, running_daemon(world.sim) as daemon:
        await eventually(lambda: sleeper.started >= 3, within=15)  # two runs after its end
        assert daemon.exec is not None
        holds, engine = daemon.exec.holds, daemon.engine
    first = next(p for p in seen if labels_of(p).get("idle") == "no")
    assert held_member(first) is None  # the timeout's write holds no hold
    held = [h for h in collapsed([held_member(p) for p in seen]) if h is not None]
    assert len(held) == 1  # on the record once
    assert held_member(seen[-1]) is None  # and off it
    assert world.pod_writes() == 3  # the timeout's result; the hold; its end
    assert engine.stats.periods_skipped >= 1
    assert holds.stats.recorded == 1
    assert sleeper.most == 1


async def test_a_restarted_daemon_does_not_run_a_held_command_again(world: World) -> None:
    sleeper = Sleeper(5.0)
    await world.create_pod("gs-1", labels={"app": "game"})
    world.sim.exec_handlers.register_stream(NS, "gs-1", "app", sleeper)
    await world.apply_marker(marker("m", probes=[flag("idle", timeout=1, period=1)]))
    async with (
        history(world, "gs-1") as seen,
        running_daemon(world.sim, exec_hold_seconds=8) as daemon,
    ):
        # the timeout first; the hold once a run was skipped for it (issue 43)
        pod = await world.wait_pod("gs-1", lambda p: held_member(p) is not None)
        assert daemon.engine.stats.periods_skipped >= 1
        held = held_member(pod)
        assert set(held) == {"c", "d", "t"}
    assert held_member(next(p for p in seen if labels_of(p).get("idle") == "no")) is None
    writes = world.pod_writes()
    assert sleeper.running == 1  # the daemon is gone, its command runs on
    async with running_daemon(world.sim, exec_hold_seconds=8) as daemon:
        assert daemon.exec is not None
        holds = daemon.exec.holds
        assert holds.stats.seeded == 1
        await eventually(lambda: sleeper.ended == 1, within=6)
        assert sleeper.started == 1  # not beside it: the record said it may still run
        assert world.pod_writes() == writes  # seeded: nothing written
        # The new daemon cannot see the command end: the limit, from the recorded
        # start, ends the hold; then the probe runs again, and the record follows.
        await eventually(lambda: sleeper.started == 2, within=8)
        await world.wait_pod("gs-1", lambda p: held_member(p) != held)
    assert sleeper.most == 1
    assert holds.stats.limit_hits["time"] >= 1


async def test_a_daemon_restarted_before_a_run_was_skipped_starts_at_most_one_more_copy(
    world: World,
) -> None:
    """The trade-off of issue 43 (probe/holds.py): a daemon stopped after a timeout and
    before the command's next run was due left no record of the hold, so the next one
    starts the command once more beside it; that copy is recorded at its next due run
    like any other, so a third daemon starts none: one more copy, never a pile."""
    sleeper = Sleeper(9.0)
    await world.create_pod("gs-1", labels={"app": "game"})
    world.sim.exec_handlers.register_stream(NS, "gs-1", "app", sleeper)
    await world.apply_marker(marker("m", probes=[flag("idle", timeout=1, period=3)]))
    async with running_daemon(world.sim) as daemon:
        assert daemon.exec is not None
        holds = daemon.exec.holds
        await eventually(lambda: holds.held == 1)  # timed out; its next run 2 s away
    assert held_member(world.pod("gs-1")) is None  # stopped before a run was skipped
    async with running_daemon(world.sim) as daemon:
        await eventually(lambda: sleeper.started == 2)  # one more copy, beside the first
        await world.wait_pod("gs-1", lambda p: held_member(p) is not None, within=8)
    async with running_daemon(world.sim) as daemon:
        assert daemon.exec is not None
        assert daemon.exec.holds.stats.seeded == 1
        await eventually(lambda: sleeper.ended == 2, within=12)
        assert sleeper.started == 2  # no third
    assert sleeper.most == 2


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
