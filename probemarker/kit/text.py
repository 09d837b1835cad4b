"""Text cut to a size that the API server counts in bytes.

Stage: ground floor (pure). The API server measures names, notes and values with Go's
`len`, in bytes of UTF-8; a cut made in characters can overrun it, and a cut made in
bytes can split a character. `trim_utf8` cuts in bytes at a character boundary.
"""

from __future__ import annotations

__all__ = ["trim_utf8"]


def trim_utf8(text: str, limit: int) -> str:
    """`text` cut to at most `limit` UTF-8 bytes, never inside a character."""
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore")
