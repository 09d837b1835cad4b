"""kit/shares.py: who may take the next unit of a budget that namespaces share."""

from __future__ import annotations

import pytest

from probemarker.kit.shares import least_served, share, yielder


@pytest.mark.parametrize(
    ("total", "counts", "asking", "expected"),
    [
        pytest.param(64, {}, "b", 64, id="alone"),
        pytest.param(64, {"a": 64}, "a", 64, id="alone-holding"),
        pytest.param(64, {"a": 64}, "b", 32, id="one-other"),
        pytest.param(64, {"a": 60, "b": 4}, "b", 32, id="one-other-holding"),
        pytest.param(64, {"a": 30, "b": 0, "c": 34}, "d", 21, id="idle-tenants-do-not-count"),
        pytest.param(4, {"a": 1, "b": 1, "c": 1, "d": 1}, "e", 0, id="more-tenants-than-units"),
        pytest.param(0, {}, "a", 0, id="no-budget"),
    ],
)
def test_share(total: int, counts: dict[str, int], asking: str, expected: int) -> None:
    assert share(total, counts, asking) == expected


@pytest.mark.parametrize(
    ("total", "counts", "asking", "expected"),
    [
        pytest.param(64, {"a": 64}, "b", "a", id="the-flooder-gives-one"),
        pytest.param(64, {"a": 64}, "a", None, id="alone-at-its-share"),
        pytest.param(4, {"a": 2, "b": 2}, "b", None, id="at-its-share-waits"),
        pytest.param(4, {"a": 1, "b": 3}, "a", "b", id="below-takes-from-most"),
        pytest.param(6, {"a": 3, "b": 3}, "c", "b", id="a-tie-the-greatest-gives"),
        pytest.param(6, {"a": 2, "b": 2, "c": 2}, "c", None, id="even"),
        pytest.param(0, {}, "a", None, id="no-budget"),
    ],
)
def test_yielder(total: int, counts: dict[str, int], asking: str, expected: str | None) -> None:
    assert yielder(total, counts, asking) == expected


@pytest.mark.parametrize(
    ("running", "waiting", "expected"),
    [
        pytest.param({"a": 48}, ["a", "b"], "b", id="the-idle-one-first"),
        pytest.param({"a": 3, "b": 3}, ["b", "a"], "b", id="a-tie-in-the-given-order"),
        pytest.param({"a": 1, "b": 5}, ["b"], "b", id="only-one-waits"),
        pytest.param({}, [], None, id="none-waits"),
    ],
)
def test_least_served(running: dict[str, int], waiting: list[str], expected: str | None) -> None:
    assert least_served(running, waiting) == expected
