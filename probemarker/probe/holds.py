"""Exec commands that may still run after their run ended: at most one copy of a command
in a container instance, whatever probe runs it, also across a restart of the daemon.

Stage: probe (owned by the api exec handler). Input: `turn(key)` around every run
the engine makes (runs of one command in one container, by any probe, one at a time);
`slot(key, ...).hold(stream)` from the exec stream when a run's deadline passed
before the command's exit status; `seed(...)` from the engine when a probe starts on a
pod whose ownership record says that its command may still run (write/ownership.py,
member `h`). Output: `skips(...)` when a run is due (the engine skips the period;
`busy(...)` answers the same without a run due), `held_command(...)` (what the engine
puts in the pod's record, for a hold that skipped a run), a `changed(key)` call when
that record changes: a hold skips its first run, a recorded hold ends (the engine
plans the pod again: the record follows, one write each), and counters (`HoldStats`,
and the counts by namespace for the metrics).

Why: on a real cluster, closing an exec stream does not stop its command
(containerd's streaming exec waits for the process whatever the client does;
docs/kube-exec.md), so a probe that started its next command while the last one
still ran would pile one process per period into the container (issue 23: 13
`sleep 30` at 24 s). A timed-out stream is therefore kept open, read and its output
dropped past the 1 KiB caps, until the command ends (its status arrives); the
periods of every probe that runs that command in that container are skipped
meanwhile.

A hold belongs to the command in its container (`CommandKey`: namespace, pod UID,
container name, `command_digest` of the argv), never to a probe (issue 40): a probe
renamed, or a second probe with the same argv on the same container, finds the
command held and waits, so the command is never started twice at once. An edited
command is another command: it runs at the next period beside the old one, which
stays held, bounded and counted, until it ends (issue 30); so does a deleted probe's.
A hold names the container instance too (`container_mark` of its ID): a restarted
container has none of its old processes, so a hold of another instance holds nothing.

Across a restart (issue 30): the daemon's memory goes with it, the command does not.
So a hold is recorded on the pod (in the entry of every probe that runs the command)
once a run of the command comes due while it lasts and is skipped (`skips`), and the
next daemon is `seed`ed from the record: the command in the same container instance
is not run, by whatever probe, until the hold's limit, counted from the recorded
start, has passed. The api backend cannot see the command end (nothing in
`pods/exec` tells of a process started by another connection), so after a restart
the limit alone ends it.

Recorded at the first run it skips, not when it starts (issue 43, "a slow run is not
a write"): most holds are of a command that outlives its timeout by a moment (an exec
through a loaded API server, 1.2 s against timeoutSeconds 1) and ends before its
next run is due. Recording those at their start cost two pod writes each, the hold
and its end (42 pod writes a minute on a loaded node with nothing changing, 27 in
the 20 s after a restart, 1.11 per transition), for a record no daemon would have
read. Now a hold that skips no run is never written and its end writes nothing;
one that does costs one write when it skips its first run and one when it ends. The
same rule holds for every hold: by stream, by time (no room for a stream, a lost
stream, a stream given up for a share: the flag goes with the hold), and a seeded
hold is recorded from the start (the record says so already). The trade-off: a
daemon that stops or dies after a run timed out and before the next run of that
command was due leaves no record of the hold, so the next daemon may start the
command once more beside the one still running. That is one more copy per restart
in that window, never a pile: that copy, if it outlives its timeout too, is
recorded at its next due run like any other (before issue 43 the window was the
write's coalescing, 50 ms).

Shared by every namespace on the node (issue 40), so fair by namespace: the
`max_streams` held streams are shared as probe/holdtable.py says. A stream given up
for another namespace's share is aborted and its command held by time alone, to the
same end (`limit_hits["share"]`); a namespace at or above its share that finds them
all held has its own command held by time (`limit_hits["streams"]`). Holds by time
alone are bounded too (`_REMEMBERED` in all): past that, the namespace holding the
most holds forgets its oldest.

Log lines (`exec.hold_*`) are bounded the same way: one a minute per event and
namespace, saying how many were held back (`kit.repeats`); the counters count all.

Invariants:
- a key has at most one hold; `busy` (and `skips`) is True while it lasts; `turn`
  lets one run of a key at a time go on, the others wait (FIFO) for it, before their
  own deadlines;
- a hold is on the pod's record (`held_command`) from the first due run it skips, or
  from its start when seeded from the record, to its end; `changed` is called when
  it goes on the record and when a recorded hold ends (or its container instance is
  gone), never for a hold that was not recorded: its start and its end write nothing;
- a hold lasts at most `limit` seconds (wall time) from its start, then ends and is
  counted (`limit_hits["time"]`): after that the command may still run, but a probe
  is never silenced for longer than the limit. A seeded hold ends at the recorded
  start + `limit`, and never later than `limit` from the seeding (a record's time is
  untrusted input);
- a stream whose connection ends without the command's exit status (an API server or
  kubelet restart cuts it; the command runs on) is held on by time, to its limit
  (`stats.lost`);
- at most `max_streams` streams are held at once (the client's exec pool has room for
  exactly that many beside the probe runs, `daemon.assembly.client_settings`): a
  stream that finds no room and cannot take one (above) is aborted at once, and its
  key is held by time all the same (its command may still run, and nothing tells
  when it ends);
- held streams never take a probe run's slot (`--max-concurrent-probes`) nor a
  connection a run needs;
- leaving the `async with` aborts every held stream (shutdown) without a `changed`
  call: the record keeps saying that the command may still run, which it may (a
  hold that skipped no run yet is not on it: the trade-off above).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any, Self

import structlog

from probemarker.identity.commands import HeldCommand
from probemarker.kit.clock import MONOTONIC, Clock
from probemarker.kit.repeats import Repeats
from probemarker.probe.holdtable import (
    CommandKey,
    Hold,
    Holdable,
    HoldSettings,
    HoldStats,
    HoldTable,
    shown,
)
from probemarker.probe.turns import Turns

__all__ = ["CommandHolds", "HoldSlot"]

log = structlog.get_logger(__name__)

_REMEMBERED = 65536  # keys held at once, by time or stream (a node runs far fewer probes)


class HoldSlot:
    """The hold of one command, as the exec stream sees it."""

    __slots__ = ("_container", "_holds", "_key")

    def __init__(self, holds: CommandHolds, key: CommandKey, container: str) -> None:
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
        changed: Callable[[CommandKey], None] = lambda key: None,
    ) -> None:
        self.settings = settings or HoldSettings()
        self._clock, self._wall, self._changed = clock, wall, changed
        self.stats = HoldStats()
        self._holds = HoldTable()
        self._turns: Turns[CommandKey] = Turns()
        # One line per event and namespace a minute: a namespace hanging commands by the
        # hundred does not fill the log (the counters count every one).
        self._repeats = Repeats(interval=60.0)
        self._group: asyncio.TaskGroup | None = None

    def __repr__(self) -> str:
        return (
            f"CommandHolds(held={self.held}, by_time={len(self._holds) - self.held}, "
            f"limit={self.settings.limit:g}s)"
        )

    @property
    def held(self) -> int:
        """Streams held now."""
        return self._holds.held

    @property
    def holding(self) -> int:
        """Commands held now: streams, and commands held by time alone."""
        return len(self._holds)

    def held_by_namespace(self) -> dict[str, int]:
        """Streams held now, by namespace (those holding any)."""
        return self._holds.held_by_namespace()

    def holding_by_namespace(self) -> dict[str, int]:
        """Commands held now, by namespace (those holding any)."""
        return self._holds.holding_by_namespace()

    def busy(self, key: CommandKey, container: str) -> bool:
        """Whether `key`'s command may still run in the container instance `container`
        (a `container_mark`)."""
        return self._current(key, container) is not None

    def held_command(self, key: CommandKey, container: str) -> HeldCommand | None:
        """What the pod's record says of `key`'s command while it is held, once a run of
        it came due meanwhile (`skips`) or the record said so already (`seed`)."""
        hold = self._current(key, container)
        if hold is None or not shown(hold):
            return None
        return HeldCommand(command=key.command, container=hold.container, started=hold.started)

    def skips(self, key: CommandKey, container: str) -> bool:
        """A run of `key`'s command in the container instance `container` is due: whether
        it is skipped, its command still held (`busy`). A hold found so goes on the
        pod's record from now on (`held_command`, one `changed` call): its command
        still ran when its next run came due, so a restarted daemon is to know of it."""
        hold = self._current(key, container)
        if hold is None:
            return False
        if not hold.recorded:
            hold.recorded = True
            self.stats.recorded += 1
            if shown(hold):
                self._changed(key)
        return True

    def slot(self, key: CommandKey, container: str) -> HoldSlot:
        return HoldSlot(self, key, container)

    def turn(self, key: CommandKey) -> contextlib.AbstractAsyncContextManager[None]:
        """Around one run of `key`'s command: a second run of it (another probe with the
        same argv on the same container) waits for the first to end, then finds the
        command `busy` if it outlived its run (probe/turns.py)."""
        return self._turns.turn(key)

    def seed(self, key: CommandKey, held: HeldCommand, *, container: str) -> bool:
        """Hold `key`'s command in `container` by time, as the pod's record says
        (`held`); False when the record speaks of another command or container
        instance, of a hold whose limit has passed, or the key is held already."""
        if held.command != key.command or not container or held.container != container:
            return False
        if key in self._holds:
            return False
        wall = self._wall()
        end = min(held.started + self.settings.limit, wall + self.settings.limit)
        if end <= wall:
            return False
        until = self._clock.now() + (end - wall)
        self._hold_by_time(key, container, held.started, until, recorded=True)
        self.stats.seeded += 1
        self._say(
            "exec.hold_seeded",
            key,
            level="info",
            seconds=round(end - wall),
            hint="the pod's record says its command may still run: its probes wait",
        )
        return True

    def admit(self, key: CommandKey, container: str) -> bool:
        if self._group is not None and self._room(key.namespace):
            return True
        if self._group is not None:  # full (not entered: only a handler used bare, in tests)
            self.stats.limit_hits["streams"] += 1
            self._say(
                "exec.hold_full",
                key,
                held=self.held,
                namespace_held=self._holds.held_in(key.namespace),
                hint="its command may still run; its probes wait out --exec-hold-seconds "
                "(the namespace holds its share of --max-held-exec-streams)",
            )
        dropped = self._drop(key)
        now = self._clock.now()
        recorded = shown(dropped)  # the record said so of the copy before: it still does
        started = int(self._wall())
        self._hold_by_time(key, container, started, now + self.settings.limit, recorded=recorded)
        if recorded:
            self._changed(key)
        return False

    def hold(self, key: CommandKey, container: str, stream: Holdable) -> None:
        """Keep `stream` until its command ends or the limit (after `admit()`)."""
        existing = self._holds.get(key)
        if self._group is None or (existing is not None and existing.stream is not None):
            stream.abort()  # cannot happen after admit(); never leak a connection
            return
        dropped = self._drop(key)  # a hold by time only, whose end came meanwhile
        self.stats.held_total += 1
        now = self._clock.now()
        hold = Hold(container, int(self._wall()), now + self.settings.limit, stream=stream)
        hold.recorded = shown(dropped)  # the record said so of the copy before
        self._holds.put(key, hold)  # its stream counted
        hold.task = self._group.create_task(self._keep(key, hold, stream))
        if hold.recorded:
            self._changed(key)

    def _room(self, namespace: str) -> bool:
        """Whether `namespace` may hold one more stream now: there is room, or it is
        below its share and the namespace holding the most gives one up."""
        total = self.settings.max_streams
        if self.held < total:
            return True
        oldest = self._holds.stream_to_give_up(namespace, total)
        if oldest is None:
            return False
        self._yield(oldest, to=namespace)
        return True

    def _yield(self, key: CommandKey, *, to: str) -> None:
        """Give `key`'s held stream up (for namespace `to`'s share): the command may still
        run, so it stays held, by time alone, to the same end; the record stays."""
        hold = self._holds[key]
        stream = self._holds.let_go(key, hold)
        if hold.task is not None:
            hold.task.cancel()
        if stream is not None:
            stream.abort()
        self._hold_by_time(key, hold.container, hold.started, hold.until, recorded=hold.recorded)
        self.stats.limit_hits["share"] += 1
        self._say(
            "exec.hold_yielded",
            key,
            to=to,
            share=self._holds.share(key.namespace, self.settings.max_streams),
            hint="its namespace held more than its share of --max-held-exec-streams: "
            "its probes wait out --exec-hold-seconds",
        )

    def _say(self, event: str, key: CommandKey, *, level: str = "warning", **fields: Any) -> None:
        """Log `event` of `key`, at most once a minute per event and namespace (the
        line says how many were held back since the last)."""
        extra = self._repeats.fields((event, key.namespace), self._clock.now())
        if extra is not None:
            getattr(log, level)(event, command=str(key), **fields, **extra)

    def _current(self, key: CommandKey, container: str) -> Hold | None:
        hold = self._holds.get(key)
        if hold is None or hold.stream is not None:
            return hold  # a held stream ends with its command (a restarted container's too)
        if hold.until <= self._clock.now():
            self._end(key, hold)
            return None
        if container and hold.container and container != hold.container:
            # another instance of the container: the command died with the old
            if shown(self._drop(key)):
                self._changed(key)
            return None
        return hold

    def _hold_by_time(
        self, key: CommandKey, container: str, started: int, until: float, *, recorded: bool
    ) -> None:
        hold = Hold(container, started, until, stream=None, recorded=recorded)
        self._holds.put(key, hold)
        if self._group is not None:
            hold.task = self._group.create_task(self._expire(key, hold))
        # Past `_REMEMBERED` holds: the namespace holding the most forgets its oldest
        # hold by time, so no namespace can push another's holds out.
        if len(self._holds) > _REMEMBERED and (oldest := self._holds.forgettable()) is not None:
            self._drop(oldest)

    def _drop(self, key: CommandKey) -> Hold | None:
        """Forget `key`'s hold (by time only) at once, its task cancelled; the hold
        forgotten, if any."""
        hold = self._holds.get(key)
        if hold is None or hold.stream is not None:
            return None
        self._holds.pop(key)
        if hold.task is not None:
            hold.task.cancel()
        return hold

    def _end(self, key: CommandKey, hold: Hold) -> None:
        """A hold by time whose limit has passed: counted, and the record follows (if
        it showed the hold)."""
        if self._holds.get(key) is not hold:
            return
        self._holds.pop(key)
        if hold.task is not None and hold.task is not asyncio.current_task():
            hold.task.cancel()
        self._limit_hit(key)
        if shown(hold):
            self._changed(key)

    def _limit_hit(self, key: CommandKey) -> None:
        self.stats.limit_hits["time"] += 1
        self._say(
            "exec.hold_limit",
            key,
            seconds=self.settings.limit,
            hint="its command may still run in the container; its probes start again",
        )

    async def _expire(self, key: CommandKey, hold: Hold) -> None:
        await self._clock.sleep(max(0.0, hold.until - self._clock.now()))
        self._end(key, hold)

    async def _keep(self, key: CommandKey, hold: Hold, stream: Holdable) -> None:
        """Read `stream` to its end, within the limit; then the hold ends, unless the
        stream ended without the command's exit status: then it is held by time."""
        try:
            ended = await self._finish(key, stream)
        finally:  # cancelled too (shutdown, or given up for a share): the record stays
            stream.abort()
            if hold.stream is stream:  # still counted: not given up meanwhile
                self._holds.let_go(key, hold)
                if self._holds.get(key) is hold:
                    self._holds.pop(key)
        if ended is None:
            self._limit_hit(key)
        elif ended:
            self.stats.ended += 1
        else:
            # The connection ended, not (as far as anyone can tell) the command.
            self.stats.lost += 1
            self._say(
                "exec.hold_lost",
                key,
                level="info",
                hint="the stream ended without the command's exit status; its probes "
                "wait out --exec-hold-seconds",
            )
            self._hold_by_time(
                key, hold.container, hold.started, hold.until, recorded=hold.recorded
            )
            return  # still held: the record stays as it is
        if shown(hold):
            self._changed(key)  # the record showed it: it follows

    async def _finish(self, key: CommandKey, stream: Holdable) -> bool | None:
        """Whether the command's end was seen on `stream`; None: the limit came first."""
        try:
            async with asyncio.timeout(self.settings.limit):
                return await stream.finish()
        except TimeoutError:
            return None
        except Exception as err:  # never let one stream take the others down
            self._say("exec.hold_failed", key, level="error", error=repr(err))
            return False

    async def __aenter__(self) -> Self:
        self._group = asyncio.TaskGroup()
        await self._group.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        group, self._group = self._group, None
        for hold in self._holds.values():
            if hold.stream is not None:
                hold.stream.abort()  # a task not started yet never reaches its finally
            if hold.task is not None:
                hold.task.cancel()
        if group is not None:
            await group.__aexit__(None, None, None)
        self._holds.clear()
