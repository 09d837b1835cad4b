"""Review (issue 29): the room computation over the whole write."""

from __future__ import annotations

from typing import Any

import pytest

from probemarker.api.rules import TOTAL_ANNOTATION_BYTES
from probemarker.write.desired import Decided, annotation_bytes, desired_state
from tests.unit.write.helpers import S, owner, spec, view

# A 243-character DNS prefix: a key of 250 bytes, which the record repeats in full.
PREFIX = ("a" * 60 + ".") * 3 + "b" * 60


def _count_passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    import probemarker.write.desired as desired_module

    passes = [0]
    real = desired_module._desired

    def counted(*args: Any, **kwargs: Any) -> Any:
        passes[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(desired_module, "_desired", counted)
    return passes


def test_long_keys_with_short_answers_cost_a_few_passes_not_one_per_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs (desired_state): "a few passes at most, whatever a marker renders (a hostile
    one must not make a plan cost a pass per value)". A value's share is counted
    without its record entry (key + token), which for a long key and a one-byte
    answer is as much again as the value's own share: the greedy admission overshoots
    by half the admitted values, and the loop then gives them back one pass at a
    time. 32 probes x 32 annotations, 1-byte answer, 50 KB of room: ~100 passes of
    1,024 values each (about a second of the event loop blocked, at the pod's first
    write and again whenever the values cannot be kept, e.g. a transition)."""
    passes = _count_passes(monkeypatch)
    probes = [
        Decided(
            owner(f"m#p{p}"),
            spec(name=f"p{p}", ok_annotations={f"{PREFIX}/p{p}-{k}": "{{.Result}}" for k in range(32)}),
            S,
            "",
            "z",
        )
        for p in range(32)
    ]
    pod = view(annotations={"big": "x" * (TOTAL_ANNOTATION_BYTES - 50_000)})
    desired = desired_state(pod=pod, decided=probes, live={})
    assert annotation_bytes(pod, desired.annotations) <= TOTAL_ANNOTATION_BYTES
    assert passes[0] <= 4, passes[0]
