"""Exec commands that may still run after their probe's run ended: at most one a probe.

Stage: probe (owned by the api exec handler; the engine asks `busy` through the
runner before a run). Input: `hold(key, stream)` from the exec stream when a run's
deadline passed before the command's exit status. Output: `busy(key)`, and counters
for the metrics (`HoldStats`).

Why: on a real cluster, closing an exec stream does not stop its command
(containerd's streaming exec waits for the process whatever the client does;
docs/kube-exec.md), so a probe that started its next command while the last one
still ran would pile one process per period into the container (issue 23: 13
`sleep 30` at 24 s). A timed-out stream is therefore kept open, read and its output
dropped past the 1 KiB caps, until the command ends (its status arrives or the
connection ends); the probe's periods meanwhile are skipped by the engine.

Invariants:
- a key has at most one held stream; `busy(key)` is True while it is held;
- a stream is held at most `limit` seconds (wall time), then aborted and counted
  (`limit_hits["time"]`): after that the command may still run, but a probe is never
  silenced for longer than the limit;
- at most `max_streams` are held at once (the client's exec pool has room for
  exactly that many beside the probe runs, `app.client_settings`): a stream that
  finds no room is aborted at once, counted (`limit_hits["streams"]`), and its key
  stays busy for `limit` seconds all the same (its command may still run, and
  nothing tells when it ends);
- held streams never take a probe run's slot (`--max-concurrent-probes`) nor a
  connection a run needs;
- leaving the `async with` aborts every held stream (shutdown).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Protocol, Self

import structlog

from probemarker.kube.ratelimit import MONOTONIC, Clock

__all__ = ["CommandHolds", "HoldSettings", "HoldSlot", "HoldStats", "Holdable"]

log = structlog.get_logger(__name__)

_REMEMBERED = 65536  # keys kept busy by time alone (a node runs far fewer probes)


class Holdable(Protocol):
    """A stream whose command may still run (`kube.execstream.HeldStream`)."""

    async def finish(self) -> None:
        """Read until the command's end is seen; close the stream."""

    def abort(self) -> None:
        """Drop the connection now."""


@dataclass(frozen=True, slots=True)
class HoldSettings:
    limit: float = 600.0  # seconds a stream is held at most (--exec-hold-seconds)
    max_streams: int = 64  # streams held at once (--max-held-exec-streams)

    def __post_init__(self) -> None:
        if not self.limit > 0 or self.max_streams < 0:
            raise ValueError("holds need limit > 0 and max_streams >= 0")


@dataclass(slots=True)
class HoldStats:
    held_total: int = 0  # streams held past their run's deadline
    ended: int = 0  # of them, those whose command's end was seen
    limit_hits: Counter[str] = field(default_factory=Counter)  # "time", "streams"


class HoldSlot:
    """The hold of one key, as the exec stream sees it."""

    __slots__ = ("_holds", "_key")

    def __init__(self, holds: CommandHolds, key: Hashable) -> None:
        self._holds, self._key = holds, key

    def admit(self) -> bool:
        """Whether a stream can be held now; if not, the key is busy for the limit."""
        return self._holds.admit(self._key)

    def hold(self, stream: Holdable) -> None:
        self._holds.hold(self._key, stream)


class CommandHolds:
    """See the module docstring; `async with` it for its tasks to have a home."""

    def __init__(self, *, settings: HoldSettings | None = None, clock: Clock = MONOTONIC) -> None:
        self.settings = settings or HoldSettings()
        self._clock = clock
        self.stats = HoldStats()
        self._held: dict[Hashable, asyncio.Task[None]] = {}
        self._until: dict[Hashable, float] = {}  # busy by time alone
        self._group: asyncio.TaskGroup | None = None

    def __repr__(self) -> str:
        return f"CommandHolds(held={self.held}, limit={self.settings.limit:g}s)"

    @property
    def held(self) -> int:
        return len(self._held)

    def busy(self, key: Hashable) -> bool:
        """Whether `key`'s previous command may still run."""
        if key in self._held:
            return True
        until = self._until.get(key)
        if until is None:
            return False
        if until > self._clock.now():
            return True
        del self._until[key]
        return False

    def slot(self, key: Hashable) -> HoldSlot:
        return HoldSlot(self, key)

    def admit(self, key: Hashable) -> bool:
        if self._group is not None and len(self._held) < self.settings.max_streams:
            return True
        if self._group is not None:  # full (not entered: only a handler used bare, in tests)
            self.stats.limit_hits["streams"] += 1
            log.warning(
                "exec.hold_full",
                probe=str(key),
                held=len(self._held),
                hint="its command may still run; the probe waits out --exec-hold-seconds "
                "(raise --max-held-exec-streams)",
            )
        self._until[key] = self._clock.now() + self.settings.limit
        if len(self._until) > _REMEMBERED:
            self._until.pop(next(iter(self._until)))
        return False

    def hold(self, key: Hashable, stream: Holdable) -> None:
        """Keep `stream` until its command ends or the limit (after `admit()`)."""
        if self._group is None or key in self._held:
            stream.abort()  # cannot happen after admit(); never leak a connection
            return
        self.stats.held_total += 1
        self._held[key] = self._group.create_task(self._keep(key, stream))

    async def _keep(self, key: Hashable, stream: Holdable) -> None:
        try:
            async with asyncio.timeout(self.settings.limit):
                await stream.finish()
            self.stats.ended += 1
        except TimeoutError:
            self.stats.limit_hits["time"] += 1
            log.warning(
                "exec.hold_limit",
                probe=str(key),
                seconds=self.settings.limit,
                hint="the command still runs in the container; the probe starts again",
            )
        except Exception as err:  # never let one stream take the others down
            log.error("exec.hold_failed", probe=str(key), error=repr(err))
        finally:
            stream.abort()
            self._held.pop(key, None)

    async def __aenter__(self) -> Self:
        self._group = asyncio.TaskGroup()
        await self._group.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        group, self._group = self._group, None
        for task in self._held.values():
            task.cancel()
        if group is not None:
            await group.__aexit__(None, None, None)
        self._until.clear()
