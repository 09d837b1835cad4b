"""The exec-hold record: a command that may still run in a container after its probe's
run ended.

Stage: values (pure). `HeldCommand` names it (an exec whose stream outlived its
timeout, probe/holds.py): which command (`command_digest` of its argv), in which
instance of the container (`container_mark` of its ID: a restarted container has a new
one, and its old processes are gone), and since when. The holds key a command by the
container it runs in, never by the probe (`probe.holdtable.CommandKey`), and the pod's
ownership record carries it across a restart of the daemon (write/ownership.py,
member `h`).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import orjson

__all__ = [
    "CONTAINER_MARK_CHARS",
    "DIGEST_CHARS",
    "HeldCommand",
    "command_digest",
    "container_mark",
]

DIGEST_CHARS: Final = 16  # of unpadded base64url: 96 bits of SHA-256
CONTAINER_MARK_CHARS: Final = 12  # a container ID's first 12 hex digits, as `ctr` shows them


def command_digest(command: Sequence[str]) -> str:
    """A short digest of an exec probe's argv: the same command, the same text."""
    data = orjson.dumps(list(command))
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()[:DIGEST_CHARS]


def container_mark(container_id: str) -> str:
    """What tells one instance of a container from the next: the first 12 characters of
    its ID without the runtime's prefix (`containerd://`); "" when it has none yet. An
    ID of anything but hex digits (no runtime writes one) is digested instead, so a
    mark is always 1 to 16 characters of `[-_0-9A-Za-z]`."""
    bare = container_id.partition("://")[2] or container_id
    if not bare:
        return ""
    if all(c in "0123456789abcdef" for c in bare):
        return bare[:CONTAINER_MARK_CHARS]
    return command_digest([container_id])


@dataclass(frozen=True, slots=True)
class HeldCommand:
    """A command that may still run: `command` (`command_digest`), in the container
    instance `container` (`container_mark`), held since `started` (wall time, whole
    seconds since the epoch)."""

    command: str
    container: str
    started: int
