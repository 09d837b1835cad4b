"""The annotation summary a pod projection keeps: values of the kept keys, fingerprints
of every (key, value), and the size the API server checks against 256 KiB."""

from __future__ import annotations

from typing import Any

import pytest

from probemarker.watch.annotations import (
    EMPTY,
    AnnotationSummary,
    UnknownAnnotation,
    annotations_size,
    summarize,
)
from probemarker.watch.pods import pod_projection, pod_view, read_keys
from probemarker.write.ownership import OWNED_KEY

NOTES = {"a.io/x": "1", "b.io/long": "y" * 5000, "c.io/uni": "é€𝄞"}


@pytest.mark.parametrize(
    ("annotations", "size"),
    [
        pytest.param({}, 0, id="none"),
        pytest.param({"a": ""}, 1, id="empty-value"),
        pytest.param({"a.io/x": "1"}, 7, id="ascii"),
        # Bytes of UTF-8, as Go's len(string): é 2, € 3, 𝄞 4.
        pytest.param({"k": "é€𝄞"}, 1 + 9, id="multibyte"),
        pytest.param(NOTES, 7 + 9 + 5000 + 8 + 9, id="several"),
    ],
)
def test_size_is_counted_as_the_api_server_counts_it(
    annotations: dict[str, str], size: int
) -> None:
    assert annotations_size(annotations) == size
    assert summarize(annotations).total_bytes == size
    assert summarize(annotations).count == len(annotations)


@pytest.mark.parametrize(
    ("key", "value", "carries"),
    [
        pytest.param("a.io/x", "1", True, id="same"),
        pytest.param("a.io/x", "2", False, id="other-value"),
        pytest.param("b.io/long", "y" * 5000, True, id="long-value"),
        pytest.param("b.io/long", "y" * 4999, False, id="long-value-shorter"),
        pytest.param("c.io/uni", "é€𝄞", True, id="unicode"),
        pytest.param("d.io/absent", "1", False, id="absent-key"),
        # (a.io/x1, "") against (a.io/x, 1): the same bytes run together, not the same pair
        pytest.param("a.io/x1", "", False, id="key-and-value-shifted"),
    ],
)
def test_carries_answers_for_any_key(key: str, value: str, carries: bool) -> None:
    for keep in ((), tuple(NOTES)):
        assert summarize(NOTES, keep).carries(key, value) is carries


@pytest.mark.parametrize(
    ("key", "has"),
    [
        pytest.param("a.io/x", True, id="there"),
        pytest.param("b.io/long", True, id="long"),
        pytest.param("d.io/absent", False, id="absent"),
        pytest.param("a.io/X", False, id="case-matters"),
    ],
)
def test_has_answers_for_any_key(key: str, has: bool) -> None:
    assert summarize(NOTES).has(key) is has
    assert summarize(NOTES, (key,)).has(key) is has


def test_only_kept_values_are_there_to_read() -> None:
    summary = summarize(NOTES, ("a.io/x", "z.io/absent"))
    assert summary.value("a.io/x") == "1"
    assert summary.value("z.io/absent") is None  # kept, and not on the object
    with pytest.raises(UnknownAnnotation):
        summary.value("b.io/long")  # there, but its value was not kept: never a guess
    assert "y" * 5000 not in repr(summary)
    assert all(len(v or "") < 100 for v in summary.values.values())


def test_equal_annotations_give_equal_summaries_in_any_order() -> None:
    backwards = dict(reversed(list(NOTES.items())))
    assert summarize(NOTES, ("a.io/x",)) == summarize(backwards, ("a.io/x",))
    assert summarize(NOTES) != summarize({**NOTES, "a.io/x": "2"})
    assert summarize({}) is EMPTY
    assert summarize(None) is EMPTY
    assert not EMPTY.present


def test_values_that_are_not_strings_count_as_absent() -> None:
    odd: dict[str, Any] = {"a": 1, "b": None, "c": "x"}
    summary = summarize(odd, ("a", "c"))
    assert (summary.count, summary.total_bytes) == (1, 2)
    assert (summary.value("a"), summary.value("c")) == (None, "x")


def _pod(annotations: dict[str, str], uid: str = "u1") -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": uid, "annotations": annotations}}


@pytest.mark.parametrize(
    ("record", "kept"),
    [
        pytest.param(None, [OWNED_KEY], id="no-record"),
        pytest.param('{"#uid":"u1","m#p":{"s":"S","a":{"x.io/a":"1","y.io/b":"#h"}}}',
                     [OWNED_KEY, "x.io/a", "y.io/b"], id="names-keys"),
        pytest.param('{"#uid":"u2","m#p":{"s":"S","a":{"x.io/a":"1"}}}', [OWNED_KEY],
                     id="another-pods-record"),
        pytest.param('{"m#p":{"s":"S","a":{"x.io/a":"1"}}}', [OWNED_KEY], id="no-uid"),
        pytest.param("{oops", [OWNED_KEY], id="not-json"),
        pytest.param('{"#uid":"u1","m#p":{"s":"S","a":["x.io/a"]}}', [OWNED_KEY], id="old-format"),
        # An entry parse_record refuses still names its keys: a superset is harmless.
        pytest.param('{"#uid":"u1","m#p":{"s":"?","a":{"x.io/a":"1"}}}', [OWNED_KEY, "x.io/a"],
                     id="entry-not-validated"),
    ],
)  # fmt: skip
def test_the_pod_projection_keeps_the_record_and_the_keys_it_names(
    record: str | None, kept: list[str]
) -> None:
    notes = {"x.io/a": "1", "other.io/big": "z" * 10_000}
    if record is not None:
        notes[OWNED_KEY] = record
    assert list(read_keys(_pod(notes)["metadata"])) == kept
    summary = pod_projection(_pod(notes))["metadata"]["annotations"]
    assert isinstance(summary, AnnotationSummary)
    assert sorted(summary.values) == kept
    assert summary.total_bytes == annotations_size(notes)
    assert summary.carries("other.io/big", "z" * 10_000)
    # A whole pod's view keeps no value (which ones to keep is the record's business,
    # write/ownership.py); its fingerprints and sizes are the projection's.
    whole = pod_view(_pod(notes)).annotations
    projected = pod_view(pod_projection(_pod(notes))).annotations
    assert not whole.values
    assert (whole.keys, whole.pairs, whole.sizes, whole.total_bytes, whole.count) == (
        projected.keys,
        projected.pairs,
        projected.sizes,
        projected.total_bytes,
        projected.count,
    )
