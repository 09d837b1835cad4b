"""What an informer keeps of an object's annotations: a few values, fingerprints, a size.

Stage: projection (pure), between the parsed object and the store. Input: the
`metadata.annotations` of one object, and the keys whose values the caller reads.
Output: an `AnnotationSummary`:

- `values`: the value of every key the caller asked for (None: not on the object);
- two fingerprints per annotation, 16 bytes of keyed BLAKE2b each: one of its key,
  one of (key, value), so `has(key)` and `carries(key, value)` ("does the object carry
  exactly this?") answer for *any* key, kept or not, without keeping the value;
- `sizes`: the bytes of each annotation's value, in the order of the key
  fingerprints, so `value_bytes(key)` answers for any key (what a write that replaces
  a value the daemon did not keep frees: write/room.py counts room exactly);
- `total_bytes`: the size the API server checks against its 256 KiB limit, computed
  as `ValidateAnnotationsSize` in apimachinery does (api/validation/objectmeta.go):
  the sum of len(key) + len(value) over every annotation, in bytes of UTF-8 (Go's
  `len` of a string); `count`: the number of annotations (0: the map is absent, as
  the API server drops an empty one).

Why fingerprints and not the keys the markers name: a daemon needs a pod's values
only where it may *remove* a key (the keys its ownership record names, and the record
itself: `keep` picks them, from the same object, so they can never be stale); where
it *sets* a key it needs only whether the key already holds the value it would write.
Markers change at run time; a filter built from the markers of the moment would leave
a projection made before a marker named a new key without that key, and a write
computed from it would be computed from a missing value. The fingerprints answer for
every key whatever the markers were when the object was projected, at 32 bytes an
annotation instead of its whole value (a pod's `kubectl.kubernetes.io/
last-applied-configuration` alone is often kilobytes).

Invariants: `value(key)` never guesses: asked for a key it did not keep, it raises
`UnknownAnnotation` (a programming error; no write is computed from a value it does not
have). The fingerprint key is random per process, so no one who can edit a pod can
craft a key or value whose fingerprint matches another's (a collision is otherwise a
chance of 2**-128 per comparison). Equal annotations give equal summaries within a process
(fingerprints are sorted), which lets the informer tell an unchanged object.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

__all__ = [
    "EMPTY",
    "AnnotationSummary",
    "UnknownAnnotation",
    "annotations_size",
    "summarize",
]

_FINGERPRINT: Final = 16  # bytes
_SECRET: Final = os.urandom(16)


class UnknownAnnotation(KeyError):
    """A value asked of a summary that did not keep it."""


def _utf8(text: str) -> bytes:
    # surrogatepass: a lone surrogate (never valid on a real API server) must not raise.
    return text.encode("utf-8", "surrogatepass")


def _key_print(key: bytes) -> bytes:
    return hashlib.blake2b(key, digest_size=_FINGERPRINT, key=_SECRET, person=b"key").digest()


def _pair_print(key: bytes, value: bytes) -> bytes:
    digest = hashlib.blake2b(digest_size=_FINGERPRINT, key=_SECRET, person=b"pair")
    digest.update(len(key).to_bytes(4, "big"))  # (ab, c) and (a, bc) differ
    digest.update(key)
    digest.update(value)
    return digest.digest()


def _position(prints: bytes, wanted: bytes) -> int | None:
    """The index of `wanted` among the fingerprints `prints`, or None."""
    at = prints.find(wanted)
    while at >= 0:
        if at % _FINGERPRINT == 0:
            return at // _FINGERPRINT
        at = prints.find(wanted, at + 1)
    return None


def _among(prints: bytes, wanted: bytes) -> bool:
    return _position(prints, wanted) is not None


@dataclass(frozen=True, slots=True)
class AnnotationSummary:
    """See the module docstring; build with `summarize`."""

    values: Mapping[str, str | None]  # the kept keys: value, or None when absent
    keys: bytes  # fingerprints of the keys, sorted, _FINGERPRINT bytes each
    pairs: bytes  # fingerprints of (key, value), sorted
    total_bytes: int
    count: int
    sizes: tuple[int, ...] = ()  # bytes of each value, in the order of `keys`

    def __repr__(self) -> str:
        return (
            f"AnnotationSummary({self.count} annotations, {self.total_bytes} bytes, "
            f"kept {sorted(self.values)})"
        )

    @property
    def present(self) -> bool:
        """Whether the object has any annotation (else `metadata.annotations` is absent)."""
        return self.count > 0

    def kept(self, key: str) -> bool:
        return key in self.values

    def value(self, key: str) -> str | None:
        """The value of a kept key (None: not on the object); `UnknownAnnotation` for a
        key that was not kept."""
        try:
            return self.values[key]
        except KeyError:
            raise UnknownAnnotation(key) from None

    def has(self, key: str) -> bool:
        """Whether the object carries `key`; for any key."""
        if key in self.values:
            return self.values[key] is not None
        return _among(self.keys, _key_print(_utf8(key)))

    def value_bytes(self, key: str) -> int | None:
        """The bytes of `key`'s value (None: not on the object); for any key."""
        if key in self.values:
            found = self.values[key]
            return None if found is None else len(_utf8(found))
        at = _position(self.keys, _key_print(_utf8(key)))
        return None if at is None else self.sizes[at]

    def carries(self, key: str, value: str) -> bool:
        """Whether the object carries `key` with exactly `value`; for any key."""
        if key in self.values:
            return self.values[key] == value
        return _among(self.pairs, _pair_print(_utf8(key), _utf8(value)))


EMPTY: Final = AnnotationSummary(MappingProxyType({}), b"", b"", 0, 0)


def annotations_size(annotations: Mapping[str, str]) -> int:
    """Bytes the API server counts against its 256 KiB limit (ValidateAnnotationsSize)."""
    return sum(len(_utf8(k)) + len(_utf8(v)) for k, v in annotations.items())


def summarize(annotations: Any, keep: Iterable[str] = ()) -> AnnotationSummary:
    """The summary of `annotations` (a JSON object of strings; anything else reads as
    none), keeping the values of the keys in `keep`. A value that is not a string
    (never on a real API server) counts as absent."""
    if not isinstance(annotations, Mapping):
        annotations = {}
    keys: list[tuple[bytes, int]] = []
    pairs: list[bytes] = []
    total = 0
    for key, value in annotations.items():
        if not isinstance(key, str) or not isinstance(value, str):
            continue
        key_bytes, value_bytes = _utf8(key), _utf8(value)
        total += len(key_bytes) + len(value_bytes)
        keys.append((_key_print(key_bytes), len(value_bytes)))
        pairs.append(_pair_print(key_bytes, value_bytes))
    keys.sort()
    pairs.sort()
    values: dict[str, str | None] = {}
    for key in keep:
        found = annotations.get(key)
        values[key] = found if isinstance(found, str) else None
    if not pairs and not values:
        return EMPTY
    return AnnotationSummary(
        MappingProxyType(values),
        b"".join(k for k, _ in keys),
        b"".join(pairs),
        total,
        len(pairs),
        tuple(n for _, n in keys),
    )
