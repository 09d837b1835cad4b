"""Ctrl-C and SIGTERM for `probemarker demo`, from its first moment to its last.

Stage: demo edge (signals). Input: SIGINT and SIGTERM. Output: the signals received
(`received`), and a callback run in the demo's event loop for each one while the demo
listens (`delivering`).

Why not Python's default: SIGINT raises KeyboardInterrupt wherever the main thread is.
In the demo that is, in turn, an import (the demo's take a second or more: the sim,
kubernetes_asyncio), the sim starting, the daemon stopping, the event loop's teardown:
a traceback, no summary, and what was started is not cleaned up. Nor anyio's signal
receiver alone: it listens only inside its `with`, and on leaving it asyncio puts
Python's default back.

So `StopSignals` is installed before the demo's imports (`cli.demo_command`) and kept
until the process ends. Its handler only records the signal and, while `delivering`
is active, hands it to the loop with `loop.call_soon_threadsafe`, which may be called
from a signal handler (asyncio's own Runner does so for SIGINT). Signals received
before the loop listened are handed over when `delivering` starts, so a Ctrl-C during
the imports stops the demo as soon as it can stop, with the summary so far.

Invariant: the handler never raises: a signal outside `delivering` (or after the loop
closed) is recorded and nothing more.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

__all__ = ["STOP_SIGNALS", "StopSignals"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

Deliver = Callable[[int], None]


class StopSignals:
    """See the module docstring. `install` in the main thread, before anything slow."""

    def __init__(self, signals: tuple[signal.Signals, ...] = STOP_SIGNALS) -> None:
        self._signals = signals
        self.received: list[int] = []
        self._previous: dict[signal.Signals, Any] = {}
        self._target: tuple[asyncio.AbstractEventLoop, Deliver] | None = None

    def __repr__(self) -> str:
        return f"StopSignals(received={self.received}, delivering={self._target is not None})"

    def install(self) -> None:
        for sig in self._signals:
            self._previous.setdefault(sig, signal.signal(sig, self._handle))

    def restore(self) -> None:
        """Put back the handlers found by `install` (for tests and callers that go on)."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self.received.append(signum)
        target = self._target
        if target is None:
            return
        loop, deliver = target
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(deliver, signum)

    @contextlib.contextmanager
    def delivering(self, deliver: Deliver) -> Iterator[None]:
        """Within this block (in the running loop), `deliver(signum)` runs in the loop for
        each signal: first for those received before, in order, then as they come."""
        import asyncio  # not at import: the command line installs this before anything

        loop = asyncio.get_running_loop()
        for signum in self.received:
            loop.call_soon(deliver, signum)
        self._target = (loop, deliver)
        try:
            yield
        finally:
            self._target = None
