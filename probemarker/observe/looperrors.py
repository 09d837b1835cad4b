"""What the event loop reports on its own: one structured line per kind, at most once a
minute.

Stage: logging (edge). Input: the contexts asyncio hands its exception handler (an
exception nobody retrieved from a task, a callback that raised, a transport's error;
`loop.call_exception_handler`). Output: a `loop.exception` line at error level through
structlog, like every other line of the daemon (asyncio's default handler writes
through the standard `logging` module, which the daemon does not configure: its lines
would come out as plain multi-line text in the middle of the JSON).

A kind is the context's message and the exception's class. The first of a kind is
logged at once, with its traceback; the same kind again within a minute is only
counted, and the next line says how many were held back (`Repeats`, as for every repeating failure:
docs/operations.md). The event loop's own accept loop once logged a traceback per
failed `accept()` this way, 97,000 lines in 10 s (issue 22); the health server has its
own accept loop now (accept.py), and this keeps any other repeating report as quiet.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from probemarker.kit.clock import Clock
from probemarker.kit.repeats import Repeats

__all__ = ["LoopErrors", "loop_error_key"]

log = structlog.get_logger("probemarker.loop")


def loop_error_key(context: dict[str, Any]) -> tuple[str, str]:
    """The kind of a report: its message and its exception's class."""
    exception = context.get("exception")
    kind = type(exception).__name__ if exception is not None else ""
    return (str(context.get("message") or "unhandled exception in event loop"), kind)


class LoopErrors:
    """An exception handler for the running loop (`install`); see the module docstring."""

    def __init__(self, *, clock: Clock, repeats: Repeats | None = None) -> None:
        self._clock = clock
        self._repeats = repeats or Repeats()
        self.reported = 0  # every report, logged or held back

    def __repr__(self) -> str:
        return f"LoopErrors(reported={self.reported})"

    def install(self) -> None:
        asyncio.get_running_loop().set_exception_handler(self.handle)

    def handle(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        self.reported += 1
        key = loop_error_key(context)
        held = self._repeats.fields(key, self._clock.now())
        if held is None:
            return
        exception = context.get("exception")
        fields: dict[str, Any] = {"message": key[0], **held}
        if exception is not None:
            fields["error"] = f"{key[1]}: {exception}"
        # What asyncio names besides the exception: the task, future, handle or
        # transport concerned, as their reprs.
        for name in ("task", "future", "handle", "transport", "protocol", "socket"):
            if name in context:
                fields[name] = repr(context[name])
        if isinstance(exception, BaseException):
            fields["exc_info"] = exception
        log.error("loop.exception", **fields)
