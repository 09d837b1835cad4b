"""bench/noisy_neighbours.py's pure parts: tenant B's answers from its flip plan, and
the delays and missed flips read from the label's stored changes (the bench itself runs
the daemon for minutes and is not run in CI)."""

from __future__ import annotations

import itertools

import pytest

from bench.noisy_neighbours import FLOODS, Flips, delays, flood_markers


def test_the_answer_alternates_at_each_planned_flip() -> None:
    flips = Flips({"b-0": [10.0, 15.0]})
    assert [flips.value("b-0", t) for t in (9.9, 10.0, 14.9, 15.0, 99.0)] == [
        "yes",
        "no",
        "no",
        "yes",
        "yes",
    ]


def test_a_plan_keeps_flips_4_to_8_s_apart_and_is_seeded() -> None:
    one, two = Flips(), Flips()
    one.plan(["b-0", "b-1"], start=100.0, until=200.0, seed=7)
    two.plan(["b-0", "b-1"], start=100.0, until=200.0, seed=7)
    assert one.moments == two.moments
    for moments in one.moments.values():
        gaps = [b - a for a, b in itertools.pairwise(moments)]
        assert all(4 <= g <= 8 for g in gaps)
        assert 101 <= moments[0] <= 104
        assert moments[-1] < 200


@pytest.mark.parametrize(
    ("seen", "expected"),
    [
        pytest.param([(10.5, "no"), (21.2, "yes")], ([0.5, 1.2], 0), id="both-shown"),
        pytest.param([(21.2, "yes")], ([1.2], 1), id="first-never-shown"),
        pytest.param(
            [(10.5, "no"), (20.5, "no"), (21.0, "yes")], ([0.5, 1.0], 0), id="repeat-ignored"
        ),
        pytest.param([(19.0, "no")], ([9.0], 1), id="late-but-before-next"),
        pytest.param([(20.1, "no")], ([], 2), id="after-the-next-flip"),
    ],
)
def test_delays_and_missed_flips(
    seen: list[tuple[float, str]], expected: tuple[list[float], int]
) -> None:
    got, missed = delays([10.0, 20.0], seen, start=0.0, end=100.0)
    assert ([round(d, 3) for d in got], missed) == expected


def test_a_flip_past_the_missed_limit_is_missed() -> None:
    assert delays([10.0], [(20.5, "no")], start=0.0, end=100.0) == ([], 1)


def test_only_flips_inside_the_window_count() -> None:
    got, missed = delays([5.0, 10.0, 20.0], [(5.1, "no"), (10.2, "yes")], start=8.0, end=15.0)
    assert ([round(d, 3) for d in got], missed) == ([0.2], 0)


@pytest.mark.parametrize("flood", FLOODS)
def test_every_flood_is_markers_of_tenant_a_only(flood: str) -> None:
    markers = flood_markers(flood)
    assert markers
    assert {m["metadata"]["namespace"] for m in markers} == {"tenant-a"}
    names = [m["metadata"]["name"] for m in markers]
    assert len(names) == len(set(names))


def test_an_unknown_flood_is_named() -> None:
    with pytest.raises(ValueError, match="no flood 'nope'"):
        flood_markers("nope")
