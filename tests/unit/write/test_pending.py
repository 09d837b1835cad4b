"""Why a pod's write waits (`why_waiting`), in the order the writer meets the reasons."""

from __future__ import annotations

import pytest

from probemarker.write.pending import FlushState, WriteWait, why_waiting

NOW = 100.0


@pytest.mark.parametrize(
    ("flush", "message_until", "waiters", "expected"),
    [
        (FlushState(due=NOW + 0.05), None, 0, (WriteWait.COALESCING, NOW + 0.05)),
        (FlushState(due=NOW - 1), None, 3, (WriteWait.WRITE_BUDGET, None)),
        (FlushState(flushing=True), None, 1, (WriteWait.WRITE_BUDGET, None)),
        (FlushState(flushing=True), None, 0, (WriteWait.SENDING, None)),
        (FlushState(due=NOW + 7), NOW + 7, 0, (WriteWait.MESSAGE_REFRESH, NOW + 7)),
        # a message whose time has come goes with the next flush
        (FlushState(due=NOW + 0.05), NOW - 1, 0, (WriteWait.COALESCING, NOW + 0.05)),
        (FlushState(due=NOW + 4, hold_until=NOW + 4), NOW + 9, 2, (WriteWait.BACKOFF, NOW + 4)),
        (FlushState(), None, 0, (WriteWait.NOT_QUEUED, None)),
    ],
)
def test_why_a_write_waits(
    flush: FlushState,
    message_until: float | None,
    waiters: int,
    expected: tuple[WriteWait, float | None],
) -> None:
    assert why_waiting(flush, now=NOW, message_until=message_until, budget_waiters=waiters) == (
        expected
    )


def test_the_queue_tells_where_a_pod_stands() -> None:
    from probemarker.write.queue import FlushQueue
    from tests.fakes import FakeClock

    clock = FakeClock(NOW)
    queue: FlushQueue[str] = FlushQueue(clock=clock, coalesce=0.05)
    assert queue.state("a") is None
    queue.mark("a")
    assert queue.state("a") == FlushState(due=NOW + 0.05)
    clock.advance(0.05)
    assert queue.pop_due() == ["a"]
    assert queue.state("a") == FlushState(flushing=True)
    queue.hold("a", NOW + 5)
    queue.done("a")
    assert queue.state("a") == FlushState(hold_until=NOW + 5)
