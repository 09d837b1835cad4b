"""observe/looperrors.py: the event loop's own reports as structured lines, one per
kind at most once a minute, the rest counted; installed on a running loop, a task's
unretrieved exception is logged through it and nothing reaches `logging`."""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

import pytest
from structlog.testing import capture_logs

from probemarker.observe.looperrors import LoopErrors, loop_error_key
from tests.fakes import FakeClock

KEYS = [
    pytest.param(
        {"message": "socket.accept() out of system resource", "exception": OSError(24, "x")},
        ("socket.accept() out of system resource", "OSError"),
        id="accept",
    ),
    pytest.param({"message": "Unclosed connection"}, ("Unclosed connection", ""), id="no-error"),
    pytest.param(
        {"exception": KeyError("k")},
        ("unhandled exception in event loop", "KeyError"),
        id="no-message",
    ),
]


@pytest.mark.parametrize(("context", "key"), KEYS)
def test_loop_error_key(context: dict[str, Any], key: tuple[str, str]) -> None:
    assert loop_error_key(context) == key


def accept_failure() -> dict[str, Any]:
    return {
        "message": "socket.accept() out of system resource",
        "exception": OSError(24, "Too many open files"),
        "socket": "<asyncio.TransportSocket fd=6>",
    }


def test_a_repeating_report_is_logged_once_a_minute() -> None:
    clock = FakeClock()
    errors = LoopErrors(clock=clock)
    loop = asyncio.new_event_loop()
    try:
        with capture_logs() as logs:
            for _ in range(1000):  # a thousand in the same second
                errors.handle(loop, accept_failure())
            errors.handle(loop, {"message": "another kind", "exception": ValueError("v")})
            clock.advance(60)
            errors.handle(loop, accept_failure())
    finally:
        loop.close()
    assert errors.reported == 1002
    assert [line["message"] for line in logs] == [
        "socket.accept() out of system resource",
        "another kind",
        "socket.accept() out of system resource",
    ]
    first, other, later = logs
    assert first["event"] == "loop.exception"
    assert first["log_level"] == "error"
    assert first["error"] == "OSError: [Errno 24] Too many open files"
    assert first["socket"] == "'<asyncio.TransportSocket fd=6>'"
    assert isinstance(first["exc_info"], OSError)  # the traceback, once per line
    assert "held_back" not in first
    assert other["error"] == "ValueError: v"
    assert later["held_back"] == 999


async def test_installed_it_logs_what_the_loop_reports_and_logging_gets_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()
    errors = LoopErrors(clock=FakeClock())
    try:
        errors.install()
        with capture_logs() as logs, caplog.at_level(logging.DEBUG, logger="asyncio"):

            async def fail() -> None:
                raise RuntimeError("nobody awaits me")

            task = loop.create_task(fail())  # its exception left unretrieved, on purpose
            await asyncio.wait([task])
            del task
            gc.collect()  # the unretrieved exception is reported when the task goes
    finally:
        loop.set_exception_handler(previous)
    (line,) = logs
    assert line["message"] == "Task exception was never retrieved"
    assert line["error"] == "RuntimeError: nobody awaits me"
    assert "fail()" in line["future"]
    assert not caplog.records
