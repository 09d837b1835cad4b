"""FairQueue: flows served in turn, FIFO within a flow, bounded per flow and in total
(the longest flow gives way). Pure: no loop, no clock."""

from __future__ import annotations

import pytest

from probemarker.kit.fairqueue import FairQueue


def drain(queue: FairQueue[str, str]) -> list[str]:
    out = []
    while (popped := queue.pop()) is not None:
        out.append(popped[1])
    return out


@pytest.mark.parametrize(
    ("pushes", "popped"),
    [
        pytest.param([("a", "a1")], ["a1"], id="one-flow"),
        pytest.param(
            [("a", "a1"), ("a", "a2"), ("a", "a3"), ("b", "b1")],
            ["a1", "b1", "a2", "a3"],
            id="a-late-flow-waits-one-turn-not-behind-the-busy-flow",
        ),
        pytest.param(
            [("a", "a1"), ("a", "a2"), ("b", "b1"), ("b", "b2"), ("c", "c1")],
            ["a1", "b1", "c1", "a2", "b2"],
            id="three-flows-in-turn",
        ),
        pytest.param([], [], id="empty"),
    ],
)
def test_flows_are_served_in_turn(pushes: list[tuple[str, str]], popped: list[str]) -> None:
    queue: FairQueue[str, str] = FairQueue()
    for flow, item in pushes:
        assert queue.push(flow, item) is None
    assert len(queue) == len(pushes)
    assert drain(queue) == popped
    assert len(queue) == 0
    assert queue.depths() == {}


def test_a_flow_that_empties_joins_at_the_end_when_it_has_an_item_again() -> None:
    queue: FairQueue[str, str] = FairQueue()
    for item in ("a1", "a2", "a3"):
        queue.push("a", item)
    queue.push("b", "b1")
    assert queue.pop() == ("a", "a1")
    assert queue.pop() == ("b", "b1")  # b empties: it leaves the turn
    queue.push("b", "b2")  # and joins behind a, whose turn it is
    assert [queue.pop(), queue.pop(), queue.pop()] == [("a", "a2"), ("b", "b2"), ("a", "a3")]


@pytest.mark.parametrize(
    ("per_flow", "total", "pushes", "dropped", "depths"),
    [
        pytest.param(
            2,
            None,
            [("a", "a1"), ("a", "a2"), ("a", "a3"), ("b", "b1")],
            [None, None, ("a", "a3"), None],
            {"a": 2, "b": 1},
            id="per-flow-bound-refuses-the-flows-own-push",
        ),
        pytest.param(
            None,
            3,
            [("a", "a1"), ("a", "a2"), ("a", "a3"), ("b", "b1")],
            [None, None, None, ("a", "a3")],
            {"a": 2, "b": 1},
            id="total-full-the-longest-flow-gives-way",
        ),
        pytest.param(
            None,
            3,
            [("a", "a1"), ("a", "a2"), ("a", "a3"), ("a", "a4")],
            [None, None, None, ("a", "a4")],
            {"a": 3},
            id="total-full-the-longest-flows-own-push-is-refused",
        ),
        pytest.param(
            None,
            4,
            [("a", "a1"), ("a", "a2"), ("b", "b1"), ("b", "b2"), ("c", "c1")],
            [None, None, None, None, ("a", "a2")],
            {"a": 1, "b": 2, "c": 1},
            id="a-new-flow-takes-room-from-the-first-longest",
        ),
        pytest.param(
            None,
            4,
            [("a", "a1"), ("a", "a2"), ("b", "b1"), ("b", "b2"), ("b", "b3")],
            [None, None, None, None, ("b", "b3")],
            {"a": 2, "b": 2},
            id="one-item-apart-is-refused-not-swapped",
        ),
    ],
)
def test_bounds(
    per_flow: int | None,
    total: int | None,
    pushes: list[tuple[str, str]],
    dropped: list[tuple[str, str] | None],
    depths: dict[str, int],
) -> None:
    queue: FairQueue[str, str] = FairQueue(per_flow=per_flow, total=total)
    assert [queue.push(flow, item) for flow, item in pushes] == dropped
    assert queue.depths() == depths
    assert len(queue) == sum(depths.values())


def test_a_flood_never_takes_a_quiet_flows_room() -> None:
    queue: FairQueue[str, int] = FairQueue(per_flow=100, total=150)
    refused = sum(queue.push("a", i) is not None for i in range(10_000))
    assert (refused, queue.depth("a")) == (9_900, 100)
    for i in range(50):
        queue.push(f"q{i}", i)
    # Full (150): the next quiet namespace takes one of the flood's places.
    assert queue.push("b", 0) == ("a", 99)
    assert (queue.depth("a"), queue.depth("b"), len(queue)) == (99, 1, 150)


def test_remove_takes_an_item_out_and_an_empty_flow_leaves_the_turn() -> None:
    queue: FairQueue[str, str] = FairQueue()
    queue.push("a", "a1")
    queue.push("b", "b1")
    queue.push("a", "a2")
    assert queue.remove("a", "a1")
    assert not queue.remove("a", "a1")
    assert queue.remove("b", "b1")
    assert not queue.remove("zz", "b1")
    assert (len(queue), queue.depths()) == (1, {"a": 1})
    assert sorted(queue) == [("a", "a2")]
    assert drain(queue) == ["a2"]


@pytest.mark.parametrize(("per_flow", "total"), [(0, None), (None, 0), (-1, 5)])
def test_bad_bounds_are_refused(per_flow: int | None, total: int | None) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        FairQueue(per_flow=per_flow, total=total)
