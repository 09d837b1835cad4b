"""clean_message and choose_message: sanitised, trimmed, the right stream."""

from __future__ import annotations

import time

import orjson
import pytest

from probemarker.probe.output import (
    MAX_RESULT_BYTES,
    MESSAGE_LIMIT,
    choose_message,
    clean_message,
    first_line,
    result_text,
)

CLEAN_CASES = [
    pytest.param("ok", "ok", id="plain"),
    pytest.param("  ok\n", "ok", id="surrounding-whitespace"),
    pytest.param(" \n\t \r\n ", "", id="only-whitespace"),
    pytest.param("", "", id="empty"),
    pytest.param("a\tb\nc", "a\tb\nc", id="tab-and-newline-kept"),
    pytest.param("a\r\nb", "a\nb", id="crlf"),
    pytest.param("10%\r50%\r100%", "10%\n50%\n100%", id="lone-cr-is-a-line-end"),
    pytest.param("a\x00b\x07c\x08d", "abcd", id="nul-bel-backspace-dropped"),
    pytest.param("a\x0b\x0cb\x7f\x85\x9fc", "abc", id="vt-ff-del-c1-dropped"),
    pytest.param("\x1b[31mred\x1b[0m", "red", id="ansi-colour"),
    pytest.param("\x1b[1;32;40mbold\x1b[K", "bold", id="ansi-params-and-erase"),
    pytest.param("\x1b]0;title\x07text", "text", id="osc-title-bel"),
    pytest.param("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link", id="osc-hyperlink-st"),
    pytest.param("\x1bPqdata\x1b\\after", "after", id="dcs-string"),
    pytest.param("\x1b(Bx\x1bcy\x1b7z", "xyz", id="two-character-escapes"),
    pytest.param("\x9b31mc1\x9b0m", "c1", id="c1-csi"),
    pytest.param("end\x1b", "end", id="lone-esc-at-end"),
    pytest.param("x\x1b[", "x", id="cut-csi-at-end"),
    pytest.param("bad \ufffd\ufffd!", "bad \ufffd\ufffd!", id="replacement-kept"),
    pytest.param("lone \ud800 surrogate", "lone \ufffd surrogate", id="lone-surrogate"),
    pytest.param("abc\u202edcba\u2066x\u2069", "abcdcbax", id="bidi-controls-dropped"),
    pytest.param("caf\u00e9 \U0001f600 \u4e2d", "caf\u00e9 \U0001f600 \u4e2d", id="unicode-kept"),
    pytest.param("a\u200db", "a\u200db", id="zero-width-joiner-kept"),
]


@pytest.mark.parametrize(("text", "expected"), CLEAN_CASES)
def test_clean_message(text: str, expected: str) -> None:
    assert clean_message(text) == expected


@pytest.mark.parametrize(("text", "expected"), CLEAN_CASES)
def test_clean_message_is_idempotent_and_encodable(text: str, expected: str) -> None:
    once = clean_message(text)
    assert clean_message(once) == once
    orjson.dumps(once)  # a JSON encoder takes it (a lone surrogate would raise)


TRIM_CASES = [
    pytest.param("a" * 2000, 1024, "a" * 1024, id="ascii-cut-at-limit"),
    pytest.param("a" * 1024, 1024, "a" * 1024, id="exactly-at-limit"),
    pytest.param("a" * 1023 + "\u00e9", 1024, "a" * 1023, id="two-byte-char-not-split"),
    pytest.param("a" * 1022 + "\U0001f600", 1024, "a" * 1022, id="four-byte-char-not-split"),
    pytest.param("a" * 1020 + "\U0001f600b", 1024, "a" * 1020 + "\U0001f600", id="four-fit"),
    pytest.param("a" * 1023 + " " + "b" * 10, 1024, "a" * 1023, id="cut-then-stripped"),
    pytest.param("  " + "a" * 1030, 1024, "a" * 1024, id="leading-space-not-counted"),
    pytest.param("\u00e9" * 10, 5, "\u00e9\u00e9", id="small-limit"),
    pytest.param("\x1b[31m" * 20 + "x", 10, "x", id="escapes-cost-nothing"),
    # Only the first 16 * limit characters are looked at: text past them is not shown.
    pytest.param(" " * 160 + "x", 10, "", id="scan-bound"),
]


@pytest.mark.parametrize(("text", "limit", "expected"), TRIM_CASES)
def test_trim(text: str, limit: int, expected: str) -> None:
    result = clean_message(text, limit=limit)
    assert result == expected
    assert len(result.encode()) <= limit


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("x" * 10_000_000, id="10MB-ascii"),
        pytest.param("\x00" * 10_000_000, id="10MB-nul"),
        pytest.param("\x1b[31m" * 2_000_000, id="10MB-escapes"),
        pytest.param("\u4e2d" * 4_000_000, id="12MB-cjk"),
        pytest.param(" " * 10_000_000 + "late", id="10MB-whitespace-then-text"),
    ],
)
def test_ten_megabytes_is_bounded_and_fast(text: str) -> None:
    began = time.process_time()
    result = clean_message(text)
    assert len(result.encode()) <= MESSAGE_LIMIT
    assert time.process_time() - began < 0.5  # only a bounded prefix is looked at


CHOOSE_CASES = [
    pytest.param(True, "up\n", "warn\n", "up", id="success-stdout"),
    pytest.param(True, "", "warn", "", id="success-never-stderr"),
    pytest.param(False, "out", "err", "err", id="failure-stderr"),
    pytest.param(False, "busy: 3 players", "", "busy: 3 players", id="failure-stdout-297"),
    pytest.param(False, "out", " \n", "out", id="failure-blank-stderr"),
    pytest.param(False, "out", "\x1b[0m", "out", id="failure-escape-only-stderr"),
    pytest.param(False, "", "", "", id="failure-both-empty"),
    pytest.param(False, "", "\x1b[31mboom\x1b[0m\r\n", "boom", id="failure-cleaned"),
]


@pytest.mark.parametrize(("succeeded", "stdout", "stderr", "expected"), CHOOSE_CASES)
def test_choose_message(succeeded: bool, stdout: str, stderr: str, expected: str) -> None:
    assert choose_message(succeeded=succeeded, stdout=stdout, stderr=stderr) == expected


FIRST_LINE_CASES = [
    pytest.param("draining", 100, "draining", id="one-line"),
    pytest.param("draining\nsince 12:00\n", 100, "draining", id="first-of-many"),
    pytest.param("\n\n  \t\n  db down  \nmore", 100, "db down", id="blank-lines-skipped"),
    pytest.param("a\tb", 100, "a b", id="tab-as-space"),
    pytest.param("a\r\nb", 100, "a", id="crlf-ends-the-line"),
    pytest.param("a\rb", 100, "a", id="lone-cr-ends-the-line"),
    pytest.param("\x1b[31merror\x1b[0m: x\x00y", 100, "error: xy", id="escapes-and-nul"),
    pytest.param("\x1b[0m\nok", 100, "ok", id="a-line-of-escapes-is-blank"),
    pytest.param("", 100, "", id="empty"),
    pytest.param(" \n\t\r\n", 100, "", id="only-whitespace"),
    pytest.param("a" * 100, 100, "a" * 100, id="exactly-at-limit"),
    pytest.param("a" * 101, 100, "a" * 97 + "\u2026", id="cut-with-ellipsis"),
    pytest.param("a" * 95 + "     b", 100, "a" * 95 + "\u2026", id="cut-then-stripped"),
    pytest.param("\u00e9" * 60, 100, "\u00e9" * 48 + "\u2026", id="two-byte-chars-not-split"),
    pytest.param("x" * 5000 + "\nsecond", 100, "x" * 97 + "\u2026", id="huge-first-line"),
    pytest.param("abc\u202edef", 100, "abcdef", id="bidi-dropped"),
]


@pytest.mark.parametrize(("text", "limit", "expected"), FIRST_LINE_CASES)
def test_first_line(text: str, limit: int, expected: str) -> None:
    line = first_line(text, limit=limit)
    assert line == expected
    assert len(line.encode()) <= limit
    assert "\n" not in line
    assert "\r" not in line


def test_first_line_looks_at_a_bounded_prefix() -> None:
    # A line after a megabyte of blank lines is past the scan window: not looked for.
    assert first_line("\n" * 1_000_000 + "late", limit=100) == ""


def test_first_line_refuses_a_limit_without_room() -> None:
    with pytest.raises(ValueError, match="limit above 3"):
        first_line("x", limit=3)


@pytest.mark.parametrize(
    ("answer", "result"),
    [
        pytest.param("primary", "primary", id="one-line"),
        pytest.param("  primary \n replica since 10:02\n", "primary", id="first-line-trimmed"),
        pytest.param("a|b | c", "ab  c", id="pipes-removed"),
        pytest.param("| idle |", "idle", id="pipes-then-trimmed"),
        pytest.param("", "", id="empty"),
        pytest.param("\nsecond", "", id="empty-first-line"),
    ],
)
def test_result_text(answer: str, result: str) -> None:
    assert result_text(answer) == result


def test_result_text_is_cut_to_its_limit_never_inside_a_character() -> None:
    text = result_text("é" * MAX_RESULT_BYTES)
    assert len(text.encode()) <= MAX_RESULT_BYTES
    assert text == "é" * (MAX_RESULT_BYTES // 2)
