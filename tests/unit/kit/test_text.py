"""Text cut to a size: `trim_utf8` in bytes, `shown` in the room it takes as JSON."""

from __future__ import annotations

import hashlib

import orjson
import pytest

from probemarker.api.template import render_pieces
from probemarker.kit.text import SHOWN_LIMIT, shown, trim_utf8


@pytest.mark.parametrize(
    ("text", "limit", "cut"),
    [
        pytest.param("abc", 3, "abc", id="fits"),
        pytest.param("abcd", 3, "abc", id="ascii"),
        pytest.param("aé", 2, "a", id="never-inside-a-character"),
    ],
)
def test_trim_utf8(text: str, limit: int, cut: str) -> None:
    assert trim_utf8(text, limit) == cut


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param("yes", "yes", id="short-whole"),
        pytest.param("x" * 300, "x" * SHOWN_LIMIT, id="ascii-cut-at-the-limit"),
        pytest.param('"' * 300, '"' * (SHOWN_LIMIT // 2), id="escaped-quotes-count-twice"),
        pytest.param("\x01" * 100, "\x01" * (SHOWN_LIMIT // 6), id="control-characters-count-six"),
        pytest.param("é" * 200, "é" * (SHOWN_LIMIT // 2), id="two-byte-characters"),
        pytest.param("😀" * 100, "😀" * (SHOWN_LIMIT // 4), id="never-inside-a-character"),
    ],
)
def test_shown_keeps_what_fits_in_its_json_bytes(value: str, text: str) -> None:
    seen = shown(value)
    assert seen.text == text
    assert len(orjson.dumps(seen.text)) - 2 <= SHOWN_LIMIT  # the quotes aside
    assert seen.size == len(value.encode())
    assert seen.digest == hashlib.sha256(value.encode()).hexdigest()
    assert seen.cut is (text != value)


def test_a_rendered_value_is_shown_from_its_pieces_without_being_built() -> None:
    """372 copies of the action in a 4 KiB annotation value, with a 1 KiB answer: the
    value is 380 KB; what is shown is its start, its size and its digest."""
    template, answer = "{{.Result}}" * 372, "r" * 1024
    pieces = list(render_pieces(template, answer))
    assert max(len(p) for p in pieces) == 1024  # no piece is the whole value
    seen = shown(pieces)
    whole = answer * 372
    assert (seen.text, seen.size) == ("r" * SHOWN_LIMIT, len(whole))
    assert seen.digest == hashlib.sha256(whole.encode()).hexdigest()
    assert seen.quoted() == (
        f"'{'r' * SHOWN_LIMIT}'... ({len(whole)} bytes, sha256 {seen.digest[:12]})"
    )
    assert shown("short").quoted() == "'short'"
