"""The status answer as the socket sends it: the document under a budget shared by namespace.

Stage: observe (pure; no I/O, no clock). Input: the document's head
(`snapshot.head_document`) and a way to list its pods, each with its pending write
(called once, or twice when they are over the budget). Output: the answer's bytes, the
document of observe/snapshot.py as compact JSON.

Why a budget (docs/security.md: the answer is shared by every namespace on the node): a row is
bounded (`snapshot.PROBE_BYTES`), but whoever may create pods and markers in a namespace
chooses how many rows there are, and the daemon builds the answer in its own memory, for
each reader (observe/statussocket.py serves `CONNECTIONS` at once). So the pods take at
most `ANSWER_BUDGET` bytes. When they fit, all are sent. When they do not, the budget
is shared max-min fairly by namespace (`fair_shares`): a namespace that needs less
than an equal share of what is left gets all it needs, and the others split the rest
equally; each namespace's pods go in name order while they fit its share, and the rest
are counted in `omitted` (namespace, pods, probes), which `probemarker status` names
with the way to see them (`-n NS`, whose answer holds that namespace alone). A
namespace whose rows take at most `ANSWER_BUDGET / namespaces` is thus shown whole,
whatever another holds.

Memory: the encoded pods kept, at most `ANSWER_BUDGET` bytes, and one pod's document at
a time (its desired state with it, engine.inspect); over the budget, the pods are
listed a second time rather than kept, so what is held never follows what is listed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from probemarker.engine.seen import PodSeen
from probemarker.observe.snapshot import OnWall, pod_document
from probemarker.write.pending import PendingWrite

__all__ = ["ANSWER_BUDGET", "PodPart", "encode_answer", "fair_shares", "pod_parts"]

ANSWER_BUDGET = 4 << 20  # bytes of pods in one answer


@dataclass(frozen=True, slots=True)
class PodPart:
    """One pod of the answer, encoded: its namespace, its JSON and its probe count."""

    namespace: str
    encoded: bytes
    probes: int


def fair_shares(wants: Mapping[str, int], budget: int) -> dict[str, int]:
    """Each namespace's share of `budget` bytes when they want `wants` (max-min fair:
    whoever wants less than an equal share of what is left gets what it wants; the
    others split the rest equally)."""
    shares: dict[str, int] = {}
    left = budget
    waiting = sorted(wants, key=lambda namespace: (wants[namespace], namespace))
    for index, namespace in enumerate(waiting):
        equal = left // (len(waiting) - index)
        shares[namespace] = min(wants[namespace], equal)
        left -= shares[namespace]
    return shares


def pod_parts(
    pods: Iterable[PodSeen], pending: Callable[[PodSeen], PendingWrite | None], on_wall: OnWall
) -> Iterator[PodPart]:
    """`pods` (each with its `pending` write) encoded one at a time: a pod and its
    desired state are let go before the next is asked for (a loop variable would keep
    them through the next pod's build)."""
    for pod in pods:
        part = PodPart(
            pod.view.namespace,
            orjson.dumps(pod_document(pod, pending(pod), on_wall)),
            len(pod.probes),
        )
        del pod
        yield part


def encode_answer(
    head: Mapping[str, Any],
    pods: Callable[[], Iterable[PodPart]],
    *,
    budget: int = ANSWER_BUDGET,
) -> bytes:
    """The answer: `head`, the pods that fit `budget` (all of them, or each namespace's
    fair share), and what was left out (see the module docstring)."""
    wants: dict[str, int] = {}
    kept: list[bytes] | None = []
    total = 0
    for part in pods():
        size = len(part.encoded) + 1  # and its comma
        wants[part.namespace] = wants.get(part.namespace, 0) + size
        total += size
        if kept is not None:
            if total <= budget:
                kept.append(part.encoded)
            else:
                kept = None  # listed again below, each namespace within its share
    omitted: dict[str, list[int]] = {}
    if kept is None:
        shares = fair_shares(wants, budget)
        used: dict[str, int] = {}
        kept = []
        for part in pods():
            size = len(part.encoded) + 1
            if used.get(part.namespace, 0) + size <= shares.get(part.namespace, 0):
                used[part.namespace] = used.get(part.namespace, 0) + size
                kept.append(part.encoded)
            else:
                count = omitted.setdefault(part.namespace, [0, 0])
                count[0] += 1
                count[1] += part.probes
    document = {
        **head,
        "pods": [orjson.Fragment(encoded) for encoded in kept],
        "omitted": [
            {"namespace": namespace, "pods": pods_left, "probes": probes_left}
            for namespace, (pods_left, probes_left) in sorted(omitted.items())
        ],
    }
    return orjson.dumps(document) + b"\n"
