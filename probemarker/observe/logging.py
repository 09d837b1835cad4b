"""Structured logs: JSON lines (orjson) in a cluster, readable lines on a terminal.

Stage: edge (output). One line per transition, write retry or watch restart, never
one per probe run (SPEC §4).
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import orjson
import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}


def _dumps(event: Any, default: Any = None) -> str:
    return orjson.dumps(event, default=default or str).decode()


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
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.ERROR)),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )
