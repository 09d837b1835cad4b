"""The ownership record: format, round trip, hostile input, size."""

from __future__ import annotations

import orjson
import pytest

from probemarker.identity import OwnerRef
from probemarker.write.ownership import (
    OWNED_KEY,
    RECORD_LIMIT,
    Owned,
    fit_record,
    owners_text,
    parse_record,
    render_record,
)
from tests.unit.write.helpers import F, S, owner

FULL = Owned(
    S,
    labels=frozenset({"idle", "example.com/idle"}),
    annotations=frozenset({"example.com/cost", "Example.COM/Note"}),
    condition="example.com/Idle",
)


def test_format_is_compact_sorted_and_documented() -> None:
    record = {owner("web#idle"): FULL, owner("api#ready"): Owned(F)}
    assert render_record(record) == (
        '{"api#ready":{"s":"F"},'
        '"web#idle":{"a":["Example.COM/Note","example.com/cost"],"c":"example.com/Idle",'
        '"l":["example.com/idle","idle"],"s":"S"}}'
    )


def test_render_is_deterministic_whatever_the_insertion_order() -> None:
    a = {owner("a#x"): Owned(S), owner("b#y"): FULL}
    b = {owner("b#y"): FULL, owner("a#x"): Owned(S)}
    assert render_record(a) == render_record(b)


def test_empty_record_renders_as_none() -> None:
    assert render_record({}) is None


@pytest.mark.parametrize(
    "record",
    [
        pytest.param({owner("web#idle"): FULL}, id="full-entry"),
        pytest.param({owner("web#idle"): Owned(F)}, id="state-only"),
        pytest.param(
            {owner("a.b-c#probe name"): Owned(S, condition="Idle"), owner("z#q"): Owned(F)},
            id="dotted-marker-spaced-probe",
        ),
    ],
)
def test_round_trip(record: dict[OwnerRef, Owned]) -> None:
    assert parse_record(render_record(record)) == (record, None)


def test_absent_annotation_is_an_empty_record() -> None:
    assert parse_record(None) == ({}, None)


GOOD = '"web#idle":{"s":"S","l":["idle"]}'


@pytest.mark.parametrize(
    ("text", "kept", "problem"),
    [
        pytest.param("not json", 0, "not JSON", id="not-json"),
        pytest.param("", 0, "not JSON", id="empty-string"),
        pytest.param("[1,2]", 0, "not a JSON object", id="array"),
        pytest.param('"web#idle"', 0, "not a JSON object", id="string"),
        pytest.param("[" * 5000, 0, "not JSON", id="deeply-nested"),
        pytest.param("\ud800", 0, "not JSON", id="lone-surrogate"),
        pytest.param('{"web#idle":' + "1" * 300_000 + "}", 0, "more than", id="huge"),
        pytest.param("{" + GOOD + ',"web":{"s":"S"}}', 1, "'web': not an owner", id="no-hash"),
        pytest.param("{" + GOOD + ',"#p":{"s":"S"}}', 1, "not an owner", id="no-marker"),
        pytest.param("{" + GOOD + ',"Web#p":{"s":"S"}}', 1, "not a marker", id="bad-marker"),
        pytest.param("{" + GOOD + ',"w#a#b":{"s":"S"}}', 1, "not a marker", id="hash-in-probe"),
        pytest.param("{" + GOOD + ',"w#p":[]}', 1, "not an object", id="entry-array"),
        pytest.param("{" + GOOD + ',"w#p":{}}', 1, "'s' is not", id="no-state"),
        pytest.param("{" + GOOD + ',"w#p":{"s":"Unknown"}}', 1, "'s' is not", id="unknown-state"),
        pytest.param("{" + GOOD + ',"w#p":{"s":"S","l":"idle"}}', 1, "not a list", id="keys-str"),
        pytest.param("{" + GOOD + ',"w#p":{"s":"S","l":[1]}}', 1, "not a list", id="keys-int"),
        pytest.param("{" + GOOD + ',"w#p":{"s":"S","l":null}}', 1, "'l' is null", id="keys-null"),
        pytest.param(
            "{" + GOOD + ',"w#p":{"s":"S","l":["kubernetes.io/x"]}}',
            1,
            "cannot write",
            id="reserved-label-prefix",
        ),
        pytest.param(
            "{" + GOOD + ',"w#p":{"s":"S","a":["K8S.io/x"]}}',
            1,
            "cannot write",
            id="reserved-annotation-prefix",
        ),
        pytest.param(
            "{" + GOOD + ',"w#p":{"s":"S","l":["bad key"]}}', 1, "cannot write", id="bad-key"
        ),
        pytest.param(
            "{" + GOOD + ',"w#p":{"s":"S","a":["' + OWNED_KEY + '"]}}',
            1,
            "cannot write",
            id="claims-the-record",
        ),
        pytest.param(
            "{" + GOOD + ',"w#p":{"s":"S","l":["probemarker.io/x"]}}',
            1,
            "cannot write",
            id="own-label-prefix",
        ),
        pytest.param(
            "{" + GOOD + ',"w#p":{"s":"S","a":["ProbeMarker.io/x"]}}',
            1,
            "cannot write",
            id="own-annotation-prefix",
        ),
        pytest.param("{" + GOOD + ',"w#p":{"s":"S","c":"Ready"}}', 1, "reserved", id="ready"),
        pytest.param("{" + GOOD + ',"w#p":{"s":"S","c":7}}', 1, "not a condition", id="cond-int"),
    ],
)
def test_malformed_record_keeps_what_it_can(text: str, kept: int, problem: str) -> None:
    record, error = parse_record(text)
    assert len(record) == kept
    if kept:
        assert record == {owner("web#idle"): Owned(S, labels=frozenset({"idle"}))}
    assert error is not None
    assert error.startswith(f"annotation {OWNED_KEY}")
    assert problem in error
    assert len(error) < 1024


def test_many_malformed_entries_are_counted_not_listed() -> None:
    text = orjson.dumps({f"bad{i}": 1 for i in range(50)}).decode()
    record, error = parse_record(text)
    assert record == {}
    assert error is not None
    assert "dropped 50 malformed entries" in error
    assert "(and 47 more)" in error


def test_unknown_entry_members_are_ignored() -> None:
    assert parse_record('{"w#p":{"s":"F","x":[1]}}') == ({owner("w#p"): Owned(F)}, None)


def test_fit_keeps_owners_in_order_until_the_limit() -> None:
    record = {owner(f"m{i:03}#p"): FULL for i in range(10)}
    one = len(render_record({owner("m000#p"): FULL}) or "")
    kept, dropped = fit_record(record, limit=one * 3)
    assert list(kept) == [owner(f"m{i:03}#p") for i in range(3)]
    assert dropped == tuple(owner(f"m{i:03}#p") for i in range(3, 10))
    assert len(render_record(kept) or "") <= one * 3


def test_fit_size_is_exact() -> None:
    record = {owner(f"m{i:03}#p"): FULL for i in range(5)}
    size = len(render_record(record) or "")
    assert fit_record(record, limit=size) == (record, ())
    assert len(fit_record(record, limit=size - 1)[0]) == 4


def test_hundreds_of_owners_fit_the_default_limit() -> None:
    record = {owner(f"marker-{i:03}#probe"): FULL for i in range(300)}
    kept, dropped = fit_record(record)
    assert dropped == ()
    assert len(render_record(kept) or "") <= RECORD_LIMIT


def test_owners_text_is_bounded() -> None:
    owners = [owner(f"m{i}#p") for i in range(5)]
    assert owners_text(owners) == "m0#p, m1#p, m2#p (and 2 more)"
