"""A LIST answer read as it arrives: its items one at a time, never the whole body.

Stage: below the informer, inside `KubeClient.list_page`. Input: the bytes of a JSON
list answer (`{"kind":"PodList","metadata":{...},"items":[{...},...]}`), in chunks of
any size. Output: the raw bytes of each item of the top-level `items` array, as soon
as its last byte has arrived (`feed`), and at the end the answer without its items
(`finish`: kind, apiVersion and the list's `metadata`, with `"items":[]`).

Why: the API server answers a LIST from its watch cache whole. At resourceVersion=0
the cacher ignores `limit` (apiserver's cacher, `shouldDelegateList`: "serve
paginated requests about revision 0 from watch cache"), and a re-list after 410 Gone
from a given version is not paged either (reflector.go pages only from 0 or ""). Read
whole and parsed at once, the answer for a node of 500 pods with 32 KiB of annotations
each is ~20 MB of bytes plus several times that as Python objects, on top of the store
it replaces (issue 22). Item by item, the informer holds one raw item at a time.

How: a scan over the structure only. A regular expression finds the next `"`, `{`,
`}`, `[`, `]` or `,`; a string is skipped whole (another expression matches its body
with escapes), so brackets inside strings are never counted; numbers, literals and
whitespace are never looked at. The top-level member whose key is `items` and whose
value is an array has its elements cut at the commas between them; everything else is
kept for `finish`. The item bytes are parsed by the caller (orjson), which checks them
fully: this module checks only the nesting it scans.

Invariants: the items and the rest are exactly what one `orjson.loads` of the whole
body would give (tests split real answers at every byte); memory held is the current
item's bytes plus one chunk plus the rest; an item longer than `max_item_bytes`, a
nesting error or a body that ends early raises `ListBodyError`.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["ListBody", "ListBodyError"]

# The next byte that matters to the structure at the top two levels.
_STRUCTURE: Final = re.compile(rb'["{}\[\],]')
# The rest of a string after its opening quote, closing quote included; no match: the
# string (or an escape in it) goes on past the bytes there are yet.
_STRING_REST: Final = re.compile(rb'(?:[^"\\]++|\\.)*+"', re.DOTALL)
# Inside an item (or a nested value of the rest) only brackets matter: everything up to
# the next bracket, whole strings included, in one match. It stops early at a string
# that goes on past the bytes there are yet.
_INNER: Final = re.compile(rb'(?:[^"{}\[\]]++|"(?:[^"\\]++|\\.)*+")*+', re.DOTALL)
_ITEMS: Final = b"items"


class ListBodyError(ValueError):
    """The answer is not a JSON list this reader can split (see the module docstring)."""


class ListBody:
    """See the module docstring: `feed` chunks, collect items; `finish` the rest."""

    def __init__(self, *, max_item_bytes: int) -> None:
        self._max_item = max_item_bytes
        self._buf = bytearray()
        self._pos = 0  # next byte of _buf to scan
        self._depth = 0
        self._last_string: bytes | None = None  # the last string at depth 1 (a key)
        self._in_items = False  # between the `[` and `]` of the top-level items
        self._item_start = 0  # in _buf: where the current item begins
        self._rest = bytearray()  # the answer without its items
        self._items = 0

    def __repr__(self) -> str:
        return f"ListBody(items={self._items}, buffered={len(self._buf)}, rest={len(self._rest)})"

    def feed(self, chunk: bytes) -> list[bytes]:
        """The items whose last byte is in `chunk` (or before it), in order."""
        self._buf += chunk
        items = self._scan()
        self._trim()
        return items

    def finish(self) -> bytes:
        """The answer without its items (`"items":[]`): a JSON object to parse."""
        if self._depth != 0 or self._in_items or self._buf[self._pos :].strip():
            raise ListBodyError("the answer ended before its JSON did")
        self._rest += self._buf[self._pos :]
        return bytes(self._rest)

    # -- scanning ------------------------------------------------------------------------

    def _scan(self) -> list[bytes]:
        items: list[bytes] = []
        buf = self._buf
        while True:
            if self._depth >= (3 if self._in_items else 2):
                # Deep inside: skip to the next bracket (one regex match, not a loop).
                self._pos = _INNER.match(buf, self._pos).end()  # type: ignore[union-attr]
                if self._pos >= len(buf) or buf[self._pos] == 0x22:
                    return items  # the end, or a string that goes on in the next chunk
            found = _STRUCTURE.search(buf, self._pos)
            if found is None:
                break
            at = found.start()
            char = buf[at]
            if char == 0x22:  # "
                end = _STRING_REST.match(buf, at + 1)
                if end is None:
                    self._pos = at  # the string goes on in the next chunk
                    return items
                if self._depth == 1:
                    self._last_string = bytes(buf[at + 1 : end.end() - 1])
                self._pos = end.end()
                continue
            self._pos = at + 1
            if char in b"{[":
                self._open(char, at)
            elif char in b"}]":
                self._close(at, items)
            elif self._in_items and self._depth == 2:  # a comma between two items
                self._take(at, items)
                self._item_start = at + 1
        self._pos = len(buf)
        return items

    def _open(self, char: int, at: int) -> None:
        if self._depth == 0 and char != 0x7B:  # {
            raise ListBodyError("the answer is not a JSON object")
        self._depth += 1
        if self._depth == 2 and char == 0x5B and self._last_string == _ITEMS:  # [
            # The top-level items array: the rest keeps `[`, the items go out one by one.
            self._rest += self._buf[: at + 1]
            self._in_items = True
            self._item_start = at + 1

    def _close(self, at: int, items: list[bytes]) -> None:
        self._depth -= 1
        if self._depth < 0:
            raise ListBodyError("a bracket closes that was never opened")
        if self._in_items and self._depth == 1:  # the `]` of the items array
            self._take(at, items)
            self._in_items = False
            del self._buf[:at]  # the rest goes on from the `]`
            self._pos -= at
            self._item_start = 0

    def _take(self, end: int, items: list[bytes]) -> None:
        raw = bytes(self._buf[self._item_start : end]).strip()
        if raw:
            items.append(raw)
            self._items += 1
        elif self._items or self._buf[end] == 0x2C:  # `[,`, `,,` or `,]`
            raise ListBodyError("an empty item in the items array")

    def _trim(self) -> None:
        """Drop what is scanned and no longer needed; keep the rest for `finish`."""
        if self._in_items:
            keep = self._item_start
            self._item_start = 0
        else:
            keep = self._pos
            self._rest += self._buf[:keep]
        del self._buf[:keep]
        self._pos -= keep
        if len(self._buf) > self._max_item or len(self._rest) > self._max_item:
            raise ListBodyError(f"a listed item is longer than {self._max_item} bytes")
