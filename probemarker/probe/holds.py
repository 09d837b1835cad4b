"""Exec commands that may still run after their probe's run ended: at most one per
probe and command in a container, also across a restart of the daemon.

Stage: probe (owned by the api exec handler). Input: `slot(...).hold(stream)` from
the exec stream when a run's deadline passed before the command's exit status;
`seed(...)` from the engine when a probe starts on a pod whose ownership record says
that a command of it may still run (write/ownership.py, member `h`). Output:
`busy(...)` (the engine skips the period), `held(...)` (what the engine puts in the
pod's record), a `changed(probe)` call when a hold starts or ends (the engine plans
the pod again: the record follows, one write each), and counters (`HoldStats`).

Why: on a real cluster, closing an exec stream does not stop its command
(containerd's streaming exec waits for the process whatever the client does;
docs/kube-exec.md), so a probe that started its next command while the last one
still ran would pile one process per period into the container (issue 23: 13
`sleep 30` at 24 s). A timed-out stream is therefore kept open, read and its output
dropped past the 1 KiB caps, until the command ends (its status arrives); the
probe's periods meanwhile are skipped by the engine.

A hold belongs to the command it holds: it is keyed by (probe, `command_digest` of
the argv), so an edited command runs at the next period beside the old one, which
stays held, bounded and counted, until it ends (issue 30); so does a deleted probe's.
It also names the container instance (`container_mark` of its ID): a restarted
container has none of its old processes, so a hold of another instance holds nothing.

Across a restart (issue 30): the daemon's memory goes with it, the command does not.
So a hold is recorded on the pod when it starts (`held`), and the next daemon is
`seed`ed from the record: the same probe with the same command in the same container
instance is not run until the hold's limit, counted from the recorded start, has
passed. The api backend cannot see the command end (nothing in `pods/exec` tells of a
process started by another connection), so after a restart the limit alone ends it.

Invariants:
- a key has at most one hold; `busy` is True while it lasts;
- a hold lasts at most `limit` seconds (wall time) from its start, then ends and is
  counted (`limit_hits["time"]`): after that the command may still run, but a probe
  is never silenced for longer than the limit. A seeded hold ends at the recorded
  start + `limit`, and never later than `limit` from the seeding (a record's time is
  untrusted input);
- a stream whose connection ends without the command's exit status (an API server or
  kubelet restart cuts it; the command runs on) is held on by time, to its limit
  (`stats.lost`);
- at most `max_streams` streams are held at once (the client's exec pool has room for
  exactly that many beside the probe runs, `daemon.assembly.client_settings`): a stream that
  finds no room is aborted at once, counted (`limit_hits["streams"]`), and its key is
  held by time all the same (its command may still run, and nothing tells when it
  ends);
- held streams never take a probe run's slot (`--max-concurrent-probes`) nor a
  connection a run needs;
- leaving the `async with` aborts every held stream (shutdown) without a `changed`
  call: the record keeps saying that the command may still run, which it may.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Protocol, Self

import structlog

from probemarker.kit.clock import MONOTONIC, Clock
from probemarker.match.identity import HeldCommand

__all__ = ["CommandHolds", "HoldSettings", "HoldSlot", "HoldStats", "Holdable"]

log = structlog.get_logger(__name__)

_REMEMBERED = 65536  # keys held by time alone (a node runs far fewer probes)

Key = tuple[Hashable, str]  # (the probe, the command_digest of its command)


class Holdable(Protocol):
    """A stream whose command may still run (`kube.exec.execstream.HeldStream`)."""

    async def finish(self) -> bool:
        """Read until the stream ends; close it. True when the command's exit status
        came (it has ended), False when the stream ended without it."""

    def abort(self) -> None:
        """Drop the connection now."""


@dataclass(frozen=True, slots=True)
class HoldSettings:
    limit: float = 600.0  # seconds a command is held at most (--exec-hold-seconds)
    max_streams: int = 64  # streams held at once (--max-held-exec-streams)

    def __post_init__(self) -> None:
        if not self.limit > 0 or self.max_streams < 0:
            raise ValueError("holds need limit > 0 and max_streams >= 0")


@dataclass(slots=True)
class HoldStats:
    held_total: int = 0  # streams held past their run's deadline
    ended: int = 0  # of them, those whose command's end was seen
    lost: int = 0  # of them, those whose stream ended first: held on by time
    seeded: int = 0  # holds taken over from the pod's record after a restart
    limit_hits: Counter[str] = field(default_factory=Counter)  # "time", "streams"


@dataclass(slots=True)
class _Hold:
    container: str  # container_mark of the instance it runs in
    started: int  # wall time, whole seconds
    until: float  # the clock's time it ends at the latest
    stream: bool  # a stream is read for the command's end (else: held by time)
    task: asyncio.Task[None] | None = None


class HoldSlot:
    """The hold of one probe's command, as the exec stream sees it."""

    __slots__ = ("_container", "_holds", "_key")

    def __init__(self, holds: CommandHolds, key: Key, container: str) -> None:
        self._holds, self._key, self._container = holds, key, container

    def admit(self) -> bool:
        """Whether a stream can be held now; if not, the key is held by time."""
        return self._holds.admit(self._key, self._container)

    def hold(self, stream: Holdable) -> None:
        self._holds.hold(self._key, self._container, stream)


class CommandHolds:
    """See the module docstring; `async with` it for its tasks to have a home."""

    def __init__(
        self,
        *,
        settings: HoldSettings | None = None,
        clock: Clock = MONOTONIC,
        wall: Callable[[], float] = time.time,
        changed: Callable[[Hashable], None] = lambda probe: None,
    ) -> None:
        self.settings = settings or HoldSettings()
        self._clock, self._wall, self._changed = clock, wall, changed
        self.stats = HoldStats()
        self._holds: dict[Key, _Hold] = {}
        self._streams = 0
        self._group: asyncio.TaskGroup | None = None

    def __repr__(self) -> str:
        return (
            f"CommandHolds(held={self._streams}, by_time={len(self._holds) - self._streams}, "
            f"limit={self.settings.limit:g}s)"
        )

    @property
    def held(self) -> int:
        """Streams held now."""
        return self._streams

    @property
    def holding(self) -> int:
        """Commands held now: streams, and commands held by time alone."""
        return len(self._holds)

    def busy(self, probe: Hashable, command: str, container: str) -> bool:
        """Whether `probe`'s `command` may still run in the container instance
        `container` (a `container_mark`)."""
        return self._current((probe, command), container) is not None

    def held_command(self, probe: Hashable, command: str, container: str) -> HeldCommand | None:
        """What the pod's record says of `probe`'s `command` while it is held."""
        hold = self._current((probe, command), container)
        if hold is None or not hold.container:
            return None
        return HeldCommand(command=command, container=hold.container, started=hold.started)

    def slot(self, probe: Hashable, command: str, container: str) -> HoldSlot:
        return HoldSlot(self, (probe, command), container)

    def seed(self, probe: Hashable, held: HeldCommand, *, command: str, container: str) -> bool:
        """Hold `probe`'s `command` in `container` by time, as the pod's record says
        (`held`); False when the record speaks of another command or container
        instance, of a hold whose limit has passed, or the key is held already."""
        key = (probe, command)
        if held.command != command or not container or held.container != container:
            return False
        if key in self._holds:
            return False
        wall = self._wall()
        end = min(held.started + self.settings.limit, wall + self.settings.limit)
        if end <= wall:
            return False
        self._hold_by_time(key, container, held.started, self._clock.now() + (end - wall))
        self.stats.seeded += 1
        log.info(
            "exec.hold_seeded",
            probe=str(probe),
            seconds=round(end - wall),
            hint="the pod's record says its command may still run: the probe waits",
        )
        return True

    def admit(self, key: Key, container: str) -> bool:
        if self._group is not None and self._streams < self.settings.max_streams:
            return True
        if self._group is not None:  # full (not entered: only a handler used bare, in tests)
            self.stats.limit_hits["streams"] += 1
            log.warning(
                "exec.hold_full",
                probe=str(key[0]),
                held=self._streams,
                hint="its command may still run; the probe waits out --exec-hold-seconds "
                "(raise --max-held-exec-streams)",
            )
        self._drop(key)
        now = self._clock.now()
        self._hold_by_time(key, container, int(self._wall()), now + self.settings.limit)
        self._changed(key[0])
        return False

    def hold(self, key: Key, container: str, stream: Holdable) -> None:
        """Keep `stream` until its command ends or the limit (after `admit()`)."""
        existing = self._holds.get(key)
        if self._group is None or (existing is not None and existing.stream):
            stream.abort()  # cannot happen after admit(); never leak a connection
            return
        self._drop(key)  # a hold by time only, whose end came meanwhile
        self.stats.held_total += 1
        now = self._clock.now()
        hold = _Hold(container, int(self._wall()), now + self.settings.limit, stream=True)
        self._holds[key] = hold
        self._streams += 1
        hold.task = self._group.create_task(self._keep(key, hold, stream))
        self._changed(key[0])

    def _current(self, key: Key, container: str) -> _Hold | None:
        hold = self._holds.get(key)
        if hold is None or hold.stream:
            return hold  # a held stream ends with its command (a restarted container's too)
        if hold.until <= self._clock.now():
            self._end(key, hold)
            return None
        if container and hold.container and container != hold.container:
            self._drop(key)  # another instance of the container: the command died with the old
            self._changed(key[0])
            return None
        return hold

    def _hold_by_time(self, key: Key, container: str, started: int, until: float) -> None:
        hold = _Hold(container, started, until, stream=False)
        self._holds[key] = hold
        if self._group is not None:
            hold.task = self._group.create_task(self._expire(key, hold))
        if len(self._holds) > _REMEMBERED:
            oldest = next((k for k, h in self._holds.items() if not h.stream), None)
            if oldest is not None:
                self._drop(oldest)

    def _drop(self, key: Key) -> None:
        """Forget `key`'s hold (by time only) at once, its task cancelled."""
        hold = self._holds.get(key)
        if hold is None or hold.stream:
            return
        del self._holds[key]
        if hold.task is not None:
            hold.task.cancel()

    def _end(self, key: Key, hold: _Hold) -> None:
        """A hold by time whose limit has passed: counted, and the record follows."""
        if self._holds.get(key) is not hold:
            return
        del self._holds[key]
        if hold.task is not None and hold.task is not asyncio.current_task():
            hold.task.cancel()
        self._limit_hit(key)
        self._changed(key[0])

    def _limit_hit(self, key: Key) -> None:
        self.stats.limit_hits["time"] += 1
        log.warning(
            "exec.hold_limit",
            probe=str(key[0]),
            seconds=self.settings.limit,
            hint="its command may still run in the container; the probe starts again",
        )

    async def _expire(self, key: Key, hold: _Hold) -> None:
        await self._clock.sleep(max(0.0, hold.until - self._clock.now()))
        self._end(key, hold)

    async def _keep(self, key: Key, hold: _Hold, stream: Holdable) -> None:
        """Read `stream` to its end, within the limit; then the hold ends, unless the
        stream ended without the command's exit status: then it is held by time."""
        try:
            ended = await self._finish(key, stream)
        finally:  # cancelled too (shutdown): the record keeps the hold, nothing said
            stream.abort()
            self._streams -= 1
            if self._holds.get(key) is hold:
                del self._holds[key]
        if ended is None:
            self._limit_hit(key)
        elif ended:
            self.stats.ended += 1
        else:
            # The connection ended, not (as far as anyone can tell) the command.
            self.stats.lost += 1
            log.info(
                "exec.hold_lost",
                probe=str(key[0]),
                hint="the stream ended without the command's exit status; the probe "
                "waits out --exec-hold-seconds",
            )
            self._hold_by_time(key, hold.container, hold.started, hold.until)
            return  # still held: the record stays as it is
        self._changed(key[0])

    async def _finish(self, key: Key, stream: Holdable) -> bool | None:
        """Whether the command's end was seen on `stream`; None: the limit came first."""
        try:
            async with asyncio.timeout(self.settings.limit):
                return await stream.finish()
        except TimeoutError:
            return None
        except Exception as err:  # never let one stream take the others down
            log.error("exec.hold_failed", probe=str(key[0]), error=repr(err))
            return False

    async def __aenter__(self) -> Self:
        self._group = asyncio.TaskGroup()
        await self._group.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        group, self._group = self._group, None
        for hold in self._holds.values():
            if hold.task is not None:
                hold.task.cancel()
        if group is not None:
            await group.__aexit__(None, None, None)
        self._holds.clear()
