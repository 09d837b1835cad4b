"""FlushQueue: coalescing, deferrals, flushes asked for at a time, one flush per pod at a
time, shutdown. A manual clock; no loop needed (the queue does no I/O)."""

from __future__ import annotations

from probemarker.write.queue import FlushQueue
from tests.fakes import FakeClock

COALESCE = 0.05


def queue() -> tuple[FakeClock, FlushQueue[str]]:
    clock = FakeClock(100.0)
    return clock, FlushQueue(clock=clock, coalesce=COALESCE)


def test_marks_coalesce_into_one_flush() -> None:
    clock, q = queue()
    assert q.mark("a")
    clock.advance(0.02)
    assert not q.mark("a")  # the first due stands
    assert q.pop_due() == []
    assert q.next_due() == 100.05
    clock.advance(0.03)
    assert q.pop_due() == ["a"]
    assert q.pop_due() == []


def test_a_mark_during_a_flush_flushes_again_right_after() -> None:
    clock, q = queue()
    q.mark("a")
    clock.advance(COALESCE)
    assert q.pop_due() == ["a"]
    assert not q.mark("a")  # being flushed
    assert q.waiting == 1
    assert q.done("a")
    clock.advance(COALESCE)
    assert q.pop_due() == ["a"]
    assert not q.done("a")
    assert not q.busy


def test_a_deferral_delays_every_flush_until_it_ends() -> None:
    clock, q = queue()
    q.mark("a")
    clock.advance(COALESCE)
    q.pop_due()
    q.defer("a", 110.0)
    q.mark("a")
    q.done("a")
    clock.advance(5)
    assert q.pop_due() == []
    assert q.next_due() == 110.0
    clock.advance(5)
    assert q.pop_due() == ["a"]


def test_a_flush_asked_for_later_is_booked_when_the_flush_ends() -> None:
    clock, q = queue()
    q.mark("a")
    clock.advance(COALESCE)
    q.pop_due()
    assert not q.at("a", 110.0)  # asked for during the flush
    assert not q.at("a", 105.0)  # the sooner one counts
    assert q.done("a")
    assert q.next_due() == 105.0
    assert q.mark("a")  # a change before then is flushed sooner
    clock.advance(COALESCE)
    assert q.pop_due() == ["a"]


def test_unknown_and_forgotten_pods_are_never_due() -> None:
    clock, q = queue()
    assert not q.at("ghost", 101.0)
    q.mark("a")
    q.forget("a")
    clock.advance(1)
    assert q.pop_due() == []
    assert "a" not in q
    assert not q.done("a")


def test_shutdown_flushes_what_is_pending_now_and_books_nothing_later() -> None:
    clock, q = queue()
    q.mark("a")
    clock.advance(COALESCE)
    q.pop_due()
    q.defer("a", 200.0)  # a failed flush: backing off
    q.mark("a")
    q.done("a")
    q.mark("b")
    clock.advance(COALESCE)
    assert q.pop_due() == ["b"]
    q.at("b", 150.0)
    q.finish_now()
    assert q.pop_due() == ["a"]  # no coalescing, no deferral
    assert not q.done("b")  # its later flush is dropped
    assert not q.at("a", 150.0)
    q.done("a")
    assert not q.busy
