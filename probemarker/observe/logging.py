"""Structured logs: JSON lines (orjson) in a cluster, readable lines on a terminal.

Stage: edge (output). One line per transition, write retry or watch restart, never
one per probe run (docs/operations.md).

A log line carries what markers and pods hold (probe names, which the API lets carry
a C1 CSI or a bidi override; values; messages), and it is read on a terminal
(`kubectl logs`, a local run). So no control or format character of theirs reaches
it raw (`api.fields.printable`, as `probemarker check` shows them): in JSON they
become `\\uXXXX` escapes (the same document for a parser), on the console a value
holding one is shown quoted and escaped, as the console already shows a value with
spaces.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import orjson
import structlog

from probemarker.kit.printable import printable, printable_json

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}


def _dumps(event: Any, default: Any = None) -> str:
    return printable_json(orjson.dumps(event, default=default or str).decode())


class _Escaped:
    """A string value the console renderer shows as `repr` gives it: quoted, escaped."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"'{self.text}'"


def _escape_for_console(_logger: Any, _name: str, event: Any) -> Any:
    """Each top-level string value with a character `printable` escapes, escaped (the
    console renderer prints a string without spaces or quotes as it is; anything
    else it prints as `repr`, which escapes them itself)."""
    for key, value in event.items():
        if isinstance(value, str) and key != "exception":
            shown = printable(value)
            if shown != value:
                event[key] = _Escaped(shown)
    return event


def configure_logging(*, format: str, level: str, stream: TextIO | None = None) -> None:
    """`format`: auto (console on a terminal, else JSON), json or console."""
    out = stream or sys.stderr
    console = format == "console" or (format == "auto" and out.isatty())
    renderer: Any = (
        structlog.dev.ConsoleRenderer(colors=out.isatty())
        if console
        else structlog.processors.JSONRenderer(serializer=_dumps)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            *([_escape_for_console] if console else []),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.ERROR)),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )
