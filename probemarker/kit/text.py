"""Text cut to a size: in the bytes the API server counts, or in the room it takes shown.

Stage: ground floor (pure). The API server measures names, notes and values with Go's
`len`, in bytes of UTF-8; a cut made in characters can overrun it, and a cut made in
bytes can split a character. `trim_utf8` cuts in bytes at a character boundary.

`shown` is a value as a view shows it (`probemarker status`, a log line, an event's
note): a value that a marker author or a container controls can be long (a template
that repeats `{{.Result}}` renders hundreds of KB), so a view carries its first
characters, never more than `SHOWN_LIMIT` bytes once written as JSON, with the whole
value's size and a short digest, so that two values stay told apart. It reads the value
as pieces (`api.template.render_pieces`), so a rendered value is measured, digested
and cut without ever being built whole.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["SHOWN_LIMIT", "Shown", "json_size", "shown", "trim_utf8"]

SHOWN_LIMIT = 256  # bytes of JSON the text of a shown value takes at most
DIGEST_CHARS = 12  # hex characters of the digest shown (48 bits: tells values apart)

# What JSON (orjson, json.dumps with ensure_ascii=False) writes for a character below
# 0x20, '"' and '\': a two-character escape or `\u00XX`.
_SHORT_ESCAPES = frozenset('"\\\b\f\n\r\t')


def trim_utf8(text: str, limit: int) -> str:
    """`text` cut to at most `limit` UTF-8 bytes, never inside a character."""
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore")


def json_size(char: str) -> int:
    """Bytes the character `char` takes inside a JSON string written as UTF-8."""
    if char in _SHORT_ESCAPES:
        return 2
    code = ord(char)
    if code < 0x20:
        return 6  # \u00XX
    if code < 0x80:
        return 1
    if code < 0x800:
        return 2
    return 3 if code < 0x10000 else 4


@dataclass(frozen=True, slots=True)
class Shown:
    """A value as a view shows it: `text`, its first characters (all of it when it fits
    in `SHOWN_LIMIT` bytes of JSON); `size`, the whole value's length in UTF-8 bytes
    (what the API server counts); `digest`, the whole value's SHA-256 (hex)."""

    text: str
    size: int
    digest: str

    @property
    def cut(self) -> bool:
        return len(self.text.encode("utf-8", "surrogatepass")) < self.size

    @property
    def short_digest(self) -> str:
        return self.digest[:DIGEST_CHARS]

    def quoted(self) -> str:
        """For a note: the text quoted, and when it was cut, what the whole value is,
        outside the quotes (`'abc'... (380928 bytes, sha256 3f1c0a9d2b7e)`)."""
        if not self.cut:
            return repr(self.text)
        return f"{self.text!r}... ({self.size} bytes, sha256 {self.short_digest})"


def shown(pieces: Iterable[str] | str, *, limit: int = SHOWN_LIMIT) -> Shown:
    """The value made of `pieces` (joined; or one string) as a view shows it: its longest
    prefix of whole characters that takes at most `limit` bytes as JSON, its size and
    its digest. Work and memory: the prefix, one piece at a time, and the digest."""
    if isinstance(pieces, str):
        pieces = (pieces,)
    digest = hashlib.sha256()
    kept: list[str] = []
    room, size, full = limit, 0, False
    for piece in pieces:
        data = piece.encode("utf-8", "surrogatepass")
        digest.update(data)
        size += len(data)
        if full:
            continue
        # At most `limit` characters are looked at in all: each takes a byte or more.
        for index, char in enumerate(piece):
            cost = json_size(char)
            if cost > room:
                kept.append(piece[:index])
                full = True
                break
            room -= cost
        else:
            kept.append(piece)
    return Shown("".join(kept), size, digest.hexdigest())
