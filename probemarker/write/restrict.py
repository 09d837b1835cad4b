"""Smaller versions of a desired state, for what the writer defers or leaves out.

Stage: write (pure). Input: a `DesiredPod` and the pod it is for. Output: a
`DesiredPod` that changes less of the pod:

- `defer_messages`: a condition whose status and reason stay as they are keeps the
  message it shows. The writer sends that version while the pod is within its
  message-refresh interval (docs/engine.md: a message-only change is published at most once
  per interval, a transition at once), so a probe whose output changes every run
  (`{"status":"ok","uptime":...}`) costs one write per interval, not one per period.
- `message_due`: when that interval ends for a pod. It counts from the daemon's last
  write to the pod or, before the first, from when the daemon first saw the pod (its
  first mark, once the informer has listed it). A restarted daemon cannot know when
  its predecessor last wrote, and the pod it first sees already shows a message: so
  counting from then, a restart never publishes a message sooner than steady state
  would, and writes at once only where a *state* (label, annotation, condition status
  or reason) differs: a restart causes no flapping and no writes (docs/engine.md).
- `restrict(desired, pod, scope)`: the parts a refused patch leaves out. A 422 that is
  not a failed `test` means the patched pod would be invalid, most often because its
  annotations would pass the API server's 256 KiB total. The writer then steps down,
  one `Scope` at a time, so that what can be written still is (docs/engine.md: one refused
  key never blocks the pod's conditions):

  | scope | written |
  |---|---|
  | FULL | everything |
  | NO_NEW_ANNOTATIONS | no annotation added or changed but the record; removals go (they only shrink the pod); the record names only annotations that hold their value after the write |
  | NO_ANNOTATIONS | labels and conditions; the record is left as it is, so what is written now is not recorded (never removed later: the safe side) |
  | CONDITIONS_ONLY | conditions |

Invariants: each scope changes a subset of what the scope before it changes; the
record written never names a key that does not hold the recorded value afterwards.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from probemarker.watch.pods import PodView
from probemarker.write.desired import DesiredCondition, DesiredPod
from probemarker.write.ours import still_ours
from probemarker.write.ownership import OWNED_KEY, Owned, parse_record, render_record
from probemarker.write.patch import condition_text
from probemarker.write.tokens import value_token

__all__ = ["Scope", "defer_messages", "message_due", "restrict"]


class Scope(enum.IntEnum):
    """How much of a desired state a patch carries; see the module docstring."""

    FULL = 0
    NO_NEW_ANNOTATIONS = 1
    NO_ANNOTATIONS = 2
    CONDITIONS_ONLY = 3

    @property
    def narrower(self) -> Scope | None:
        """The next scope down, or None at the last."""
        return Scope(self + 1) if self < Scope.CONDITIONS_ONLY else None


def defer_messages(desired: DesiredPod, pod: PodView) -> DesiredPod:
    """`desired`, with the pod's own message on every condition that keeps its status
    and reason (a message-only change held back)."""
    conditions: dict[str, DesiredCondition | None] = {}
    for type_, want in desired.conditions.items():
        current = None if want is None else pod.condition(type_)
        if (
            want is not None
            and current is not None
            and current.get("status") == want.status
            and condition_text(current, "reason") == want.reason
        ):
            want = replace(want, message=condition_text(current, "message"))
        conditions[type_] = want
    return replace(desired, conditions=MappingProxyType(conditions))


def message_due(*, seen: float, written: float | None, refresh: float) -> float:
    """When a message-only change of a pod may go out: `refresh` seconds after the
    later of `seen` (when the daemon first saw the pod) and `written` (its last write
    to the pod; None: none yet). See the module docstring."""
    since = seen if written is None else max(seen, written)
    return since + refresh


def _without_new_annotations(desired: DesiredPod, pod: PodView) -> DesiredPod:
    current = pod.annotations
    kept = {
        key: value
        for key, value in desired.annotations.items()
        if key != OWNED_KEY and (value is None or current.carries(key, value))
    }

    def still_ours_after(key: str, token: str) -> bool:
        """Whether `key` still shows what `token` records once `kept` is written."""
        if key in kept and kept[key] is None:
            return False  # removed by this write
        if current.kept(key):
            return still_ours(current.value(key), token)
        # Not a key the old record names: only a decided owner records it now, with
        # the value it set (`desired.annotations`), which the pod holds or not.
        wanted = desired.annotations.get(key)
        return wanted is not None and value_token(wanted) == token and current.carries(key, wanted)

    record = {
        owner: replace(
            owned,
            annotations={k: t for k, t in owned.annotations.items() if still_ours_after(k, t)},
        )
        for owner, owned in desired.record.items()
    }
    # Only smaller than the record that fitted.
    kept[OWNED_KEY] = render_record(record, pod_uid=pod.uid)
    return replace(desired, annotations=MappingProxyType(kept), record=MappingProxyType(record))


def restrict(desired: DesiredPod, pod: PodView, scope: Scope) -> DesiredPod:
    """What `desired` becomes at `scope` (see the module docstring)."""
    if scope is Scope.FULL:
        return desired
    if scope is Scope.NO_NEW_ANNOTATIONS:
        return _without_new_annotations(desired, pod)
    unchanged: Mapping[str, str | None] = MappingProxyType({})
    record: Mapping[Any, Owned] = MappingProxyType(
        parse_record(pod.annotations.value(OWNED_KEY), pod_uid=pod.uid)[0]
    )
    smaller = replace(desired, annotations=unchanged, record=record)
    if scope is Scope.CONDITIONS_ONLY:
        smaller = replace(smaller, labels=unchanged)
    return smaller
