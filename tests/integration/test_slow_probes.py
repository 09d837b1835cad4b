"""Slow exec probes do not starve the node (issue 15, 2): exec streams never take the
connections of the watches, status patches and events."""

from __future__ import annotations

import anyio

from probemarker.sim.exec.runners import ExecReply, ExecRequest
from tests.integration.world import NS, World, flag, labels_of, marker, running_daemon

SLOW_PODS = 40  # more execs at once than the old shared pool of 32, fewer than the cap of 64


class Hanging:
    """An exec handler that answers only once released; counts the sessions it holds."""

    def __init__(self) -> None:
        self.open = 0
        self.release = anyio.Event()
        self._changed = anyio.Event()

    async def __call__(self, request: ExecRequest) -> ExecReply:
        self._bump(1)
        try:
            await self.release.wait()
        finally:
            self._bump(-1)
        return ExecReply(0, b"done\n")

    def _bump(self, by: int) -> None:
        self.open += by
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_open(self, n: int, *, within: float) -> None:
        with anyio.fail_after(within):
            while self.open < n:
                await self._changed.wait()


async def test_slow_execs_leave_another_markers_flip_and_its_writes_alone(world: World) -> None:
    hanging = Hanging()
    await world.create_pod("fast", labels={"app": "fast"})
    for start in range(0, SLOW_PODS, 20):
        async with anyio.create_task_group() as group:
            for i in range(start, start + 20):
                group.start_soon(lambda n=f"slow-{i}": world.create_pod(n, labels={"app": "slow"}))
    for i in range(SLOW_PODS):
        world.sim.exec_handlers.register(NS, f"slow-{i}", "app", hanging)
    fast = marker("fast", probes=[flag("ready")], selector={"matchLabels": {"app": "fast"}})
    await world.apply_marker(fast)
    async with running_daemon(world.sim) as daemon:
        await world.wait_pod("fast", lambda p: labels_of(p).get("ready") == "yes")
        # Checks that take as long as their timeout allows (the 29 s of 30).
        slow = flag("busy", timeout=30)
        await world.apply_marker(
            marker("slow", probes=[slow], selector={"matchLabels": {"app": "slow"}})
        )
        try:
            await hanging.wait_open(30, within=10)  # as many as the old pool could hold
            world.script.set("fast", "app", "check", ExecReply(1, b"", b"not ready\n"))
            await world.wait_pod("fast", lambda p: labels_of(p).get("ready") == "no", within=5)
            await world.wait_event("ProbeFailed", within=5)
            await hanging.wait_open(SLOW_PODS, within=5)  # every slow exec runs, none waits
            engine, dispatcher = daemon.engine, daemon.engine.dispatcher
            assert engine.stats.runs[("exec", "Unknown")] == 0
            assert daemon.writer.stats.failures == {}
            assert daemon.events.stats.failed == 0
            assert (dispatcher.stats.late, dispatcher.stats.slot_waits) == (0, 0)
        finally:
            hanging.release.set()


async def test_a_daemon_runs_its_probes_on_its_phase_steps(world: World) -> None:
    # Issue 43: --probe-phase-step-seconds reaches the engine; every probe's slot lies
    # on the steps of the daemon's monotonic clock, so at most 2 moments a second here.
    for i in range(6):
        await world.create_pod(f"g{i}", labels={"app": "game"})
    await world.apply_marker(marker("m", probes=[flag("up")]))
    async with running_daemon(world.sim, probe_phase_step_seconds=0.5) as daemon:
        for i in range(6):
            await world.wait_pod(f"g{i}", lambda p: labels_of(p).get("up") == "yes")
        engine = daemon.engine
        assert engine.settings.phase_step == 0.5
        dues = [engine.dispatcher.due(key) for key in engine._probes]
        assert len(dues) == 6
        halves = {round(due % 1, 6) for due in dues if due is not None}
        assert halves <= {0.0, 0.5, 1.0}, dues
