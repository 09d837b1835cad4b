"""Why a pod's write waits (`why_waiting`), in the order the writer meets the reasons."""

from __future__ import annotations

import pytest

from probemarker.write.pending import FlushState, WriteWait, why_waiting

NOW = 100.0


@pytest.mark.parametrize(
    ("flush", "message_until", "expected"),
    [
        pytest.param(
            FlushState(due=NOW + 0.05), None, (WriteWait.COALESCING, NOW + 0.05), id="coalescing"
        ),
        pytest.param(FlushState(due=NOW - 1), None, (WriteWait.WRITE_BUDGET, None), id="due"),
        pytest.param(FlushState(due=NOW), None, (WriteWait.WRITE_BUDGET, None), id="due-now"),
        # Its token is taken once its flush starts, however many others wait for one.
        pytest.param(FlushState(flushing=True), None, (WriteWait.SENDING, None), id="started"),
        pytest.param(
            FlushState(due=NOW + 7),
            NOW + 7,
            (WriteWait.MESSAGE_REFRESH, NOW + 7),
            id="message-held",
        ),
        pytest.param(
            FlushState(due=NOW + 0.05),
            NOW - 1,
            (WriteWait.COALESCING, NOW + 0.05),
            id="a-message-whose-time-has-come-goes-with-the-next-flush",
        ),
        pytest.param(
            FlushState(due=NOW + 4, deferred_until=NOW + 4),
            NOW + 9,
            (WriteWait.BACKOFF, NOW + 4),
            id="backoff-first",
        ),
        pytest.param(FlushState(), None, (WriteWait.NOT_QUEUED, None), id="not-queued"),
    ],
)
def test_why_a_write_waits(
    flush: FlushState,
    message_until: float | None,
    expected: tuple[WriteWait, float | None],
) -> None:
    assert why_waiting(flush, now=NOW, message_until=message_until) == expected


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
    queue.defer("a", NOW + 5)
    queue.done("a")
    assert queue.state("a") == FlushState(deferred_until=NOW + 5)
