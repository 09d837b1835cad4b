"""Value tokens: what the ownership record keeps of a value it names.

Stage: write (pure). Input: a value (or the pieces it joins, never joined:
`api.template.render_pieces`). Output: its token (`value_token`, `pieces_token`), and
whether a text read from a record is one (`is_token`).

Rules: a value of at most 64 bytes that does not start with `#` is its own token; any
other is `#` and 22 characters of the unpadded base64url of its SHA-256 (132 bits), so
a 4 KiB annotation costs 23 bytes in the record (write/ownership.py) and the two forms
can never be mistaken for one another. A value still holds what was written while its
token is the one recorded (the ownership rule, write/ours.py).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from typing import Final

from probemarker.api.fields import matches

__all__ = ["is_token", "pieces_token", "value_token"]

_LITERAL_LIMIT: Final = 64  # bytes of a value recorded as itself
_DIGEST_MARK: Final = "#"
_DIGEST_CHARS: Final = 22  # of unpadded base64url: 132 bits of SHA-256
_DIGEST_RE: Final = f"^#[-_A-Za-z0-9]{{{_DIGEST_CHARS}}}$"


def value_token(value: str) -> str:
    """What the record keeps of a value: itself when short, else a digest of it.

    A literal token never starts with `#` (such a value is digested), so the two
    forms cannot be mistaken for one another.
    """
    data = value.encode("utf-8", "surrogatepass")
    if len(data) <= _LITERAL_LIMIT and not value.startswith(_DIGEST_MARK):
        return value
    return _digest_token(hashlib.sha256(data).digest())


def pieces_token(pieces: Iterable[str]) -> str:
    """`value_token` of the value the `pieces` join to (`api.template.render_pieces`),
    without joining them: the same token, one piece at a time."""
    digest = hashlib.sha256()
    head: list[bytes] = []  # the first bytes, while the value may be a literal token
    size = 0
    for piece in pieces:
        data = piece.encode("utf-8", "surrogatepass")
        digest.update(data)
        size += len(data)
        if size <= _LITERAL_LIMIT:
            head.append(data)
    if size <= _LITERAL_LIMIT:
        return value_token(b"".join(head).decode("utf-8", "surrogatepass"))
    return _digest_token(digest.digest())


def _digest_token(sha256: bytes) -> str:
    """The token of a value that is not its own (`value_token`), from its SHA-256."""
    text = base64.urlsafe_b64encode(sha256).decode("ascii")
    return _DIGEST_MARK + text[:_DIGEST_CHARS]


def is_token(text: str) -> bool:
    """Whether `text` is a token `value_token` can make (a record's annotation value)."""
    if text.startswith(_DIGEST_MARK):
        return matches(_DIGEST_RE, text)
    return len(text.encode("utf-8", "surrogatepass")) <= _LITERAL_LIMIT
