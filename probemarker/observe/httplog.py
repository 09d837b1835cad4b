"""What aiohttp's HTTP server reports about the health and metrics server's requests.

Stage: logging (edge). Input: aiohttp's calls to its server logger (a request it could
not parse, a handler that raised), through a `logging.Logger` that aiohttp is given
instead of its own `aiohttp.server` (which writes through the standard `logging`
module, unconfigured here: a plain-text traceback per malformed request, so a client
sending garbage in a loop would fill the log). Output: structlog lines, at most one a
minute per kind with `held_back` (`Repeats`), and `ServerStats.bad_requests`.

- A request aiohttp refused to parse (`HttpProcessingError`: a line or header too long,
  too many headers, not HTTP at all) is the client's doing: `metrics.bad_request`, a
  warning, with the error and the peer's address, no traceback; counted.
- Anything else (one of our handlers raised: a bug) is `metrics.handler_error` at
  error level with its traceback.
- aiohttp's debug-level reports (a first request that is not HTTP at all, such as TLS
  sent to a plain port) are dropped, as aiohttp means them to be unless debugging;
  a refused request among them is still counted.
"""

from __future__ import annotations

import logging
from typing import Any

import structlog
from aiohttp.http_exceptions import HttpProcessingError

from probemarker.kit.clock import Clock
from probemarker.kit.repeats import Repeats
from probemarker.observe.connections import ServerStats

__all__ = ["ServerLog"]

log = structlog.get_logger("probemarker.observe.serve")


class ServerLog(logging.Logger):
    """aiohttp's server logger for one server; see the module docstring."""

    def __init__(self, *, clock: Clock, stats: ServerStats, repeats: Repeats) -> None:
        super().__init__("probemarker.metrics.http")
        self._clock = clock
        self._stats = stats
        self._repeats = repeats

    def __repr__(self) -> str:
        return "ServerLog()"

    def debug(self, msg: object, *args: object, **kwargs: Any) -> None:
        """Dropped (see the module docstring); a request it refused is still counted."""
        if isinstance(kwargs.get("exc_info"), HttpProcessingError):
            self._stats.bad_requests += 1

    def exception(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._report(msg, args, kwargs.get("exc_info"))

    def error(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._report(msg, args, kwargs.get("exc_info"))

    def warning(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._report(msg, args, kwargs.get("exc_info"))

    def _report(self, msg: object, args: tuple[object, ...], exc_info: object) -> None:
        error = exc_info if isinstance(exc_info, BaseException) else None
        bad_request = isinstance(error, HttpProcessingError)
        if bad_request:
            self._stats.bad_requests += 1
        kind = type(error).__name__ if error is not None else str(msg)
        held = self._repeats.fields(("http", kind), self._clock.now())
        if held is None:
            return
        text = str(msg) % args if args else str(msg)  # "Error handling request from <peer>"
        fields: dict[str, Any] = {"message": text, **held}
        if bad_request:
            assert error is not None
            log.warning("metrics.bad_request", error=f"{kind}: {error}", **fields)
        else:
            log.error("metrics.handler_error", exc_info=error or True, **fields)
