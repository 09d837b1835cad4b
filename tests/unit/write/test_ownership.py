"""The ownership record: format, round trip, hostile input, size."""

from __future__ import annotations

import orjson
import pytest

from probemarker.identity.commands import HeldCommand, command_digest, container_mark
from probemarker.identity.probes import OwnerRef
from probemarker.write.ours import still_ours
from probemarker.write.ownership import (
    OWNED_KEY,
    RECORD_LIMIT,
    Owned,
    fit_record,
    owners_text,
    parse_record,
    render_record,
    with_held,
)
from probemarker.write.tokens import value_token
from tests.unit.write.helpers import UID, F, S, owner

LONG = "x" * 4096
HELD = HeldCommand(
    command=command_digest(["sleep", "3600"]),
    container=container_mark("containerd://543cc8b549a2214bd6cea151bb5bbfb437dc44a1b8f1"),
    started=1_800_000_000,
)
FULL = Owned(
    S,
    labels={"idle": "true", "example.com/idle": ""},
    annotations={"example.com/cost": "-100", "Example.COM/Note": value_token(LONG)},
    condition="example.com/Idle",
)


def test_format_is_compact_sorted_and_documented() -> None:
    record = {owner("web#idle"): FULL, owner("api#ready"): Owned(F)}
    assert render_record(record, pod_uid=UID) == (
        '{"#uid":"' + UID + '","api#ready":{"s":"F"},'
        '"web#idle":{"a":{"Example.COM/Note":"' + value_token(LONG) + '",'
        '"example.com/cost":"-100"},"c":"example.com/Idle",'
        '"l":{"example.com/idle":"","idle":"true"},"s":"S"}}'
    )


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        pytest.param("", True, id="empty"),
        pytest.param("true", True, id="short"),
        pytest.param("a" * 64, True, id="64-bytes"),
        pytest.param("a" * 65, False, id="65-bytes"),
        pytest.param("é" * 33, False, id="66-bytes-in-33-characters"),
        pytest.param("#x", False, id="starts-with-the-digest-mark"),
        pytest.param(LONG, False, id="4-KiB"),
    ],
)
def test_value_token_is_the_value_or_a_digest(value: str, literal: bool) -> None:
    token = value_token(value)
    assert (token == value) is literal
    if not literal:
        assert token.startswith("#")
        assert len(token) == 23
    assert still_ours(value, token)
    assert not still_ours(value + "!", token)
    assert not still_ours(None, token)


def test_digests_of_different_values_differ() -> None:
    assert value_token("a" * 100) != value_token("a" * 99 + "b")


def test_render_is_deterministic_whatever_the_insertion_order() -> None:
    a = {owner("a#x"): Owned(S), owner("b#y"): FULL}
    b = {owner("b#y"): FULL, owner("a#x"): Owned(S)}
    assert render_record(a, pod_uid=UID) == render_record(b, pod_uid=UID)


def test_empty_record_renders_as_none() -> None:
    assert render_record({}, pod_uid=UID) is None


@pytest.mark.parametrize(
    "record",
    [
        pytest.param({owner("web#idle"): FULL}, id="full-entry"),
        pytest.param({owner("web#idle"): Owned(F)}, id="state-only"),
        pytest.param(
            {owner("a.b-c#probe name"): Owned(S, condition="Idle"), owner("z#q"): Owned(F)},
            id="dotted-marker-spaced-probe",
        ),
        pytest.param(
            {
                owner("db#role"): Owned(
                    F,
                    warned={
                        "l:db.io/role": "connection refused: db down",
                        "xa:game.io/note": "#" + "A" * 22,
                        "xc:example.com/Ready": "gate#ready",
                    },
                )
            },
            id="warnings",
        ),
        pytest.param({owner("web#idle"): Owned(F, held=HELD)}, id="decided-and-held"),
        pytest.param({owner("web#idle"): Owned(None, held=HELD)}, id="held-only"),
    ],
)
def test_round_trip(record: dict[OwnerRef, Owned]) -> None:
    assert parse_record(render_record(record, pod_uid=UID), pod_uid=UID) == (record, None)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param('{"#uid":"other","web#idle":{"s":"S","l":{"app":"web"}}}', "for pod UID 'other'", id="another-pods"),
        pytest.param('{"web#idle":{"s":"S","l":{"app":"web"}}}', "names no pod", id="no-uid"),
        pytest.param('{"#uid":7,"web#idle":{"s":"S"}}', "for pod UID '7'", id="uid-not-a-string"),
    ],
)  # fmt: skip
def test_a_record_written_for_another_pod_is_not_trusted_at_all(text: str, problem: str) -> None:
    record, error = parse_record(text, pod_uid=UID)
    assert record == {}
    assert error is not None
    assert problem in error
    assert "copied from another pod?" in error


def test_the_record_names_the_pod_it_was_written_for() -> None:
    text = render_record({owner("w#p"): Owned(S)}, pod_uid=UID)
    assert text == '{"#uid":"' + UID + '","w#p":{"s":"S"}}'


def test_absent_annotation_is_an_empty_record() -> None:
    assert parse_record(None, pod_uid=UID) == ({}, None)


GOOD = '"#uid":"' + UID + '","web#idle":{"s":"S","l":{"idle":"true"}}'


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
        pytest.param(
            "{" + GOOD + ',"w#p":{"s":"S","l":"idle"}}', 1, "not an object", id="keys-str"
        ),
        pytest.param(
            "{" + GOOD + ',"w#p":{"s":"S","l":{"a":1}}}', 1, "not an object", id="value-int"
        ),
        pytest.param(
            "{" + GOOD + ',"w#p":{"s":"S","l":["idle"]}}', 1, "older format", id="keys-list"
        ),
        pytest.param(
            "{" + GOOD + ',"w#p":{"s":"S","l":{"a":"b c"}}}', 1, "value", id="bad-label-value"
        ),
        pytest.param(
            "{" + GOOD + ',"w#p":{"s":"S","a":{"a":"' + "v" * 65 + '"}}}',
            1,
            "value",
            id="annotation-token-too-long",
        ),
        pytest.param(
            "{" + GOOD + ',"w#p":{"s":"S","a":{"a":"#short"}}}', 1, "value", id="bad-digest"
        ),
        pytest.param("{" + GOOD + ',"w#p":{"s":"S","l":null}}', 1, "'l' is null", id="keys-null"),
        pytest.param(
            "{" + GOOD + ',"w#p":{"s":"S","l":{"kubernetes.io/x":"1"}}}',
            1,
            "cannot write",
            id="reserved-label-prefix",
        ),
        pytest.param(
            "{" + GOOD + ',"w#p":{"s":"S","a":{"K8S.io/x":"1"}}}',
            1,
            "cannot write",
            id="reserved-annotation-prefix",
        ),
        pytest.param(
            "{" + GOOD + ',"w#p":{"s":"S","l":{"bad key":"1"}}}', 1, "cannot write", id="bad-key"
        ),
        pytest.param(
            "{" + GOOD + ',"w#p":{"s":"S","a":{"' + OWNED_KEY + '":"1"}}}',
            1,
            "cannot write",
            id="claims-the-record",
        ),
        pytest.param(
            "{" + GOOD + ',"w#p":{"s":"S","l":{"probemarker.io/x":"1"}}}',
            1,
            "cannot write",
            id="own-label-prefix",
        ),
        pytest.param(
            "{" + GOOD + ',"w#p":{"s":"S","a":{"ProbeMarker.io/x":"1"}}}',
            1,
            "cannot write",
            id="own-annotation-prefix",
        ),
        pytest.param("{" + GOOD + ',"w#p":{"s":"S","c":"Ready"}}', 1, "reserved", id="ready"),
        pytest.param(
            "{" + GOOD + ',"w#p":{"s":"S","c":"kubernetes.io/Idle"}}',
            1,
            "reserved",
            id="reserved-condition-prefix",
        ),
        pytest.param("{" + GOOD + ',"w#p":{"s":"S","c":7}}', 1, "not a condition", id="cond-int"),
    ],
)
def test_malformed_record_keeps_what_it_can(text: str, kept: int, problem: str) -> None:
    record, error = parse_record(text, pod_uid=UID)
    assert len(record) == kept
    if kept:
        assert record == {owner("web#idle"): Owned(S, labels={"idle": "true"})}
    assert error is not None
    assert error.startswith(f"annotation {OWNED_KEY}")
    assert problem in error
    assert len(error) < 1024


def test_many_malformed_entries_are_counted_not_listed() -> None:
    text = orjson.dumps({"#uid": UID} | {f"bad{i}": 1 for i in range(50)}).decode()
    record, error = parse_record(text, pod_uid=UID)
    assert record == {}
    assert error is not None
    assert "dropped 50 malformed entries" in error
    assert "(and 47 more)" in error


def test_unknown_entry_members_are_ignored() -> None:
    text = '{"#uid":"' + UID + '","w#p":{"s":"F","x":[1]}}'
    assert parse_record(text, pod_uid=UID) == ({owner("w#p"): Owned(F)}, None)


def test_fit_keeps_owners_in_order_until_the_limit() -> None:
    record = {owner(f"m{i:03}#p"): FULL for i in range(10)}
    three = {owner(f"m{i:03}#p"): FULL for i in range(3)}
    limit = len(render_record(three, pod_uid=UID) or "") + 10
    kept, dropped = fit_record(record, pod_uid=UID, limit=limit)
    assert kept == three
    assert dropped == tuple(owner(f"m{i:03}#p") for i in range(3, 10))
    assert len(render_record(kept, pod_uid=UID) or "") <= limit


def test_fit_size_is_exact() -> None:
    record = {owner(f"m{i:03}#p"): FULL for i in range(5)}
    size = len(render_record(record, pod_uid=UID) or "")
    assert fit_record(record, pod_uid=UID, limit=size) == (record, ())
    assert len(fit_record(record, pod_uid=UID, limit=size - 1)[0]) == 4


def test_hundreds_of_owners_fit_the_default_limit() -> None:
    record = {owner(f"marker-{i:03}#probe"): FULL for i in range(300)}
    kept, dropped = fit_record(record, pod_uid=UID)
    assert dropped == ()
    assert len(render_record(kept, pod_uid=UID) or "") <= RECORD_LIMIT


def test_owners_text_is_bounded() -> None:
    owners = [owner(f"m{i}#p") for i in range(5)]
    assert owners_text(owners) == "m0#p, m1#p, m2#p (and 2 more)"


@pytest.mark.parametrize(
    "warned",
    [
        pytest.param('"not an object"', id="not-an-object"),
        pytest.param('{"l:k":7}', id="token-not-a-string"),
        pytest.param('{"q:k":"v"}', id="unknown-kind"),
        pytest.param('{"l-k":"v"}', id="no-colon"),
        pytest.param('{"l:not a key":"v"}', id="not-a-key"),
        pytest.param('{"l:k":"' + "v" * 65 + '"}', id="token-too-long"),
        pytest.param('{"l:k":"#short"}', id="not-a-digest"),
        pytest.param(
            "{" + ",".join(f'"l:k{i}":"v"' for i in range(257)) + "}",
            id="more-slots-than-any-owner",
        ),
    ],
)
def test_a_malformed_warned_member_is_ignored_not_the_entry(warned: str) -> None:
    """`w` only spares a repeated Warning: a bad one (anyone who may edit the pod may
    write it) costs the entry nothing, and is replaced at the next write."""
    text = '{"#uid":"' + UID + '","w#p":{"s":"F","l":{"k":"v"},"w":' + warned + "}}"
    assert parse_record(text, pod_uid=UID) == ({owner("w#p"): Owned(F, labels={"k": "v"})}, None)


def test_a_held_command_is_three_short_members() -> None:
    text = render_record({owner("w#p"): Owned(F, held=HELD)}, pod_uid=UID)
    assert text == (
        '{"#uid":"'
        + UID
        + '","w#p":{"h":{"c":"543cc8b549a2","d":"'
        + HELD.command
        + '","t":1800000000},"s":"F"}}'
    )
    assert len(HELD.command) == 16


@pytest.mark.parametrize(
    ("container_id", "mark"),
    [
        pytest.param("containerd://543cc8b549a2214bd6cea151bb5b", "543cc8b549a2", id="containerd"),
        pytest.param("cri-o://0123456789abcdef", "0123456789ab", id="cri-o"),
        pytest.param("containerd://1", "1", id="short"),
        pytest.param("", "", id="none-yet"),
    ],
)
def test_container_marks(container_id: str, mark: str) -> None:
    assert container_mark(container_id) == mark


def test_a_container_id_of_other_characters_is_digested() -> None:
    mark = container_mark("odd://Not/Hex!")
    assert len(mark) == 16
    assert mark != container_mark("odd://Not/Hex?")


def test_an_edited_command_has_another_digest() -> None:
    assert command_digest(["sleep", "3600"]) != command_digest(["sleep", "3601"])
    assert command_digest(["a b"]) != command_digest(["a", "b"])


H = '"h":{"c":"543cc8b549a2","d":"' + HELD.command + '","t":1800000000}'


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        pytest.param('{"h":7}', "'h' is not an object", id="not-an-object"),
        pytest.param('{"h":null}', "'h' is null", id="null"),
        pytest.param('{"h":{}}', "no command digest", id="empty"),
        pytest.param('{"h":{"c":"a","d":"short","t":1}}', "no command digest", id="short-digest"),
        pytest.param('{"h":{"c":"","d":"' + HELD.command + '","t":1}}', "no container", id="no-container"),
        pytest.param('{"h":{"c":"a/b","d":"' + HELD.command + '","t":1}}', "no container", id="bad-container"),
        pytest.param('{"h":{"c":"' + "a" * 17 + '","d":"' + HELD.command + '","t":1}}', "no container", id="long-container"),
        pytest.param('{"h":{"c":"a","d":"' + HELD.command + '","t":1.5}}', "no time", id="float-time"),
        pytest.param('{"h":{"c":"a","d":"' + HELD.command + '","t":true}}', "no time", id="bool-time"),
        pytest.param('{"h":{"c":"a","d":"' + HELD.command + '","t":-5}}', "no time", id="negative-time"),
        pytest.param('{"h":{"c":"a","d":"' + HELD.command + '","t":"1"}}', "no time", id="string-time"),
        pytest.param('{"h":{"c":"a","d":"' + HELD.command + '","t":' + "9" * 30 + "}}", "", id="huge-time"),
        pytest.param('{"s":"S",' + H[:-1] + ',"t":0}}', "", id="duplicate-time"),
        pytest.param("{" + H + ',"l":{"idle":"true"}}', "'s' is not", id="keys-without-a-state"),
    ],
)  # fmt: skip
def test_a_malformed_held_command_drops_its_entry(entry: str, problem: str) -> None:
    text = "{" + GOOD + ',"w#p":' + entry + "}"
    record, error = parse_record(text, pod_uid=UID)
    assert record == {owner("web#idle"): Owned(S, labels={"idle": "true"})}
    assert error is not None
    assert problem in error


def test_a_held_command_from_a_copied_record_is_not_trusted() -> None:
    text = '{"#uid":"other","w#p":{' + H + "}}"
    assert parse_record(text, pod_uid=UID)[0] == {}


def test_with_held_records_exactly_the_commands_held() -> None:
    entries = {
        owner("a#p"): Owned(S, held=HELD),  # its hold ended: left out
        owner("b#p"): Owned(F),  # held now
        owner("c#p"): Owned(None, held=HELD),  # not decided, its hold ended: no entry
        owner("d#p"): None,  # departed with nothing: no entry
    }
    held = {owner("b#p"): HELD, owner("e#p"): HELD}  # e: not decided, no entry yet
    assert with_held(entries, held) == {
        owner("a#p"): Owned(S),
        owner("b#p"): Owned(F, held=HELD),
        owner("e#p"): Owned(None, held=HELD),
    }
