"""probe/holds.py: one held command per probe, bounded in time and in number."""

from __future__ import annotations

import asyncio

import pytest

from probemarker.probe.holds import CommandHolds, HoldSettings
from tests.kube.fakes import FakeClock


class Stream:
    """A held stream whose command ends when `end` is set; notes an abort."""

    def __init__(self) -> None:
        self.end = asyncio.Event()
        self.aborted = False

    async def finish(self) -> None:
        await self.end.wait()

    def abort(self) -> None:
        self.aborted = True


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_key_is_busy_while_its_stream_is_held_and_free_once_the_command_ends() -> None:
    async with CommandHolds() as holds:
        slot, stream = holds.slot("p"), Stream()
        assert slot.admit()
        slot.hold(stream)
        assert holds.busy("p")
        assert not holds.busy("q")
        assert holds.held == 1
        stream.end.set()
        await settle()
        assert not holds.busy("p")
        assert (holds.held, holds.stats.held_total, holds.stats.ended) == (0, 1, 1)


async def test_the_time_limit_aborts_the_stream_and_counts_it() -> None:
    async with CommandHolds(settings=HoldSettings(limit=0.05)) as holds:
        stream = Stream()
        holds.slot("p").hold(stream)
        (keeping,) = holds._held.values()
        async with asyncio.timeout(5):
            await keeping  # ends at the limit, not with the command
        assert not holds.busy("p")
        assert stream.aborted
        assert holds.stats.limit_hits["time"] == 1


@pytest.mark.parametrize("entered", [True, False], ids=["full", "not-entered"])
async def test_no_room_keeps_the_key_busy_for_the_limit_without_a_connection(
    entered: bool,
) -> None:
    clock = FakeClock(100.0)
    holds = CommandHolds(settings=HoldSettings(limit=30.0, max_streams=0), clock=clock)
    if entered:
        await holds.__aenter__()
    try:
        assert not holds.slot("p").admit()  # the caller aborts its stream
        assert holds.busy("p")  # its command may still run: nothing tells when it ends
        clock.advance(29.0)
        assert holds.busy("p")
        clock.advance(1.0)
        assert not holds.busy("p")
        assert holds.stats.limit_hits["streams"] == (1 if entered else 0)
    finally:
        if entered:
            await holds.__aexit__(None, None, None)


async def test_leaving_aborts_every_held_stream() -> None:
    streams = [Stream(), Stream()]
    async with CommandHolds() as holds:
        for key, stream in zip("ab", streams, strict=True):
            holds.slot(key).hold(stream)
        await settle()
    assert all(s.aborted for s in streams)
    assert holds.held == 0
