"""A rendered value that cannot fit is refused from its size, never built (issue 40).

A marker author controls how large a rendered value gets: a 4,096-byte annotation
value holding 372 `{{.Result}}` renders to about 380 KB with a 1 KiB answer, and a
policy has up to 32 annotations. The daemon's memory is shared by every tenant of
the node, so planning such a pod must cost what the templates cost, not what they
render to.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import pytest

from probemarker.api.rules import MAX_LABEL_VALUE_LENGTH, TOTAL_ANNOTATION_BYTES
from probemarker.api.template import render, rendered_size
from probemarker.kit.text import shown
from probemarker.write.desired import Decided, desired_state
from probemarker.write.ownership import Owned
from probemarker.write.room import size_problem
from probemarker.write.tokens import pieces_token, value_token
from tests.unit.write.helpers import S, owner, spec, view

ACTION = "{{.Result}}"
COPIES = 372
TEMPLATE = "ab" + ACTION * COPIES + "cd"  # 4,096 bytes
ANSWER = "r" * 1024  # the longest answer `{{.Result}}` stands for
KEYS = 32  # annotations a policy may have
M = "m#p"


@pytest.mark.parametrize(
    ("template", "result", "chars", "size"),
    [
        pytest.param("plain", "x", 5, 5, id="no-action"),
        pytest.param(ACTION, "", 0, 0, id="empty-result"),
        pytest.param(ACTION, "abc", 3, 3, id="one-action"),
        pytest.param("map-{{ .Result }}-{{\t.Result\n}}", "de", 9, 9, id="spaced-actions"),
        pytest.param("é-" + ACTION, "ü€😀", 5, 3 + 2 + 3 + 4, id="utf-8"),
        pytest.param(ACTION + "}}", "x", 3, 3, id="lone-closing-braces-are-text"),
        pytest.param(TEMPLATE, ANSWER, 4 + COPIES * 1024, 4 + COPIES * 1024, id="repeated"),
    ],
)
def test_the_rendered_size_is_computed_without_rendering(
    template: str, result: str, chars: int, size: int
) -> None:
    assert rendered_size(template, result) == (chars, size)
    value = render(template, result)
    assert (len(value), len(value.encode("utf-8"))) == (chars, size)


KEY = "x.io/k"


@pytest.mark.parametrize(
    ("kind", "template", "result", "problem"),
    [
        pytest.param("label", ACTION, "x" * 63, None, id="label-63-fits"),
        pytest.param(
            "label",
            ACTION,
            "x" * 64,
            "a label value must be no more than 63 characters (this one renders to 64)",
            id="label-64",
        ),
        pytest.param("label", "a" + ACTION, "é" * 62, None, id="label-counts-characters"),
        pytest.param(
            "label",
            TEMPLATE,
            ANSWER,
            "a label value must be no more than 63 characters (this one renders to 380932)",
            id="label-repeated",
        ),
        pytest.param(
            "annotation", ACTION, "x" * (TOTAL_ANNOTATION_BYTES - len(KEY)), None, id="ann-fits"
        ),
        pytest.param(
            "annotation",
            ACTION,
            "x" * (TOTAL_ANNOTATION_BYTES - len(KEY) + 1),
            "it renders to 262139 bytes (262145 with its key), over the API server's limit "
            "of 262144 for all of a pod's annotations",
            id="annotation-one-byte-over",
        ),
        pytest.param(
            "annotation",
            TEMPLATE,
            ANSWER,
            "it renders to 380932 bytes (380938 with its key), over the API server's limit "
            "of 262144 for all of a pod's annotations",
            id="annotation-repeated",
        ),
    ],
)
def test_a_value_that_cannot_fit_is_refused_from_its_size(
    kind: str, template: str, result: str, problem: str | None
) -> None:
    assert size_problem(kind, KEY, template, result) == problem


@pytest.mark.parametrize(
    "pieces",
    [
        pytest.param([], id="empty"),
        pytest.param(["a" * 30, "b" * 34], id="64-bytes-literal"),
        pytest.param(["a" * 30, "b" * 35], id="65-bytes-digested"),
        pytest.param(["#", "short"], id="hash-digested"),
        pytest.param(["é" * 20, "😀" * 6], id="utf-8"),
        pytest.param(["\ud83d", "\ude00"], id="lone-surrogates"),
        pytest.param(list(["x" * 1024] * 400), id="large"),
    ],
)
def test_a_token_from_pieces_is_the_token_of_the_value(pieces: list[str]) -> None:
    """Tokens are recorded on pods and compared across restarts: never changed."""
    assert pieces_token(pieces) == value_token("".join(pieces))


def test_a_refused_value_is_shown_and_digested_as_if_built() -> None:
    probe = spec(ok={"x.io/l": TEMPLATE}, ok_annotations={"x.io/a": TEMPLATE})
    desired = desired_state(pod=view(), decided=[Decided(owner(M), probe, S, "", ANSWER)], live={})
    value = render(TEMPLATE, ANSWER)
    assert {(b.kind, b.key) for b in desired.invalid} == {
        ("label", "x.io/l"),
        ("annotation", "x.io/a"),
    }
    for bad in desired.invalid:
        assert bad.value is None  # never built
        assert bad.token == value_token(value)
        assert shown(bad.pieces()) == shown(value)
        assert str(len(value)) in bad.problem
    [label] = [b for b in desired.invalid if b.kind == "label"]
    assert str(MAX_LABEL_VALUE_LENGTH) in label.problem
    assert not label.room
    # The record notes the label's Warning with the token of the value, as before.
    assert desired.record[owner(M)].warned == {"l:x.io/l": value_token(value)}
    assert "x.io/a" not in desired.annotations
    assert "x.io/l" not in desired.labels


def test_a_refused_value_keeps_the_last_valid_one_within_the_state() -> None:
    probe = spec(ok_annotations={"x.io/a": TEMPLATE})
    last = render(TEMPLATE, "r")  # what a one-character answer rendered: it fits
    pod = view(
        annotations={"x.io/a": last},
        record={M: Owned(S, annotations={"x.io/a": value_token(last)})},
    )
    desired = desired_state(pod=pod, decided=[Decided(owner(M), probe, S, "", ANSWER)], live={})
    assert desired.annotations["x.io/a"] == last
    [bad] = desired.invalid
    assert bad.room
    assert bad.value is None


def _peak(plan: Callable[[], object]) -> int:
    """The most memory `plan()` held at once, in bytes (tracemalloc)."""
    tracemalloc.start()
    try:
        plan()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_planning_a_pod_never_builds_what_cannot_fit() -> None:
    """32 annotations of 372 `{{.Result}}` with a 1 KiB answer render to 32 times 380 KB
    (12 MB). Planning the pod holds the templates and a few small values, far below
    even one rendered value."""
    probe = spec(ok_annotations={f"x.io/k{i:02}": TEMPLATE for i in range(KEYS)})
    rendered = rendered_size(TEMPLATE, ANSWER).bytes
    assert rendered > TOTAL_ANNOTATION_BYTES

    def plan() -> None:
        desired = desired_state(
            pod=view(), decided=[Decided(owner(M), probe, S, "", ANSWER)], live={}
        )
        assert len(desired.invalid) == KEYS
        for bad in desired.invalid:
            shown(bad.pieces())
            assert bad.token.startswith("#")

    plan()  # warm caches (regexes, imports) outside the measure
    peak = _peak(plan)
    # Building them costs KEYS times `rendered` (12 MB) and more; not one is built now.
    assert peak < rendered // 2, f"planning peaked at {peak} bytes"
