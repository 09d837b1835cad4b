"""The exec holds as they are kept: each held command (`CommandKey`) and its `Hold`, by
key and by namespace, with the streams each namespace holds.

Stage: probe (owned by probe/holds.py, `CommandHolds`, which decides when a hold
starts and ends; with its settings and counters, `HoldSettings` and `HoldStats`).
Input: `put(key, hold)` and `pop(key)`; `let_go(key, hold)` when a hold's stream is
no longer read. Output: the hold of a key, the counts (streams held; commands held,
by stream or by time; each by namespace), and the holds to give up first: the stream
to give up for a namespace's share (`stream_to_give_up`) and the oldest hold by time
of the namespace holding the most (`forgettable`, past the bound of holds kept).

The streams, shared by every namespace on the node (issue 40), are fair by namespace
(kit/shares.py): the `max_streams` held streams are work-conserving (one namespace
alone may hold them all), and a namespace that finds them all held and holds fewer
than its share (`max_streams // n`, n the namespaces holding streams and itself)
takes one from the namespace holding the most, its oldest (`stream_to_give_up`). So
a namespace that hangs commands by the hundred holds its share of streams and waits
out the limit for the rest, and another namespace's command that outlives its
timeout is always read to its end while that namespace holds no more than its share.

Invariants:
- a key has at most one hold; each namespace's keys are kept oldest first, and a
  namespace is listed only while it holds a key;
- `held` counts the holds put with a stream whose stream was not let go (a `Hold`
  with a `stream`), by namespace; `len` counts every hold.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from probemarker.kit.shares import share, yielder
from probemarker.watch.pods import PodUID

__all__ = [
    "CommandKey",
    "Hold",
    "HoldSettings",
    "HoldStats",
    "HoldTable",
    "Holdable",
    "shown",
]


@dataclass(frozen=True, slots=True, order=True)
class CommandKey:
    """A command (`command_digest` of its argv) in one container of one pod: what a hold
    holds, whatever probe ran it."""

    namespace: str
    pod_uid: PodUID
    container: str  # the container's name; the hold names its instance
    command: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.pod_uid}/{self.container}@{self.command}"


class Holdable(Protocol):
    """A stream whose command may still run (`probe.execstream.HeldStream`)."""

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
    # holds put on the pod's record: a run of the command came due while it lasted
    recorded: int = 0
    # "time": the limit ran out; "streams": no room for a stream (the namespace at its
    # share); "share": a stream given up for another namespace's share
    limit_hits: Counter[str] = field(default_factory=Counter)


@dataclass(slots=True)
class Hold:
    container: str  # container_mark of the instance it runs in
    started: int  # wall time, whole seconds
    until: float  # the clock's time it ends at the latest
    stream: Holdable | None  # read for the command's end (None: held by time alone)
    task: asyncio.Task[None] | None = None
    # on the pod's record (`held_command`): a run of the command came due while it
    # lasted (`skips`), or the record said so (`seed`)
    recorded: bool = False


def shown(hold: Hold | None) -> bool:
    """Whether the pod's record shows `hold` (`CommandHolds.held_command`): its start
    and its end change the record, each one write; a hold not shown changes nothing."""
    return hold is not None and hold.recorded and bool(hold.container)


class HoldTable:
    """See the module docstring."""

    __slots__ = ("_by_namespace", "_holds", "_streams")

    def __init__(self) -> None:
        self._holds: dict[CommandKey, Hold] = {}
        # Each namespace's keys, oldest first: what it holds, and what it gives up first.
        self._by_namespace: dict[str, dict[CommandKey, None]] = {}
        self._streams: Counter[str] = Counter()  # held streams, by namespace

    def __len__(self) -> int:
        return len(self._holds)

    def __contains__(self, key: object) -> bool:
        return key in self._holds

    def __getitem__(self, key: CommandKey) -> Hold:
        return self._holds[key]

    def get(self, key: CommandKey) -> Hold | None:
        return self._holds.get(key)

    def values(self) -> Iterator[Hold]:
        return iter(self._holds.values())

    @property
    def held(self) -> int:
        """Streams held now."""
        return self._streams.total()

    def held_in(self, namespace: str) -> int:
        """Streams `namespace` holds now."""
        return self._streams[namespace]

    def share(self, namespace: str, total: int) -> int:
        """`namespace`'s share of `total` streams held at once (kit/shares.py)."""
        return share(total, self._streams, namespace)

    def held_by_namespace(self) -> dict[str, int]:
        """Streams held now, by namespace (those holding any)."""
        return {ns: n for ns, n in self._streams.items() if n > 0}

    def holding_by_namespace(self) -> dict[str, int]:
        """Commands held now, by namespace (those holding any)."""
        return {ns: len(keys) for ns, keys in self._by_namespace.items() if keys}

    def put(self, key: CommandKey, hold: Hold) -> None:
        """Keep `hold` as `key`'s, its stream (if any) counted as held."""
        self._holds[key] = hold
        self._by_namespace.setdefault(key.namespace, {})[key] = None
        if hold.stream is not None:
            self._streams[key.namespace] += 1

    def pop(self, key: CommandKey) -> None:
        del self._holds[key]
        keys = self._by_namespace.get(key.namespace)
        if keys is not None:
            keys.pop(key, None)
            if not keys:
                del self._by_namespace[key.namespace]

    def let_go(self, key: CommandKey, hold: Hold) -> Holdable | None:
        """`hold`'s stream is no longer read (its end came, or it is given up): not
        counted from now on; the stream, which the caller aborts."""
        stream, hold.stream = hold.stream, None
        if stream is not None:
            self._streams[key.namespace] -= 1
        return stream

    def stream_to_give_up(self, namespace: str, total: int) -> CommandKey | None:
        """When all `total` streams are held and `namespace` asks for one: the oldest
        stream of the namespace that gives one up for `namespace`'s share (the one
        holding the most, kit/shares.py `yielder`); None when `namespace` holds its
        share already."""
        giver = yielder(total, self._streams, namespace)
        if giver is None:
            return None
        return next(
            (k for k in self._by_namespace.get(giver, ()) if self._holds[k].stream is not None),
            None,  # cannot happen: the counts follow the holds
        )

    def forgettable(self) -> CommandKey | None:
        """The oldest hold by time of the namespace holding the most, so that no
        namespace can push another's holds out; None when it holds only streams."""
        if not self._by_namespace:
            return None
        namespace = max(self._by_namespace, key=lambda ns: (len(self._by_namespace[ns]), ns))
        return next(
            (k for k in self._by_namespace[namespace] if self._holds[k].stream is None), None
        )

    def clear(self) -> None:
        self._holds.clear()
        self._by_namespace.clear()
        self._streams.clear()
