"""The token bucket: its pure arithmetic, the rate it grants, FIFO order, cancellation.

Time is a fake clock throughout: nothing here asserts anything about wall-clock time.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable

import pytest

from probemarker.kube.write.ratelimit import BucketState, TokenBucket, delay_for_token, refill
from tests.fakes import FakeClock, until

# -- the pure arithmetic -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("tokens", "at", "now", "qps", "burst", "expected"),
    [
        pytest.param(0.0, 10.0, 10.0, 5.0, 10, 0.0, id="no-time-no-tokens"),
        pytest.param(0.0, 10.0, 11.0, 5.0, 10, 5.0, id="one-second-at-5qps"),
        pytest.param(3.0, 10.0, 10.5, 2.0, 10, 4.0, id="half-second-at-2qps"),
        pytest.param(9.0, 10.0, 20.0, 5.0, 10, 10.0, id="capped-at-burst"),
        pytest.param(10.0, 10.0, 99.0, 5.0, 10, 10.0, id="full-stays-full"),
        pytest.param(-1.0, 10.0, 10.5, 4.0, 3, 1.0, id="from-a-debt"),
        pytest.param(2.0, 10.0, 9.0, 5.0, 10, 2.0, id="clock-backwards-adds-nothing"),
        pytest.param(0.0, 0.0, 0.1, 0.5, 1, 0.05, id="slow-rate-fraction"),
    ],
)
def test_refill(
    tokens: float, at: float, now: float, qps: float, burst: int, expected: float
) -> None:
    state = refill(BucketState(tokens=tokens, at=at), now=now, qps=qps, burst=burst)
    assert state.tokens == pytest.approx(expected)
    assert state.at == now


@pytest.mark.parametrize(
    ("tokens", "qps", "expected"),
    [
        pytest.param(1.0, 5.0, 0.0, id="one-token-now"),
        pytest.param(3.5, 5.0, 0.0, id="several-tokens-now"),
        pytest.param(0.0, 5.0, 0.2, id="empty-at-5qps"),
        pytest.param(0.5, 2.0, 0.25, id="half-token-at-2qps"),
        pytest.param(0.0, 0.1, 10.0, id="empty-at-0.1qps"),
        pytest.param(0.999, 1.0, 0.001, id="almost-one"),
        pytest.param(1.0 - 1e-12, 5.0, 0.0, id="rounding-slack-is-one"),
    ],
)
def test_delay_for_token(tokens: float, qps: float, expected: float) -> None:
    assert delay_for_token(tokens, qps=qps) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("qps", "burst"),
    [
        pytest.param(0.0, 1, id="zero-qps"),
        pytest.param(-1.0, 1, id="negative-qps"),
        pytest.param(float("inf"), 1, id="infinite-qps"),
        pytest.param(float("nan"), 1, id="nan-qps"),
        pytest.param(1.0, 0, id="zero-burst"),
    ],
)
def test_bad_settings_are_refused(qps: float, burst: int) -> None:
    with pytest.raises(ValueError, match="must be"):
        TokenBucket(qps=qps, burst=burst, clock=FakeClock())


# -- the bucket --------------------------------------------------------------------------


async def test_burst_is_granted_without_waiting() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=1.0, burst=5, clock=clock)
    for _ in range(5):
        await bucket.acquire()
    assert clock.sleeps == []
    assert (bucket.granted, bucket.waited) == (5, 0)
    assert bucket.tokens == pytest.approx(0.0)


@pytest.mark.parametrize(
    ("qps", "burst", "calls"),
    [
        pytest.param(5.0, 1, 40, id="5qps-burst1"),
        pytest.param(5.0, 10, 60, id="5qps-burst10"),
        pytest.param(0.5, 3, 12, id="0.5qps-burst3"),
        pytest.param(100.0, 20, 300, id="100qps-burst20"),
    ],
)
async def test_grants_never_exceed_burst_plus_rate(qps: float, burst: int, calls: int) -> None:
    clock = FakeClock(auto=True)
    bucket = TokenBucket(qps=qps, burst=burst, clock=clock)
    start = clock.now()
    granted: list[float] = []

    async def one() -> None:
        await bucket.acquire()
        granted.append(clock.now())

    async with asyncio.TaskGroup() as group:
        for _ in range(calls):
            group.create_task(one())
    assert len(granted) == calls
    # Every window [a, b] holds at most burst + qps * (b - a) grants (a tiny float slack).
    for i, j in itertools.combinations(range(calls), 2):
        assert j - i + 1 <= burst + qps * (granted[j] - granted[i]) + 1e-6
    # And the limiter is not slower than it must be: the last grant is exactly on time.
    assert granted[-1] - start == pytest.approx((calls - burst) / qps)


async def test_waiters_are_served_in_arrival_order() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=1.0, burst=1, clock=clock)
    await bucket.acquire()  # the bucket is empty now
    order: list[int] = []

    async def one(i: int) -> None:
        await bucket.acquire()
        order.append(i)

    def settled(granted: int) -> Callable[[], bool]:
        # `granted` done, and only the head of the rest sleeps (the others wait their turn).
        return lambda: len(order) == granted and clock.sleeping == (granted < 5)

    async with asyncio.TaskGroup() as group:
        for i in range(5):
            group.create_task(one(i))
        await until(lambda: bucket.waiting == 5 and clock.sleeping == 1)
        for granted in range(1, 6):
            clock.advance(1.0)
            await until(settled(granted))
    assert order == [0, 1, 2, 3, 4]


async def test_a_late_caller_does_not_overtake_a_waiter() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=1.0, burst=1, clock=clock)
    await bucket.acquire()
    order: list[str] = []

    async def one(name: str) -> None:
        await bucket.acquire()
        order.append(name)

    async with asyncio.TaskGroup() as group:
        group.create_task(one("first"))
        await until(lambda: clock.sleeping == 1)
        clock.advance(1.0)  # a token is there now, but "first" has not taken it yet
        assert bucket.tokens == pytest.approx(1.0)
        group.create_task(one("late"))
        await until(lambda: len(order) == 1)
        assert order == ["first"]
        clock.advance(1.0)
    assert order == ["first", "late"]


async def test_a_cancelled_head_takes_no_token_and_the_next_moves_up() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=1.0, burst=1, clock=clock)
    await bucket.acquire()
    head = asyncio.create_task(bucket.acquire())
    second = asyncio.create_task(bucket.acquire())
    await until(lambda: bucket.waiting == 2 and clock.sleeping == 1)
    head.cancel()
    with pytest.raises(asyncio.CancelledError):
        await head
    await until(lambda: bucket.waiting == 1 and clock.sleeping == 1)
    clock.advance(1.0)
    await second
    assert (bucket.granted, bucket.waiting) == (2, 0)


async def test_a_cancelled_waiter_behind_the_head_leaves_the_queue() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=1.0, burst=1, clock=clock)
    await bucket.acquire()
    head = asyncio.create_task(bucket.acquire())
    middle = asyncio.create_task(bucket.acquire())
    last = asyncio.create_task(bucket.acquire())
    await until(lambda: bucket.waiting == 3)
    middle.cancel()
    with pytest.raises(asyncio.CancelledError):
        await middle
    assert bucket.waiting == 2
    clock.advance(1.0)
    await head
    await until(lambda: clock.sleeping == 1)
    clock.advance(1.0)
    await last
    assert (bucket.granted, bucket.waiting) == (3, 0)


async def test_a_cancelled_head_that_was_just_handed_the_turn_passes_it_on() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=1.0, burst=1, clock=clock)
    await bucket.acquire()
    first = asyncio.create_task(bucket.acquire())
    second = asyncio.create_task(bucket.acquire())
    third = asyncio.create_task(bucket.acquire())
    await until(lambda: bucket.waiting == 3 and clock.sleeping == 1)
    clock.advance(1.0)
    await first  # `second` has been handed the turn but has not run yet
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    await until(lambda: clock.sleeping == 1)
    clock.advance(1.0)
    await third
    assert (bucket.granted, bucket.waiting) == (3, 0)


async def test_a_refunded_token_is_there_again_and_the_bucket_never_overfills() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=1.0, burst=2, clock=clock)
    await bucket.acquire()
    await bucket.acquire()
    bucket.refund()  # taken for a write that had nothing to send
    assert (bucket.granted, bucket.tokens) == (1, pytest.approx(1.0))
    await bucket.acquire()
    assert clock.sleeps == []  # the refunded token, not a wait
    clock.advance(10.0)
    bucket.refund()
    assert bucket.tokens == pytest.approx(2.0)  # at most `burst`
