"""The dispatcher on a manual clock: runs at their due times, wake-up on an earlier
entry, the cap with exact counts, late runs and waits for a slot counted apart, one run per key at a time, cancel,
stop with grace, a raising callback, and cancellation of `run()` leaving nothing behind."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest

from probemarker.schedule.dispatcher import Dispatcher, flow_limit
from tests.fakes import FakeClock, until

T0 = 1000.0
TICK = 0.5  # exact in binary: due times on the tick grid stay exact


class Runs:
    """The engine's callback: records each run; a key in `blocked` waits for release."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.calls: list[tuple[str, float, float]] = []  # key, due, clock at start
        self.blocked: set[str] = set()
        self.gates: dict[str, asyncio.Event] = {}
        self.active: dict[str, int] = {}
        self.overlaps = 0
        self.cancelled: list[str] = []
        self.fail: set[str] = set()

    async def __call__(self, key: str, due: float) -> None:
        self.calls.append((key, due, self.clock.now()))
        self.active[key] = self.active.get(key, 0) + 1
        self.overlaps += self.active[key] > 1
        try:
            if key in self.fail:
                raise RuntimeError(f"bug in run {key}")
            if key in self.blocked:
                gate = self.gates[key] = asyncio.Event()
                await gate.wait()
        except asyncio.CancelledError:
            self.cancelled.append(key)
            raise
        finally:
            self.active[key] -= 1

    def release(self, key: str) -> None:
        self.gates.pop(key).set()

    @property
    def keys(self) -> list[str]:
        return [key for key, _, _ in self.calls]


@asynccontextmanager
async def dispatching(
    *, max_concurrent: int = 10, late_after: float = 1.0
) -> AsyncIterator[tuple[Dispatcher[str], FakeClock, Runs]]:
    """A running dispatcher; stopped (grace 0) on the way out, everything bounded. A
    key's flow is what comes before its "/" (none: the flow "")."""
    clock = FakeClock(T0)
    runs = Runs(clock)
    dispatcher: Dispatcher[str] = Dispatcher(
        run=runs,
        clock=clock,
        max_concurrent=max_concurrent,
        tick=TICK,
        late_after=late_after,
        flow=lambda key: key.partition("/")[0] if "/" in key else "",
    )
    with anyio.fail_after(10):
        async with asyncio.TaskGroup() as group:
            group.create_task(dispatcher.run())
            await settle(dispatcher, clock)
            yield dispatcher, clock, runs
            await dispatcher.stop(grace=0)


async def settle(dispatcher: Dispatcher[str], clock: FakeClock) -> None:
    """Let the dispatcher reach its next sleep: asleep, and no sleep of the clock ended
    but not yet seen by its sleeper (the fake's bookkeeping, read here only)."""
    await until(lambda: dispatcher.asleep and not any(done.done() for _, done in clock._sleepers))


async def test_runs_at_due_times() -> None:
    async with dispatching() as (dispatcher, clock, runs):
        dispatcher.schedule("a", T0 + 10)
        dispatcher.schedule("b", T0 + 20)
        await settle(dispatcher, clock)
        assert clock.sleeps[-1] == 10
        assert dispatcher.pending == 2
        clock.advance(9.99)
        await settle(dispatcher, clock)
        assert runs.calls == []
        clock.advance(0.01)
        await until(lambda: len(runs.calls) == 1)
        assert runs.calls == [("a", T0 + 10, T0 + 10)]
        clock.advance(10)
        await until(lambda: len(runs.calls) == 2)
        assert runs.calls[1] == ("b", T0 + 20, T0 + 20)
        assert dispatcher.stats.late == 0
        assert dispatcher.pending == 0


async def test_runs_start_at_the_tick_boundary_after_their_due() -> None:
    async with dispatching() as (dispatcher, clock, runs):
        dispatcher.schedule("a", T0 + 10.1)
        dispatcher.schedule("b", T0 + 10.4)
        await settle(dispatcher, clock)
        assert clock.sleeps[-1] == 10.5  # one wake-up for the whole tick
        sleeps = len(clock.sleeps)
        dispatcher.schedule("c", T0 + 10.2)  # within that tick: no new wake-up
        await settle(dispatcher, clock)
        assert len(clock.sleeps) == sleeps
        clock.advance(10.5)
        await until(lambda: len(runs.calls) == 3)
        assert runs.calls == [
            ("a", T0 + 10.1, T0 + 10.5),
            ("c", T0 + 10.2, T0 + 10.5),
            ("b", T0 + 10.4, T0 + 10.5),
        ]
        assert dispatcher.stats.late == 0
        assert dispatcher.stats.lateness_max == pytest.approx(0.4)


async def test_an_entry_beyond_one_revolution_runs_on_time() -> None:
    async with dispatching() as (dispatcher, clock, runs):
        dispatcher.schedule("far", T0 + 1000)  # the wheel turns every 512 s
        await settle(dispatcher, clock)
        assert clock.sleeps[-1] == 511.5  # the wheel's last tick, then look again
        clock.advance(511.5)
        await settle(dispatcher, clock)
        assert (clock.sleeps[-1], runs.calls) == (488.5, [])
        clock.advance(488.5)
        await until(lambda: len(runs.calls) == 1)
        assert runs.calls == [("far", T0 + 1000, T0 + 1000)]


async def test_an_earlier_entry_cuts_the_sleep_short() -> None:
    async with dispatching() as (dispatcher, clock, runs):
        dispatcher.schedule("slow", T0 + 30)
        await settle(dispatcher, clock)
        assert clock.sleeps[-1] == 30
        dispatcher.schedule("soon", T0 + 5)
        await settle(dispatcher, clock)
        assert clock.sleeps[-1] == 5
        assert clock.sleeping == 1  # the long sleep was cancelled, not left behind
        clock.advance(5)
        await until(lambda: runs.keys == ["soon"])
        dispatcher.schedule("now", T0)  # already due: no clock time passes
        await until(lambda: runs.keys == ["soon", "now"])
        assert clock.now() == T0 + 5


async def test_the_cap_with_exact_counts() -> None:
    async with dispatching(max_concurrent=2) as (dispatcher, clock, runs):
        keys = ["a", "b", "c", "d", "e"]
        runs.blocked.update(keys)
        for i, key in enumerate(reversed(keys)):  # scheduled out of due order
            dispatcher.schedule(key, T0 + 1 + (4 - i) * 0.1)
        clock.advance(2)
        await until(lambda: len(runs.calls) == 2)
        await settle(dispatcher, clock)
        assert (runs.keys, dispatcher.running, dispatcher.waiting) == (["a", "b"], 2, 3)
        assert dispatcher.pending == 3
        runs.release("b")
        await until(lambda: len(runs.calls) == 3)
        await settle(dispatcher, clock)
        assert (runs.keys, dispatcher.running, dispatcher.waiting) == (["a", "b", "c"], 2, 2)
        runs.release("a")
        runs.release("c")
        await until(lambda: len(runs.calls) == 5)
        assert runs.keys == keys
        assert dispatcher.running == 2
        runs.release("d")
        runs.release("e")
        await until(lambda: dispatcher.running == 0)
        assert dispatcher.stats.runs_started == dispatcher.stats.runs_finished == 5


async def test_a_run_held_back_by_the_cap_waits_for_a_slot_and_is_not_late() -> None:
    async with dispatching(max_concurrent=1, late_after=1.0) as (dispatcher, clock, runs):
        runs.blocked.add("first")
        dispatcher.schedule("first", T0 + 1)
        dispatcher.schedule("second", T0 + 1.5)
        clock.advance(1)  # on time
        await until(lambda: runs.keys == ["first"])
        clock.advance(0.5)  # "second" is due and found due, but the cap holds it
        await settle(dispatcher, clock)
        assert dispatcher.waiting == 1
        clock.advance(2.5)
        await settle(dispatcher, clock)
        runs.release("first")
        await until(lambda: runs.keys == ["first", "second"])
        assert runs.calls[1] == ("second", T0 + 1.5, T0 + 4)  # 2.5 s after its due
        stats = dispatcher.stats
        assert (stats.late, stats.lateness_max) == (0, 0.0)  # not the probe's doing
        assert (stats.slot_waits, stats.slot_wait_max) == (1, pytest.approx(2.5))
        assert stats.runs_started == 2


async def test_a_run_whose_previous_run_overran_is_late() -> None:
    async with dispatching(max_concurrent=10, late_after=1.0) as (dispatcher, clock, runs):
        runs.blocked.add("a")
        dispatcher.schedule("a", T0 + 1)
        clock.advance(1)
        await until(lambda: runs.keys == ["a"])
        dispatcher.schedule("a", T0 + 2)  # its next slot, while the first run goes on
        clock.advance(3)
        await settle(dispatcher, clock)
        runs.release("a")  # 2 s past the next slot
        await until(lambda: len(runs.calls) == 2)
        stats = dispatcher.stats
        assert (stats.late, stats.lateness_max) == (1, pytest.approx(2.0))
        assert (stats.slot_waits, stats.slot_wait_max) == (0, 0.0)


async def test_a_loop_woken_late_counts_the_run_late() -> None:
    async with dispatching(max_concurrent=1, late_after=1.0) as (dispatcher, clock, runs):
        runs.blocked.add("first")
        dispatcher.schedule("first", T0 + 1)
        dispatcher.schedule("second", T0 + 1.5)
        clock.advance(1)
        await until(lambda: runs.keys == ["first"])
        clock.advance(3)  # the loop sees "second" only at +4 (as a busy loop would)
        await settle(dispatcher, clock)
        runs.release("first")
        await until(lambda: runs.keys == ["first", "second"])
        stats = dispatcher.stats
        assert (stats.late, stats.lateness_max) == (1, pytest.approx(2.5))
        assert (stats.slot_waits, stats.slot_wait_max) == (1, 0.0)  # held, for no time


async def test_a_key_never_runs_twice_at_once() -> None:
    async with dispatching() as (dispatcher, clock, runs):
        runs.blocked.add("a")
        dispatcher.schedule("a", T0 + 1)
        clock.advance(1)
        await until(lambda: runs.keys == ["a"])
        dispatcher.schedule("a", T0 + 2)  # the engine reschedules while it runs
        clock.advance(5)
        await settle(dispatcher, clock)
        assert (runs.keys, dispatcher.running, dispatcher.waiting) == (["a"], 1, 1)
        assert dispatcher.due("a") == T0 + 2
        runs.release("a")
        await until(lambda: len(runs.calls) == 2)
        assert runs.calls[1] == ("a", T0 + 2, T0 + 6)
        assert runs.overlaps == 0


async def test_cancel_drops_pending_entries_only() -> None:
    async with dispatching(max_concurrent=1) as (dispatcher, clock, runs):
        runs.blocked.add("running")
        dispatcher.schedule("running", T0 + 1)
        dispatcher.schedule("waiting", T0 + 1)
        dispatcher.schedule("later", T0 + 10)
        clock.advance(1)
        await until(lambda: runs.keys == ["running"])
        await settle(dispatcher, clock)
        assert dispatcher.waiting == 1
        assert dispatcher.cancel("waiting") is True  # due, held back by the cap
        assert dispatcher.cancel("later") is True  # in the wheel
        assert dispatcher.cancel("later") is False
        assert dispatcher.cancel("running") is False  # left to finish
        assert dispatcher.pending == 0
        runs.release("running")
        clock.advance(20)
        await until(lambda: dispatcher.running == 0)
        await settle(dispatcher, clock)
        assert runs.keys == ["running"]


async def test_schedule_replaces_the_pending_entry() -> None:
    async with dispatching() as (dispatcher, clock, runs):
        dispatcher.schedule("a", T0 + 10)
        dispatcher.schedule("a", T0 + 20)
        assert dispatcher.pending == 1
        clock.advance(10)
        await settle(dispatcher, clock)
        assert runs.calls == []
        clock.advance(10)
        await until(lambda: runs.calls == [("a", T0 + 20, T0 + 20)])


async def test_a_raising_callback_is_counted_not_fatal() -> None:
    async with dispatching() as (dispatcher, clock, runs):
        runs.fail.add("bad")
        dispatcher.schedule("bad", T0 + 1)
        clock.advance(1)
        await until(lambda: dispatcher.stats.errors == 1)
        dispatcher.schedule("good", T0 + 2)
        clock.advance(1)
        await until(lambda: runs.keys == ["bad", "good"])
        assert dispatcher.stats.runs_finished == 2


@pytest.mark.parametrize(
    ("finishes_after", "cancelled"),
    [
        pytest.param(2.0, [], id="run-finishes-within-grace"),
        pytest.param(None, ["hang"], id="run-cancelled-after-grace"),
    ],
)
async def test_stop_gives_grace_then_cancels(
    finishes_after: float | None, cancelled: list[str]
) -> None:
    clock = FakeClock(T0)
    runs = Runs(clock)
    runs.blocked.add("hang")
    dispatcher: Dispatcher[str] = Dispatcher(run=runs, clock=clock, max_concurrent=4, tick=TICK)
    dispatcher.schedule("hang", T0)
    dispatcher.schedule("never", T0 + 1)
    with anyio.fail_after(10):
        async with asyncio.TaskGroup() as group:
            runner = group.create_task(dispatcher.run())
            await until(lambda: runs.keys == ["hang"])
            stopper = group.create_task(dispatcher.stop(grace=5))
            await until(lambda: clock.sleeps[-1] == 5)
            assert clock.sleeping == 1  # the dispatcher's own sleep is over
            if finishes_after is not None:
                clock.advance(finishes_after)
                runs.release("hang")
            else:
                clock.advance(4.99)
                await asyncio.sleep(0)
                assert not runner.done()
                clock.advance(0.01)
            await stopper
            assert runner.done()
    assert runs.keys == ["hang"]  # nothing started after stop, "never" included
    assert runs.cancelled == cancelled
    assert dispatcher.stats.cancelled == len(cancelled)
    assert clock.now() == T0 + (finishes_after or 5.0)


async def test_stop_before_run_returns_at_once() -> None:
    clock = FakeClock(T0)
    runs = Runs(clock)
    dispatcher: Dispatcher[str] = Dispatcher(run=runs, clock=clock, max_concurrent=1, tick=TICK)
    dispatcher.schedule("a", T0)
    with anyio.fail_after(10):
        await dispatcher.stop(grace=1)
        await dispatcher.run()  # stopped already: starts nothing, returns
    assert runs.calls == []
    with pytest.raises(RuntimeError, match="only once"):
        await dispatcher.run()


async def test_cancelling_run_cancels_every_run_and_leaks_nothing() -> None:
    clock = FakeClock(T0)
    runs = Runs(clock)
    runs.blocked.update({"a", "b"})
    dispatcher: Dispatcher[str] = Dispatcher(run=runs, clock=clock, max_concurrent=4, tick=TICK)
    for key in ("a", "b"):
        dispatcher.schedule(key, T0)
    dispatcher.schedule("c", T0 + 1)
    before = asyncio.all_tasks()
    with anyio.fail_after(10):
        runner = asyncio.create_task(dispatcher.run())
        await until(lambda: dispatcher.running == 2)
        runner.cancel()
        with pytest.raises(asyncio.CancelledError):
            await runner
        await dispatcher.stop(grace=1)  # returns at once: run() is over
    assert sorted(runs.cancelled) == ["a", "b"]
    assert asyncio.all_tasks() == before
    assert clock.sleeping == 0


@pytest.mark.parametrize(
    ("max_concurrent", "limit"),
    [
        pytest.param(1, 1, id="one-slot-no-reserve"),
        pytest.param(3, 3, id="three-no-reserve"),
        pytest.param(4, 3, id="four"),
        pytest.param(64, 48, id="the-default"),
        pytest.param(10_000, 7_500, id="the-most"),
    ],
)
def test_one_flow_occupies_all_slots_but_a_quarter(max_concurrent: int, limit: int) -> None:
    assert flow_limit(max_concurrent) == limit


async def test_a_flow_flooding_the_slots_leaves_a_quarter_to_the_others() -> None:
    """Issue 40, 3: a namespace's hanging probes filled every slot; another namespace's
    runs waited behind them (6.7 s on the sim)."""
    async with dispatching(max_concurrent=4) as (dispatcher, clock, runs):
        flood = [f"a/{i}" for i in range(10)]
        runs.blocked.update(flood)
        for key in flood:
            dispatcher.schedule(key, T0 + 1)
        clock.advance(1)
        await until(lambda: len(runs.calls) == 3)
        await settle(dispatcher, clock)
        assert dispatcher.running_by_flow() == {"a": 3}  # one slot left for the others
        assert dispatcher.waiting_by_flow() == {"a": 7}
        dispatcher.schedule("b/1", T0 + 1.5)
        clock.advance(0.5)
        await until(lambda: "b/1" in runs.keys)  # at once: no wait for a slot
        assert runs.calls[-1] == ("b/1", T0 + 1.5, T0 + 1.5)
        stats = dispatcher.stats
        assert stats.slot_waits_by_flow.get("b", 0) == 0
        for key in flood[:3]:
            runs.release(key)
        await until(lambda: len(runs.calls) == 7)  # a's backlog, 3 at a time
        assert stats.slot_waits_by_flow["a"] == 3


async def test_a_freed_slot_goes_to_the_flow_with_the_fewest_runs() -> None:
    """Not to the earliest due: a flow's backlog never makes another flow wait for it."""
    async with dispatching(max_concurrent=2) as (dispatcher, clock, runs):
        runs.blocked.update(["a/1", "a/2"])
        dispatcher.schedule("a/1", T0 + 1)
        dispatcher.schedule("a/2", T0 + 1)
        for i in range(3, 6):  # a's backlog, due before b's run
            dispatcher.schedule(f"a/{i}", T0 + 1)
        dispatcher.schedule("b/1", T0 + 1.5)
        clock.advance(1)
        await until(lambda: len(runs.calls) == 2)  # a holds both slots (2 of 2: no reserve)
        clock.advance(0.5)
        await settle(dispatcher, clock)
        assert dispatcher.waiting_by_flow() == {"a": 3, "b": 1}
        runs.release("a/1")  # a holds 1, b none: b's turn
        await until(lambda: len(runs.calls) == 3)
        assert runs.keys[-1] == "b/1"
        await until(lambda: len(runs.calls) == 6)  # then a's backlog, in due order
        assert runs.keys[3:] == ["a/3", "a/4", "a/5"]
        runs.release("a/2")


async def test_flows_with_as_many_runs_take_turns() -> None:
    async with dispatching(max_concurrent=1) as (dispatcher, clock, runs):
        runs.blocked.add("x/0")
        dispatcher.schedule("x/0", T0 + 1)
        for i in range(3):
            dispatcher.schedule(f"a/{i}", T0 + 1 + i * 0.01)
            dispatcher.schedule(f"b/{i}", T0 + 1.2 + i * 0.01)
        clock.advance(2)
        await until(lambda: runs.keys == ["x/0"])
        runs.release("x/0")
        await until(lambda: len(runs.calls) == 7)
        assert runs.keys[1:] == ["a/0", "b/0", "a/1", "b/1", "a/2", "b/2"]
