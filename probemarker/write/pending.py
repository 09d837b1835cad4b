"""A pod's pending write as `probemarker status` shows it: what differs, why it waits.

Stage: write (pure; no I/O, time only through `now`). Input: where the writer's queue
and budget stand for one pod (`FlushState`, `PodWriter.pending`). Output: the reason
the write has not gone out yet (`WriteWait`) and until when, if that is known.

The reasons, in the order the writer meets them (write/writer.py):
- `Backoff`: an error held the pod back (a 429, a 5xx, an unreachable server);
- `MessageRefresh`: only condition messages differ; they go out `message_refresh`
  seconds after the pod's last write (a state change would go at once);
- `WriteBudget`: the flush is due and waits for its turn: its namespace's turn under
  the status writes' budget (--write-qps, --write-burst; write/queue.py), or a free
  flush slot. Judged for this pod alone: its flush is due and not yet started;
- `Sending`: this pod's flush has started (its token taken): the request is on its
  way, or the answer is being read;
- `Coalescing`: the pod's flush is booked `write_coalesce_seconds` after a change;
- `NotQueued`: nothing is booked (the writer has not been told yet; it is at once).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["FlushState", "PendingWrite", "WriteWait", "why_waiting"]


class WriteWait(enum.StrEnum):
    BACKOFF = "Backoff"
    MESSAGE_REFRESH = "MessageRefresh"
    WRITE_BUDGET = "WriteBudget"
    SENDING = "Sending"
    COALESCING = "Coalescing"
    NOT_QUEUED = "NotQueued"


@dataclass(frozen=True, slots=True)
class FlushState:
    """Where one pod stands in the writer's queue (`FlushQueue.state`)."""

    due: float | None = None  # when its pending flush is due
    flushing: bool = False
    deferred_until: float = 0.0


@dataclass(frozen=True, slots=True)
class PendingWrite:
    """What differs between a pod and what the daemon wants it to show, and why it has
    not been written. `changes`: as the writer's log line lists them
    (`patch.changes_of`); `until`: when the wait ends on the writer's clock (None:
    not known); `scope`: how much a write carries after a refusal (FULL: all)."""

    changes: Mapping[str, Any]
    waits: WriteWait
    until: float | None = None
    scope: str = "FULL"


def why_waiting(
    flush: FlushState, *, now: float, message_until: float | None
) -> tuple[WriteWait, float | None]:
    """Why a pod's write waits at `now`, and until when. `message_until`: when a
    message-only change may go (None: more than messages differ, or it may go now).
    Only this pod's own state counts: another pod waiting for the budget says nothing
    about this one (a flush that started has its token)."""
    if flush.deferred_until > now:
        return WriteWait.BACKOFF, flush.deferred_until
    if message_until is not None and message_until > now:
        return WriteWait.MESSAGE_REFRESH, message_until
    if flush.flushing:
        return WriteWait.SENDING, None
    if flush.due is not None and flush.due <= now:
        return WriteWait.WRITE_BUDGET, None
    if flush.due is not None:
        return WriteWait.COALESCING, flush.due
    return WriteWait.NOT_QUEUED, None
