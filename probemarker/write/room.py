"""The annotation room: what of a write fits on a pod, and what is refused for size.

Stage: write (pure). Input: the pod as it is (`PodView`, whose annotation summary knows
the size of every value, kept or not) and the passes of `desired.desired_state`, each
with a set of rendered values refused. Output: whether a rendered value can go on a pod
at all (`label_problem`, `size_problem`), the bytes of a pod's annotations once a write
is done (`annotation_bytes`), and the pass whose write fits (`within_room`).

Rules:
- a value rendered from `{{.Result}}` that is not a label value (`label_problem`: at
  most 63 characters of the label alphabet) is not written; nothing is changed to make
  it fit;
- one that cannot fit whatever else the pod holds (`size_problem`: a label value over
  63 characters, an annotation over the 256 KiB of all annotations) is refused from its
  size, computed from the template and the result, and never built: a template that
  repeats the action renders hundreds of KB, 32 times a policy;
- room: the annotations are counted over the whole write, as the API server counts
  them (every key and value, the new record included, and the size of every present
  value, kept or not). If the write would take the pod past 256 KiB, the record's
  notes of Warnings go first, then the rendered values (annotations, and labels for
  their share of the record) are admitted in claim order while they fit; the rest
  are refused as above (not noted: a note takes room), so the write never meets a
  422 for them. A claim that appears only once another is refused (a conflict's
  loser) is refused too. A few passes, whatever a marker renders.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final, Protocol, TypeVar

import orjson

from probemarker.api.names import label_value_problems
from probemarker.api.rules import MAX_LABEL_VALUE_LENGTH, TOTAL_ANNOTATION_BYTES
from probemarker.api.template import rendered_size
from probemarker.identity.probes import OwnerRef
from probemarker.watch.pods import PodView
from probemarker.write.ownership import Owned, OwnershipRecord

__all__ = [
    "Claim",
    "Planned",
    "annotation_bytes",
    "label_problem",
    "size_problem",
    "within_room",
]

Claim = tuple[OwnerRef, str, str]  # (owner, kind, key) of a rendered value

# Checks of the whole write after the admission of rendered values, before all are
# refused: the shares are counted closely, so one is the rule.
_ROOM_CHECKS: Final = 3


class Planned(Protocol):
    """What `within_room` reads of a pass's plan (`desired.DesiredPod`)."""

    @property
    def annotations(self) -> Mapping[str, str | None]: ...

    @property
    def record(self) -> OwnershipRecord: ...


P = TypeVar("P", bound=Planned)


def within_room(pod: PodView, plan: Callable[..., tuple[P, list[Claim]]]) -> P:
    """The first plan of `pod` whose annotations fit in the API server's 256 KiB (see
    the module docstring). `plan(refused=, notes=)`: one pass with the rendered values
    in `refused` refused for room (and, without `notes`, no Warnings noted in the
    record), and the rendered values it claimed that the pod does not show yet."""
    first, rendered = plan(refused={})
    if annotation_bytes(pod, first.annotations) <= TOTAL_ANNOTATION_BYTES:
        return first
    # Over the room. The record's notes of Warnings go first (they only spare a
    # repeated Warning); then the rendered values are admitted in claim order while
    # they fit, each counted with its share of the record, against the pass that
    # refuses them all (`none`). A few passes, whatever a marker renders.
    none, _ = plan(refused=dict.fromkeys(rendered, ""), notes=False)
    total = annotation_bytes(pod, none.annotations)
    admitted: list[tuple[Claim, int]] = []
    refused: dict[Claim, str] = {}
    for claim in rendered:
        share = _share(pod, first, none, claim)
        if total + share <= TOTAL_ANNOTATION_BYTES:
            admitted.append((claim, share))
            total += share
        else:
            refused[claim] = _no_room(total + share)
    for _ in range(_ROOM_CHECKS):
        final, seen = plan(refused=refused, notes=False)
        total = annotation_bytes(pod, final.annotations)
        if total <= TOTAL_ANNOTATION_BYTES:
            return final
        # A claim nobody counted (a conflict's loser, once the winner's value is
        # refused), or shares counted short: refuse newcomers, else the last admitted.
        taken = {claim for claim, _ in admitted}
        newcomers = [c for c in seen if c not in refused and c not in taken]
        for claim in newcomers:
            refused[claim] = _no_room(total)
        excess = total - TOTAL_ANNOTATION_BYTES
        while not newcomers and excess > 0 and admitted:
            claim, share = admitted.pop()
            refused[claim] = _no_room(total)
            excess -= max(share, 1)
    # Still over: nothing rendered goes in; what is left over is not ours (the writer
    # meets the API server's 422 and narrows its patch, write/restrict.py).
    _, seen = plan(refused=refused, notes=False)
    refused.update({c: _no_room(total) for c in seen if c not in refused})
    return plan(refused=refused, notes=False)[0]


def _share(pod: PodView, admit: Planned, refuse: Planned, claim: Claim) -> int:
    """The bytes `claim`'s value adds to the pod's annotations, record included, when
    it is written (`admit`) rather than refused (`refuse`)."""
    owner, kind, key = claim
    share = _entry_bytes(admit.record.get(owner), kind, key) - _entry_bytes(
        refuse.record.get(owner), kind, key
    )
    if kind == "annotation":
        instead = {key: refuse.annotations[key]} if key in refuse.annotations else {}
        share += annotation_bytes(pod, {key: admit.annotations[key]}) - annotation_bytes(
            pod, instead
        )
    return share


def _entry_bytes(owned: Owned | None, kind: str, key: str) -> int:
    """The bytes of `key`'s member in `owned`'s record entry (`"key":"token",`)."""
    written = None if owned is None else (owned.labels if kind == "label" else owned.annotations)
    token = None if written is None else written.get(key)
    return 0 if token is None else len(orjson.dumps({key: token}))  # braces off, comma on


def _no_room(total: int) -> str:
    return (
        f"the pod's annotations would take {total} bytes with it, over the API server's "
        f"limit of {TOTAL_ANNOTATION_BYTES}"
    )


def label_problem(value: str) -> str | None:
    """Why a rendered `value` is not a label value (at most 63 characters of the label
    alphabet); None if it is. Nothing is changed to make a value fit."""
    problems = label_value_problems(value)
    return f"a label value {problems[0]}" if problems else None


def size_problem(kind: str, key: str, template: str, result: str) -> str | None:
    """Why `template` rendered with `result` cannot go on any pod from its size alone,
    computed without building it (`api.template.rendered_size`): a label value over 63
    characters; an annotation whose key and value take more than the 256 KiB the API
    server allows all of a pod's annotations. None: it may fit (built and judged)."""
    size = rendered_size(template, result)
    if kind == "label":
        if size.chars > MAX_LABEL_VALUE_LENGTH:
            return (
                f"a label value must be no more than {MAX_LABEL_VALUE_LENGTH} characters "
                f"(this one renders to {size.chars})"
            )
        return None
    with_key = len(_utf8(key)) + size.bytes
    if with_key > TOTAL_ANNOTATION_BYTES:
        return (
            f"it renders to {size.bytes} bytes ({with_key} with its key), over the API "
            f"server's limit of {TOTAL_ANNOTATION_BYTES} for all of a pod's annotations"
        )
    return None


def annotation_bytes(pod: PodView, annotations: Mapping[str, str | None]) -> int:
    """The bytes of `pod`'s annotations once `annotations` (a value, or None: removed)
    are written, as the API server counts them against its 256 KiB (keys and values,
    in bytes of UTF-8; the pod's summary knows the size of every value, kept or not)."""
    current = pod.annotations
    total = current.total_bytes
    for key, value in annotations.items():
        if value is not None and current.carries(key, value):
            continue
        key_bytes = len(_utf8(key))
        if (present := current.value_bytes(key)) is not None:
            total -= key_bytes + present
        if value is not None:
            total += key_bytes + len(_utf8(value))
    return total


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")
