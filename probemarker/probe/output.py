"""Probe output made safe for a pod condition and an event: sanitised, trimmed, chosen.

Stage: probe (pure). Input: text a container (or a runtime, or a server) wrote,
already decoded from UTF-8 with replacement. Output: a message that may go into a
pod condition's `message` and an event's `note` (docs/engine.md, docs/security.md).

Invariants of `clean_message`, in this order:
- line ends: `\\r\\n` and a lone `\\r` become `\\n` (a progress line rewritten with
  `\\r` keeps every version, on its own line, instead of a control character);
- terminal escape sequences (CSI such as colours `ESC[31m`, OSC such as window
  titles, DCS/APC strings, two-character escapes, the one-byte C1 CSI) are removed
  whole, so no `[31m` debris is left;
- every other control character (C0 but `\\n` and `\\t`, DEL, C1) and the bidi
  embedding/override/isolate marks (U+202A-U+202E, U+2066-U+2069, which can make a
  `kubectl describe` line read differently from what it holds) are dropped;
- a lone surrogate (not valid Unicode; a JSON encoder refuses it) becomes U+FFFD;
- surrounding whitespace is stripped and the text is cut to `limit` bytes of UTF-8,
  never inside a character; the result is stripped again, so cleaning is idempotent.
Only the first `_SCAN_FACTOR * limit` characters are looked at: the work stays
bounded whatever a command printed (the exec stream keeps 1 KiB anyway).

`first_line` is the one-line form for a message that must stay short (an httpGet
failure shows at most that much of the body): the first line of the cleaned text
that holds anything, tabs as spaces, cut to a few bytes and marked with `…` when cut.
"""

from __future__ import annotations

import re

from probemarker.kit.text import trim_utf8

__all__ = [
    "ELLIPSIS",
    "MAX_RESULT_BYTES",
    "MESSAGE_LIMIT",
    "choose_answer",
    "choose_message",
    "clean_message",
    "first_line",
    "result_text",
]

MESSAGE_LIMIT = 1024  # docs/engine.md: a condition message is trimmed to 1 KiB
MAX_RESULT_BYTES = 1024  # of what `{{.Result}}` stands for (docs/api.md)
_SCAN_FACTOR = 16
ELLIPSIS = "\u2026"  # ends a line that `first_line` cut

_LINE_END = re.compile(r"\r\n?")
_ESCAPES = re.compile(
    r"""
      \x1b\[ [0-?]* [\x20-/]* [@-~]           # CSI: ESC [ params intermediates final
    | \x9b [0-?]* [\x20-/]* [@-~]              # the same with the one-byte C1 CSI
    | \x1b\] [^\x07\x1b\n]* (?:\x07|\x1b\\)?   # OSC, ended by BEL or ST
    | \x1b [PX^_] [^\x1b\n]* (?:\x1b\\)?       # DCS, SOS, PM, APC strings, ended by ST
    | \x1b [\x20-/]* [0-~]                     # any other escape (nF, Fp, Fe, Fs)
    """,
    re.VERBOSE,
)
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_SURROGATES = re.compile("[\ud800-\udfff]")


def clean_message(text: str, *, limit: int = MESSAGE_LIMIT) -> str:
    """`text` sanitised, stripped and cut to `limit` UTF-8 bytes (see the module)."""
    text = text[: _SCAN_FACTOR * limit]
    text = _LINE_END.sub("\n", text)
    text = _ESCAPES.sub("", text)
    text = _CONTROLS.sub("", text)
    text = _SURROGATES.sub("\ufffd", text)
    return trim_utf8(text.strip(), limit).rstrip()


def first_line(text: str, *, limit: int) -> str:
    """The first line of `text` that holds anything, cleaned as `clean_message` cleans
    (no control character, no escape sequence), tabs as spaces, stripped, at most
    `limit` UTF-8 bytes; a line that was longer is cut and ends with `ELLIPSIS`."""
    if limit <= len(ELLIPSIS.encode()):
        raise ValueError(f"first_line needs a limit above {len(ELLIPSIS.encode())} bytes")
    line = clean_message(text).partition("\n")[0].replace("\t", " ").strip()
    if len(line.encode()) <= limit:
        return line
    return trim_utf8(line, limit - len(ELLIPSIS.encode())).rstrip() + ELLIPSIS


def choose_message(*, succeeded: bool, stdout: str, stderr: str) -> str:
    """The message of one run, cleaned (docs/engine.md).

    stdout on success; on failure stderr, or stdout when stderr is empty (Kruise
    drops stdout on failure, so a checker that reports on stdout and exits 1 left
    an empty message: kruise-game#297). "Empty" is judged after cleaning: stderr of
    only whitespace or escape codes says nothing, and stdout is used instead.
    """
    if succeeded:
        return clean_message(stdout)
    return clean_message(stderr) or clean_message(stdout)


def choose_answer(*, stdout: str, stderr: str) -> str:
    """A command's answer (`Outcome.answer`, what `{{.Result}}` is made of), cleaned:
    stdout, or stderr when stdout is empty, whatever the exit code, so one probe's
    answer is the same in both states (issue 24; docs/api.md)."""
    return clean_message(stdout) or clean_message(stderr)


def result_text(answer: str) -> str:
    """What `{{.Result}}` in a markerPolicy value stands for (api/template.py), from a
    probe's answer (`Outcome.answer`, already cleaned): its first line, stripped, with
    every `|` removed (kruise-game's rule for its `{{.Result}}`, so a result moves
    between the two unchanged), stripped again, cut to `MAX_RESULT_BYTES` of UTF-8."""
    line = answer.partition("\n")[0].strip().replace("|", "").strip()
    return trim_utf8(line, MAX_RESULT_BYTES).rstrip()
