"""The status answer under its budget (issue 40): all pods when they fit; otherwise each
namespace's fair share, and what did not fit counted by namespace."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest

from probemarker.observe.answer import PodPart, encode_answer, fair_shares

HEAD = {"apiVersion": "probemarker.io/status/v2", "node": "n1", "ready": True, "time": "t"}


@pytest.mark.parametrize(
    ("wants", "budget", "shares"),
    [
        pytest.param({"a": 10, "b": 20}, 100, {"a": 10, "b": 20}, id="all-fit"),
        pytest.param({"a": 10, "hog": 1000}, 100, {"a": 10, "hog": 90}, id="small-one-whole"),
        pytest.param({"a": 60, "b": 60}, 100, {"a": 50, "b": 50}, id="equal-halves"),
        pytest.param(
            {"a": 5, "b": 40, "c": 500, "d": 900},
            100,
            {"a": 5, "b": 31, "c": 32, "d": 32},
            id="max-min",
        ),
        pytest.param({}, 100, {}, id="nobody"),
    ],
)
def test_fair_shares(wants: dict[str, int], budget: int, shares: dict[str, int]) -> None:
    found = fair_shares(wants, budget)
    assert found == shares
    assert sum(found.values()) <= budget


def pods(*spec: tuple[str, int, int]) -> list[PodPart]:
    """(namespace, pods, bytes each): pods of `probes` 1 each."""
    out = []
    for namespace, count, size in spec:
        for i in range(count):
            body = orjson.dumps({"namespace": namespace, "name": f"p{i}", "pad": ""})
            pad = size - len(body)
            encoded = orjson.dumps({"namespace": namespace, "name": f"p{i}", "pad": "x" * pad})
            out.append(PodPart(namespace, encoded, 1))
    return out


def answer(
    parts: list[PodPart], budget: int, *, listings: int
) -> tuple[dict[str, int], list[object]]:
    """The pods shown by namespace, and the omitted; the pods listed `listings` times
    (once when they fit, twice otherwise: what is kept is never all of them)."""
    listed = 0

    def again() -> Iterator[PodPart]:
        nonlocal listed
        listed += 1
        return iter(parts)

    document = orjson.loads(encode_answer(HEAD, again, budget=budget))
    shown: dict[str, int] = {}
    for pod in document["pods"]:
        shown[pod["namespace"]] = shown.get(pod["namespace"], 0) + 1
    assert {k: document[k] for k in HEAD} == HEAD
    assert listed == listings
    return shown, document["omitted"]


def test_pods_that_fit_are_all_sent_from_one_listing() -> None:
    parts = pods(("a", 3, 100), ("b", 2, 100))
    assert answer(parts, 10_000, listings=1) == ({"a": 3, "b": 2}, [])


def test_over_the_budget_a_hog_cannot_push_out_another_namespace() -> None:
    """One namespace with 1,000 pods, two with a few: theirs are all shown, the hog's
    fill what is left, and the rest is counted for `-n hog`."""
    parts = pods(("a", 3, 100), ("hog", 1000, 100), ("z", 2, 100))
    shown, omitted = answer(parts, 5_000, listings=2)
    assert shown["a"] == 3
    assert shown["z"] == 2
    assert 40 <= shown["hog"] < 50
    left = 1000 - shown["hog"]
    assert omitted == [{"namespace": "hog", "pods": left, "probes": left}]
