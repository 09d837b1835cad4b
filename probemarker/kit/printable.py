"""Text made safe to print: what a marker, a pod or a probe's output puts into a line
for a terminal, a log or an event, escaped.

Stage: ground floor (pure). `printable` escapes control and format characters (a
hostile value cannot split a line, send escape sequences to a terminal or reorder what
a line shows); `printable_json` does the same to a JSON document with JSON's own
escapes, so a parser still reads the same values. Used by every report and view
(`probemarker validate`, `check`, `status`), the log lines and the API's error texts.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["printable", "printable_json"]

# Candidates for escaping: anything but printable ASCII. Each is then judged by its
# Unicode category (`_hidden`), so the common case (ASCII text) costs one regex scan.
_NOT_PLAIN = re.compile("[^\x20-\x7e]")


def _hidden(c: str) -> bool:
    """Whether `c` must not reach a terminal as it is: control characters (C0, DEL, C1
    such as the one-byte CSI U+009B), format characters (the bidi marks, embeddings,
    overrides and isolates U+061C, U+200E/F, U+202A-U+202E, U+2066-U+2069 among them),
    surrogates, private-use and unassigned code points (category C), and the Unicode
    line and paragraph separators (Zl, Zp), which some viewers break lines at."""
    category = unicodedata.category(c)
    return category[0] == "C" or category in ("Zl", "Zp")


def _escape(c: str) -> str:
    return c.encode("unicode_escape").decode("ascii") if _hidden(c) else c


def printable(text: str) -> str:
    """`text` with control and format characters escaped (`_hidden`: newline and tab
    too), so a hostile value cannot split a line of output, send escape sequences to a
    terminal, log or event, or reorder what a line shows. The one escaping of
    everything a marker, a pod or a probe's output puts into text for a terminal (the
    `probemarker validate` and `check` reports); idempotent (its output has nothing
    left to escape)."""
    return _NOT_PLAIN.sub(lambda m: _escape(m.group()), text)


def _json_escape(c: str) -> str:
    if c in "\n\t\r" or not _hidden(c):
        return c
    units = c.encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))


def printable_json(text: str) -> str:
    """JSON `text` with every character `printable` escapes written as a JSON `\\uXXXX`
    escape: the same document (a parser reads the same values), safe on a terminal. Raw
    newline, tab and CR can only be whitespace between tokens in JSON (inside strings an
    encoder escapes them), so they are kept."""
    return _NOT_PLAIN.sub(lambda m: _json_escape(m.group()), text)
