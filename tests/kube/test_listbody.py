"""The LIST answer split into its items as the bytes arrive (kube/connect/listbody.py): the same
items and the same rest as one parse of the whole answer, however it is cut."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from probemarker.kube.connect.listbody import ListBody, ListBodyError

POD = {
    "metadata": {
        "name": "p",
        "annotations": {"tricky": 'a "quoted" ]}, [{ \\ back\\slash \u2028 é 𝄞', "e": ""},
        "labels": {"items": "[1,2]"},
    },
    "spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80}]}], "x": [[], {}]},
    "status": {"conditions": [{"type": "Ready", "status": "True"}], "n": -1.5e3, "t": True},
}

ANSWERS = [
    pytest.param(
        {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "5"},
         "items": [POD, {**POD, "metadata": {"name": "q"}}]},
        id="pod-list",
    ),
    pytest.param({"kind": "PodList", "metadata": {"resourceVersion": "1"}, "items": []}, id="empty"),
    pytest.param({"metadata": {"continue": "x]}\"[{"}, "items": None}, id="null-items"),
    pytest.param({"items": [1, "s,]", [1, [2]], None, {"a": {}}]}, id="any-values"),
    pytest.param(
        {"metadata": {"items": [9]}, "a": "items", "items": [POD], "z": {"items": [8]}},
        id="items-elsewhere",
    ),
    pytest.param({"metadata": {}}, id="no-items"),
]  # fmt: skip


def read(body: bytes, cuts: list[int]) -> tuple[list[Any], Any]:
    reader = ListBody(max_item_bytes=1 << 20)
    items: list[bytes] = []
    start = 0
    for end in [*cuts, len(body)]:
        items += reader.feed(body[start:end])
        start = end
    return [orjson.loads(i) for i in items], orjson.loads(reader.finish())


@pytest.mark.parametrize("answer", ANSWERS)
@pytest.mark.parametrize("indent", [False, True], ids=["compact", "indented"])
def test_items_and_rest_are_those_of_one_parse(answer: dict[str, Any], indent: bool) -> None:
    body = orjson.dumps(answer, option=orjson.OPT_INDENT_2 if indent else 0)
    items = answer.get("items")
    want_rest = {**answer, "items": []} if isinstance(items, list) else answer
    assert read(body, []) == (items or [], want_rest)
    every_byte = list(range(1, len(body)))
    assert read(body, every_byte) == (items or [], want_rest)
    rng = random.Random(len(body))
    for _ in range(50):
        cuts = sorted(rng.sample(every_byte, k=min(len(every_byte), rng.randint(1, 12))))
        assert read(body, cuts) == (items or [], want_rest)


def test_an_item_is_handed_out_as_soon_as_it_has_arrived() -> None:
    reader = ListBody(max_item_bytes=1 << 20)
    assert reader.feed(b'{"metadata":{},"items":[{"a":1},{"b"') == [b'{"a":1}']
    assert reader.feed(b":2}") == []  # its end might still be a longer number, or more
    assert reader.feed(b"]") == [b'{"b":2}']
    assert reader.feed(b"}") == []
    assert orjson.loads(reader.finish()) == {"metadata": {}, "items": []}


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        pytest.param(b"[1,2]", "not a JSON object", id="an-array"),
        pytest.param(b'{"items":[1,,2]}', "empty item", id="double-comma"),
        pytest.param(b'{"items":[1,]}', "empty item", id="trailing-comma"),
        pytest.param(b'{"items":[,1]}', "empty item", id="leading-comma"),
        pytest.param(b'{"items":[1', "ended", id="cut-in-items"),
        pytest.param(b'{"items":[],"x":"ab', "ended", id="cut-in-a-string"),
        pytest.param(b'{"items":[]}}', "never opened", id="extra-close"),
    ],
)
def test_a_broken_answer_is_refused(body: bytes, problem: str) -> None:
    def read_all() -> None:
        reader = ListBody(max_item_bytes=1 << 20)
        for i in range(len(body)):
            reader.feed(body[i : i + 1])
        reader.finish()

    with pytest.raises(ListBodyError, match=problem):
        read_all()


def test_an_item_too_long_is_refused_before_it_is_all_held() -> None:
    reader = ListBody(max_item_bytes=1000)
    reader.feed(b'{"items":[{"a":"')
    for _ in range(9):
        reader.feed(b"x" * 100)
    with pytest.raises(ListBodyError, match="longer than 1000 bytes"):
        reader.feed(b"x" * 100)


def test_memory_held_is_one_item_not_the_answer() -> None:
    reader = ListBody(max_item_bytes=1 << 20)
    item = orjson.dumps({"note": "n" * 10_000})
    reader.feed(b'{"kind":"PodList","items":[')
    for _ in range(100):  # a megabyte of items, fed one at a time
        assert reader.feed(item + b",") == [item]
        assert len(reader._buf) < 2 * len(item)
    reader.feed(item + b"]}")
    assert len(reader.finish()) < 100
