"""The ownership rule: what of the ownership record the pod still shows as written.

Stage: write (pure). Input: the pod as it is (`PodView`) and its ownership record
(write/ownership.py: per owner the keys it wrote, with their values or tokens, and its
condition type). Output: per owner what it still owns (`still_owned`, `StillOwned`),
which the claims board keeps, hands over or removes (write/claims.py), and whether one
value is still what was recorded (`still_ours`), which the writer asks again of the pod
it patches (write/restrict.py).

Rules:
- a label or an annotation is still ours while the pod's value is the one recorded
  (its token: `ownership.value_token`); a key someone else changed since is no longer
  ours: it is never kept, handed over or removed for the owner;
- a condition is ours only while its reason is one the daemon writes
  (`ProbeSucceeded`/`ProbeFailed`, `OUR_REASONS`), whatever a record says.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from probemarker.identity.probes import OwnerRef
from probemarker.watch.pods import PodView
from probemarker.write.ownership import Owned
from probemarker.write.tokens import value_token

__all__ = ["OUR_REASONS", "StillOwned", "our_condition", "still_ours", "still_owned"]

# The reasons of the conditions the daemon writes (write/claims.py); a condition with
# another reason is not ours, whatever a record says.
OUR_REASONS: Final = frozenset({"ProbeSucceeded", "ProbeFailed"})


def still_ours(current: str | None, token: str) -> bool:
    """Whether a key whose value is `current` (None: absent) still holds what was
    recorded as `token`, i.e. what the daemon wrote."""
    return current is not None and value_token(current) == token


def our_condition(pod: PodView, type_: str) -> Mapping[str, Any] | None:
    """The pod's condition of `type_` if it is one the daemon writes (by its reason)."""
    found = pod.condition(type_)
    return found if found is not None and found.get("reason") in OUR_REASONS else None


@dataclass(frozen=True, slots=True)
class StillOwned:
    """What an owner's entry names that the pod still shows as the owner wrote it.

    The ownership rule: an owner holds a label or an annotation while the pod's value is
    still the one its entry recorded (`still_ours`), and its condition while the pod's
    condition of that type has one of our reasons. A key someone else changed since is
    no longer the owner's: it is never kept, handed over or removed for it."""

    labels: Mapping[str, str]  # key -> the value on the pod
    annotations: Mapping[str, str]  # key -> the value on the pod
    condition: tuple[str, str] | None = None  # (type, status) on the pod


def still_owned(pod: PodView, record: Mapping[OwnerRef, Owned]) -> dict[OwnerRef, StillOwned]:
    """For each owner of `record`, what the pod still shows as it wrote it."""
    out: dict[OwnerRef, StillOwned] = {}
    for owner, owned in record.items():
        labels = {
            k: v
            for k, t in owned.labels.items()
            if (v := pod.labels.get(k)) is not None and still_ours(v, t)
        }
        annotations = {
            k: v
            for k, t in owned.annotations.items()
            if (v := pod.annotations.value(k)) is not None and still_ours(v, t)
        }
        found = None if owned.condition is None else our_condition(pod, owned.condition)
        condition = None if found is None else (str(owned.condition), str(found.get("status")))
        out[owner] = StillOwned(labels, annotations, condition)
    return out
