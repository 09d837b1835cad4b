"""bench/vs_kruise.py's flips and what its pod watch saw, pure: the seeded schedule of
the answers' flips, the delays from each flip to the pod's new label and condition,
the flips missed (not seen within MISSED_AFTER), the flaps after a moment, and when a
restarted node agent's replacement is Ready."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tests.podfields import condition, labels_of

KEY = "vs.bench/answer"
MISSED_AFTER = 10.0  # s: a flip not followed on the pod by then (or by the next) is missed


def schedule(flips: int, seed: int) -> list[list[int]]:
    """Per pod slot (up to 1000), the flips' offsets in centiseconds from the round's
    start: 4 to 8 s apart (so that each system has settled one before the next), at
    any centisecond (so that they fall at a uniform phase of any probe schedule)."""
    rng = random.Random(seed)
    out = []
    for _ in range(1000):
        at, times = rng.randint(0, 300), []
        for _ in range(flips):
            at += rng.randint(400, 800)
            times.append(at)
        out.append(times)
    return out


def uptime_cs(text: str) -> int:
    """/proc/uptime's first number in centiseconds, as SCRIPT reads it."""
    whole, _, fraction = text.split()[0].partition(".")
    return int(whole + fraction)


def answer_after(flip_index: int) -> str:
    """The label value once flip number `flip_index` (0-based) has happened."""
    return "no" if flip_index % 2 == 0 else "yes"


def condition_expected(index: int) -> str:
    return "False" if index % 2 == 0 else "True"


def label_value(obj: Mapping[str, Any]) -> str | None:
    return labels_of(dict(obj)).get(KEY)


def condition_value(obj: Mapping[str, Any]) -> str | None:
    found = condition(dict(obj), KEY)
    return None if found is None else str(found.get("status"))


def replacement_ready(pods: Sequence[Mapping[str, Any]], old_uid: str) -> bool:
    """Whether a node agent's pod other than the deleted one (`old_uid`), not itself
    being deleted, is Ready: where a restart's window starts, for either system."""
    return any(
        pod["metadata"]["uid"] != old_uid
        and not pod["metadata"].get("deletionTimestamp")
        and (condition(dict(pod), "Ready") or {}).get("status") == "True"
        for pod in pods
    )


def delays(
    seen: Sequence[tuple[float, Mapping[str, Any]]],
    pod: str,
    flips_at: Sequence[float],
    value: Callable[[Mapping[str, Any]], str | None],
    expected: Callable[[int], str],
    *,
    within: float = MISSED_AFTER,
) -> tuple[list[float], int]:
    """For each flip of `pod` (monotonic times), the delay to the first change to the
    value that flip brings (an object with that value, the pod's object seen before it
    without); (delays, flips missed). A flip counts as seen only before the next flip
    and within `within` seconds. A pod already showing the value when its flip happens
    (the flip before was missed) shows no change for it: that flip is missed too, not
    timed by whatever object of the pod the watch brings next (a relist, another
    field's update)."""
    mine = [(at, obj) for at, obj in seen if obj["metadata"]["name"] == pod]
    changes = []  # (when, the value it changed to)
    for index, (at, obj) in enumerate(mine):
        now = value(obj)
        if index == 0 or value(mine[index - 1][1]) != now:
            changes.append((at, now))
    found, missed = [], 0
    for index, flip in enumerate(flips_at):
        until = flips_at[index + 1] if index + 1 < len(flips_at) else float("inf")
        until = min(until, flip + within)
        want = expected(index)
        hit = next((at for at, now in changes if flip <= at < until and now == want), None)
        if hit is None:
            missed += 1
        else:
            found.append(hit - flip)
    return found, missed


def sequences(
    seen: Sequence[tuple[float, Mapping[str, Any]]],
    since: float,
    value: Callable[[Mapping[str, Any]], str | None],
) -> dict[str, list[str | None]]:
    """Per pod, the values of `value` seen from `since` on, repeats folded."""
    out: dict[str, list[str | None]] = {}
    for at, obj in seen:
        if at >= since:
            values = out.setdefault(obj["metadata"]["name"], [])
            now = value(obj)
            if not values or values[-1] != now:
                values.append(now)
    return out


def flaps(
    seen: Sequence[tuple[float, Mapping[str, Any]]],
    since: float,
    value: Callable[[Mapping[str, Any]], str | None],
) -> int:
    """Changes of `value` per pod among the objects seen from `since` on (the first
    object of each pod sets its value; each change after it is a flap)."""
    return sum(len(values) - 1 for values in sequences(seen, since, value).values())


def flip_delays(
    seen: Sequence[tuple[float, Mapping[str, Any]]], flips_at: Mapping[str, Sequence[float]]
) -> dict[str, Any]:
    """Over every pod's flips (monotonic times by pod name): the delays to the label and
    to the condition, and the flips of each never seen within MISSED_AFTER."""
    out: dict[str, Any] = {
        "label_delays": [],
        "condition_delays": [],
        "missed_labels": 0,
        "missed_conditions": 0,
    }
    for pod, at in flips_at.items():
        for what, value, expected in (
            ("label", label_value, answer_after),
            ("condition", condition_value, condition_expected),
        ):
            found, missed = delays(seen, pod, at, value, expected)
            out[f"{what}_delays"] += found
            out[f"missed_{what}s"] += missed
    return out
