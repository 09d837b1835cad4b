"""demo/stopping.py: Ctrl-C and SIGTERM are recorded, never raised, and handed to the
demo's loop while it listens (those received before it listened first, in order)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import anyio
import anyio.lowlevel
import pytest

from probemarker.demo.stopping import StopSignals


@pytest.fixture
def signals() -> Iterator[StopSignals]:
    installed = StopSignals()
    installed.install()
    try:
        yield installed
    finally:
        installed.restore()


def test_a_signal_is_recorded_not_raised(signals: StopSignals) -> None:
    """Python's default raised KeyboardInterrupt wherever the demo was: in an import,
    in the sim's start, in the loop's teardown."""
    os.kill(os.getpid(), signal.SIGINT)
    os.kill(os.getpid(), signal.SIGTERM)
    assert signals.received == [signal.SIGINT, signal.SIGTERM]


async def test_signals_before_the_loop_listened_are_handed_over_first(
    signals: StopSignals,
) -> None:
    os.kill(os.getpid(), signal.SIGTERM)  # during the imports, say
    got: list[int] = []
    second = anyio.Event()

    def deliver(signum: int) -> None:
        got.append(signum)
        if len(got) == 2:
            second.set()

    with anyio.fail_after(5), signals.delivering(deliver):
        await anyio.lowlevel.checkpoint()
        assert got == [signal.SIGTERM]
        os.kill(os.getpid(), signal.SIGINT)
        await second.wait()
    assert got == [signal.SIGTERM, signal.SIGINT]


async def test_after_delivering_a_signal_is_only_recorded(signals: StopSignals) -> None:
    got: list[int] = []
    with signals.delivering(got.append):
        pass
    os.kill(os.getpid(), signal.SIGINT)  # the loop's teardown, say
    for _ in range(3):  # a callback, had one been scheduled, would run in these
        await anyio.lowlevel.checkpoint()
    assert got == []
    assert signals.received == [signal.SIGINT]


def test_restore_gives_back_the_handlers_found() -> None:
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    signals = StopSignals()
    signals.install()
    signals.install()  # twice: still the handlers found the first time
    assert signal.getsignal(signal.SIGINT) != before[0]
    signals.restore()
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
