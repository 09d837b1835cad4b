"""probe/holds.py: one held command per command in a container, whatever probe runs
it, bounded in time and in number (fair by namespace), and carried over a restart of
the daemon through the pod's record once a run of it was skipped (issue 43)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from structlog.testing import capture_logs

from probemarker.identity.commands import HeldCommand
from probemarker.probe.holds import CommandHolds
from probemarker.probe.holdtable import CommandKey, HoldSettings
from probemarker.watch.pods import PodUID
from tests.fakes import FakeClock, until

WALL = 1_800_000_000.0  # the wall clock's time when a test starts


def key(pod: str = "p", command: str = "cmd", *, namespace: str = "ns") -> CommandKey:
    """`command` in container "app" of pod `pod` (its UID) in `namespace`."""
    return CommandKey(namespace, PodUID(pod), "app", command)


P, Q = key("p"), key("q")


class Stream:
    """A held stream whose command ends when `end` is set (`lost`: the connection ends
    without the command's exit status); notes an abort."""

    def __init__(self) -> None:
        self.end = asyncio.Event()
        self.lost = False
        self.aborted = False

    async def finish(self) -> bool:
        await self.end.wait()
        return not self.lost

    def abort(self) -> None:
        self.aborted = True


class Rig:
    """Holds with a fake monotonic clock and a wall clock that moves with it."""

    def __init__(self, *, limit: float = 600.0, max_streams: int = 64) -> None:
        self.clock = FakeClock(100.0)
        self.changed: list[object] = []
        self.holds = CommandHolds(
            settings=HoldSettings(limit=limit, max_streams=max_streams),
            clock=self.clock,
            wall=lambda: WALL + self.clock.now() - 100.0,
            changed=self.changed.append,
        )

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    r = Rig()
    async with r.holds:
        yield r


def held(started: float, *, command: str = "cmd", container: str = "c1") -> HeldCommand:
    return HeldCommand(command=command, container=container, started=int(started))


async def test_a_command_is_busy_while_its_stream_is_held_and_free_once_it_ends(rig: Rig) -> None:
    holds = rig.holds
    slot, stream = holds.slot(P, "c1"), Stream()
    assert slot.admit()
    slot.hold(stream)
    assert holds.busy(P, "c1")
    assert not holds.busy(Q, "c1")
    assert holds.held == 1
    assert holds.held_command(P, "c1") is None  # not on the record: no run was due yet
    assert rig.changed == []
    assert holds.skips(P, "c1")  # a run of it is due: skipped, and the record says so
    assert holds.held_command(P, "c1") == held(WALL)
    assert rig.changed == [P]  # the pod's record follows
    assert holds.skips(P, "c1")  # the next period: recorded already, no new write
    assert rig.changed == [P]
    assert holds.stats.recorded == 1
    stream.end.set()
    await until(lambda: holds.held == 0)
    assert not holds.busy(P, "c1")
    assert not holds.skips(P, "c1")
    assert holds.held_command(P, "c1") is None
    assert (holds.stats.held_total, holds.stats.ended) == (1, 1)
    assert rig.changed == [P, P]  # and ended: one write each


async def test_a_command_that_ends_before_a_run_of_it_is_due_changes_no_record(rig: Rig) -> None:
    """Issue 43, 3: a run that timed out under load, whose command ended a moment
    later, wrote the hold onto the pod and removed it again: two writes for nothing."""
    holds, stream = rig.holds, Stream()
    holds.slot(P, "c1").hold(stream)
    assert holds.busy(P, "c1")  # no second copy meanwhile, all the same
    assert holds.held_command(P, "c1") is None
    rig.advance(0.2)
    stream.end.set()
    await until(lambda: holds.held == 0)
    assert not holds.skips(P, "c1")  # its next run is due: it runs
    assert rig.changed == []  # nothing to write, ever
    assert (holds.stats.ended, holds.stats.recorded) == (1, 0)


async def test_an_edited_command_is_not_held_back_by_the_old_one(rig: Rig) -> None:
    holds, stream = rig.holds, Stream()
    holds.slot(key("p", "old"), "c1").hold(stream)
    assert holds.busy(key("p", "old"), "c1")
    assert not holds.busy(key("p", "new"), "c1")  # the new command runs at the next period
    holds.slot(key("p", "new"), "c1").hold(Stream())  # and may be held beside the old
    assert holds.held == 2
    assert holds.busy(key("p", "old"), "c1")  # the old one still held, counted


async def test_the_time_limit_aborts_the_stream_and_counts_it() -> None:
    changed: list[object] = []
    settings = HoldSettings(limit=0.05)
    async with CommandHolds(settings=settings, changed=changed.append) as holds:
        stream = Stream()
        holds.slot(P, "c1").hold(stream)
        assert holds.skips(P, "c1")  # on the record
        (hold,) = holds._holds.values()
        assert hold.task is not None
        async with asyncio.timeout(5):
            await hold.task  # ends at the limit, not with the command
        assert not holds.busy(P, "c1")
        assert stream.aborted
        assert holds.stats.limit_hits["time"] == 1
        assert changed == [P, P]


async def test_a_stream_lost_before_the_exit_status_is_held_on_by_time(rig: Rig) -> None:
    holds, stream = rig.holds, Stream()
    holds.slot(P, "c1").hold(stream)
    assert holds.skips(P, "c1")  # on the record
    rig.advance(100.0)
    stream.lost = True  # an API server restart cut it: the command runs on
    stream.end.set()
    await until(lambda: holds.held == 0)
    assert holds.stats.lost == 1
    assert holds.stats.ended == 0
    assert holds.busy(P, "c1")
    assert holds.held_command(P, "c1") == held(WALL)  # the same record: no write
    assert rig.changed == [P]
    rig.advance(499.0)
    assert holds.busy(P, "c1")
    rig.advance(1.0)  # 600 s from the hold's start
    await until(lambda: not holds.busy(P, "c1"))
    assert holds.stats.limit_hits["time"] == 1
    assert rig.changed == [P, P]


@pytest.mark.parametrize("entered", [True, False], ids=["full", "not-entered"])
async def test_no_room_holds_the_command_for_the_limit_without_a_connection(
    entered: bool,
) -> None:
    rig = Rig(limit=30.0, max_streams=0)
    holds = rig.holds
    if entered:
        await holds.__aenter__()
    try:
        assert not holds.slot(P, "c1").admit()  # the caller aborts its stream
        assert holds.busy(P, "c1")  # its command may still run
        assert holds.held_command(P, "c1") is None  # no run of it was due yet
        assert rig.changed == []
        rig.advance(1.0)
        assert holds.skips(P, "c1")
        assert holds.held_command(P, "c1") == held(WALL)  # the record says so now
        rig.advance(28.0)
        assert holds.busy(P, "c1")
        rig.advance(1.0)
        assert not holds.busy(P, "c1")
        assert holds.stats.limit_hits["streams"] == (1 if entered else 0)
        assert rig.changed == [P, P]  # held, then given up
    finally:
        if entered:
            await holds.__aexit__(None, None, None)


@pytest.mark.parametrize(
    ("age", "busy_for"),
    [
        pytest.param(100.0, 500.0, id="the-rest-of-the-limit"),
        pytest.param(599.0, 1.0, id="one-second-left"),
        pytest.param(-86400.0, 600.0, id="from-the-future-at-most-the-limit"),
    ],
)
async def test_a_seeded_hold_lasts_to_the_recorded_start_plus_the_limit(
    rig: Rig, age: float, busy_for: float
) -> None:
    holds = rig.holds
    assert holds.seed(P, held(WALL - age), container="c1")
    assert holds.stats.seeded == 1
    assert holds.held_command(P, "c1") == held(WALL - age)  # the record unchanged
    assert holds.skips(P, "c1")  # recorded already: no write
    assert rig.changed == []
    rig.advance(busy_for - 0.5)
    assert holds.busy(P, "c1")
    rig.advance(0.5)
    await until(lambda: not holds.busy(P, "c1"))
    assert rig.changed == [P]  # ended: the record follows; seeding wrote nothing


@pytest.mark.parametrize(
    ("record", "command", "container"),
    [
        pytest.param(held(WALL - 10), "other", "c1", id="an-edited-command"),
        pytest.param(held(WALL - 10), "cmd", "c2", id="a-restarted-container"),
        pytest.param(held(WALL - 10), "cmd", "", id="no-container-yet"),
        pytest.param(held(WALL - 600), "cmd", "c1", id="the-limit-passed"),
    ],
)
async def test_a_record_of_another_command_or_container_or_time_seeds_nothing(
    rig: Rig, record: HeldCommand, command: str, container: str
) -> None:
    assert not rig.holds.seed(key("p", command), record, container=container)
    assert not rig.holds.busy(key("p", command), container)
    assert rig.holds.stats.seeded == 0


async def test_a_hold_by_time_ends_when_the_container_restarts(rig: Rig) -> None:
    holds = rig.holds
    assert holds.seed(P, held(WALL), container="c1")
    assert holds.busy(P, "c1")
    assert not holds.busy(P, "c2")  # a new instance: the old processes are gone
    assert not holds.busy(P, "c1")
    assert rig.changed == [P]


@pytest.mark.parametrize("skipped", [False, True], ids=["no-run-due", "a-run-skipped"])
@pytest.mark.parametrize(
    "kind",
    ["stream-ended", "stream-lost", "given-up-for-a-share", "no-room", "container-restarted"],
)
async def test_every_hold_is_on_the_record_only_once_a_run_of_it_was_skipped(
    kind: str, skipped: bool
) -> None:
    """Issue 43, 3, for every kind of hold: by stream (its command's end seen, its
    stream lost, its stream given up for another namespace's share) and by time (no
    room for a stream; a container restarted ends it). A hold that skips no run
    changes nothing on the pod, at its start or its end; one that skips a run goes on
    the record then and comes off it at its end: one `changed` each, none between."""
    by_time = kind in ("no-room", "container-restarted")
    rig = Rig(limit=30.0, max_streams=0 if by_time else 2)
    async with rig.holds as holds:
        stream = Stream()
        if by_time:
            assert not holds.slot(P, "c1").admit()
        else:
            holds.slot(P, "c1").hold(stream)
            holds.slot(key("p2"), "c1").hold(Stream())  # its namespace holds both streams
        rig.advance(1.0)
        if skipped:
            assert holds.skips(P, "c1")
            assert holds.held_command(P, "c1") == held(WALL)
            assert rig.changed == [P]
        else:
            assert holds.held_command(P, "c1") is None
        if kind == "stream-lost":
            stream.lost = True
            stream.end.set()
            await until(lambda: holds.stats.lost == 1)
        elif kind == "given-up-for-a-share":
            slot = holds.slot(key("b-0", namespace="b"), "c1")
            assert slot.admit()  # P's stream, the oldest, gives way
            slot.hold(Stream())
            assert stream.aborted
        assert holds.busy(P, "c1")  # still held: no second copy
        assert holds.held_command(P, "c1") == (held(WALL) if skipped else None)
        assert rig.changed == ([P] if skipped else [])  # the record as it was
        if kind == "stream-ended":
            stream.end.set()
            await until(lambda: not holds.busy(P, "c1"))
        elif kind == "container-restarted":
            assert not holds.busy(P, "c2")
        else:
            rig.advance(29.0)  # the limit, from the hold's start
            await until(lambda: not holds.busy(P, "c1"))
        assert holds.held_command(P, "c1") is None
        assert rig.changed == ([P, P] if skipped else [])
        assert holds.stats.recorded == (1 if skipped else 0)


async def test_leaving_aborts_every_held_stream_and_keeps_the_record() -> None:
    streams = [Stream(), Stream()]
    changed: list[object] = []
    async with CommandHolds(changed=changed.append) as holds:
        for pod, stream in zip("ab", streams, strict=True):
            holds.slot(key(pod), "c1").hold(stream)
            assert holds.skips(key(pod), "c1")
        await asyncio.sleep(0)
    assert all(s.aborted for s in streams)
    assert holds.held == 0
    assert changed == [key("a"), key("b")]  # no end: the commands may still run


async def test_two_probes_with_one_command_in_a_container_share_its_hold(rig: Rig) -> None:
    """The hold is the command's in its container (issue 40): whatever probe ran it, a
    probe renamed or a second probe with the same argv finds it held."""
    holds = rig.holds
    holds.slot(P, "c1").hold(Stream())
    assert holds.busy(CommandKey("ns", PodUID("p"), "app", "cmd"), "c1")  # any probe's
    assert not holds.busy(CommandKey("ns", PodUID("p"), "side", "cmd"), "c1")  # another container
    assert not holds.busy(CommandKey("ns", PodUID("p2"), "app", "cmd"), "c1")  # another pod


async def test_runs_of_one_command_take_turns_and_others_do_not_wait(rig: Rig) -> None:
    holds, order = rig.holds, list[str]()
    first_in, release = asyncio.Event(), asyncio.Event()

    async def run(name: str, command: CommandKey, *, hold_on: bool = False) -> None:
        async with holds.turn(command):
            order.append(f"{name} in")
            if hold_on:
                first_in.set()
                await release.wait()
            order.append(f"{name} out")

    async with asyncio.TaskGroup() as group:
        group.create_task(run("a", P, hold_on=True))
        await first_in.wait()
        group.create_task(run("b", P))  # the same command: waits for a's run
        group.create_task(run("c", key("p", "other")))  # another command: does not
        await until(lambda: "c out" in order)
        assert "b in" not in order
        release.set()
    assert order == ["a in", "c in", "c out", "a out", "b in", "b out"]
    assert len(holds._turns) == 0  # nothing kept once no run holds or waits


def streams_of(holds: CommandHolds, namespace: str, n: int) -> list[Stream]:
    """`n` commands of `namespace` held on their streams (they never end by themselves)."""
    streams = [Stream() for _ in range(n)]
    for i, stream in enumerate(streams):
        slot = holds.slot(key(f"{namespace}-{i}", namespace=namespace), "c1")
        assert slot.admit()
        slot.hold(stream)
    return streams


async def test_a_namespace_that_fills_the_streams_leaves_another_its_share() -> None:
    """Issue 40, 1: one namespace held every stream with hanging commands; another's
    command that outlived its timeout by a moment was held by time for the whole limit
    (its probe Failed, its pod out of its Service for 10 minutes)."""
    rig = Rig(max_streams=4)
    async with rig.holds as holds:
        flood = streams_of(holds, "a", 4)
        theirs = key("b-0", namespace="b")
        slot, stream = holds.slot(theirs, "c1"), Stream()
        assert slot.admit()  # a's oldest stream gives way: b holds none, its share is 2
        slot.hold(stream)
        assert [s.aborted for s in flood] == [True, False, False, False]
        assert holds.busy(key("a-0", namespace="a"), "c1")  # a's command may still run
        assert holds.held_by_namespace() == {"a": 3, "b": 1}
        assert holds.stats.limit_hits == {"share": 1}
        stream.end.set()  # b's command ends a moment later: its probe runs again
        await until(lambda: not holds.busy(theirs, "c1"))
        rig.advance(599.0)
        assert holds.busy(key("a-0", namespace="a"), "c1")  # to the end it had
        rig.advance(1.0)
        await until(lambda: not holds.busy(key("a-0", namespace="a"), "c1"))


@pytest.mark.parametrize(
    ("held_before", "asking", "held_after", "limit"),
    [
        pytest.param({"a": 3}, "a", {"a": 4}, None, id="room-left-alone"),
        pytest.param({"a": 2, "b": 2}, "a", {"a": 2, "b": 2}, "streams", id="at-its-share-waits"),
        pytest.param({"a": 3, "b": 1}, "b", {"a": 2, "b": 2}, "share", id="below-takes-from-most"),
        pytest.param({"a": 3, "b": 1}, "c", {"a": 2, "b": 1, "c": 1}, "share", id="a-newcomer"),
        pytest.param(
            {"a": 2, "b": 1, "c": 1}, "c", {"a": 2, "b": 1, "c": 1}, "streams", id="1-of-4"
        ),
    ],
)
async def test_the_streams_are_shared_by_namespace(
    held_before: dict[str, int], asking: str, held_after: dict[str, int], limit: str | None
) -> None:
    """Table: who holds the 4 streams before, who asks, who holds them after; `limit`:
    the stream given up for the asking's share, or the asking's own command held
    by time (it was at its share)."""
    rig = Rig(max_streams=4)
    async with rig.holds as holds:
        for namespace, n in held_before.items():
            streams_of(holds, namespace, n)
        slot = holds.slot(key("new", namespace=asking), "c1")
        assert slot.admit() is (limit != "streams")
        if limit != "streams":
            slot.hold(Stream())
        assert holds.held_by_namespace() == held_after
        assert holds.busy(key("new", namespace=asking), "c1")  # by stream or by time
        assert holds.stats.limit_hits == ({} if limit is None else {limit: 1})


async def test_holds_by_time_past_the_bound_are_forgotten_in_the_namespace_holding_most(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("probemarker.probe.holds._REMEMBERED", 4)
    holds = rig.holds
    theirs = key("b-0", namespace="b")
    assert holds.seed(theirs, held(WALL), container="c1")  # the oldest of all
    for i in range(4):
        assert holds.seed(key(f"a-{i}", namespace="a"), held(WALL), container="c1")
    assert holds.busy(theirs, "c1")  # a's flood forgot a's own oldest, not b's
    assert not holds.busy(key("a-0", namespace="a"), "c1")
    assert holds.holding_by_namespace() == {"a": 3, "b": 1}


async def test_a_namespace_hanging_commands_by_the_hundred_logs_one_line_a_minute() -> None:
    rig = Rig(max_streams=0)  # no room: every command held by time, with a warning
    async with rig.holds as holds:
        with capture_logs() as logs:
            for i in range(100):
                holds.slot(key(f"a-{i}", namespace="a"), "c1").admit()
            holds.slot(key("b-0", namespace="b"), "c1").admit()
            rig.advance(60.0)
            holds.slot(key("a-100", namespace="a"), "c1").admit()
    full = [line for line in logs if line["event"] == "exec.hold_full"]
    assert [(line["command"].split("/")[0], line.get("held_back")) for line in full] == [
        ("a", None),
        ("b", None),  # another namespace's is not held back by a's
        ("a", 99),
    ]
    assert holds.stats.limit_hits["streams"] == 102  # every one counted
