"""Reading a pod object (JSON, as a server returns it) in tests: its labels, its
annotations, one of its conditions. Shared by the sim's integration tests
(tests/integration/world.py) and the real-cluster suite (tests/cluster/)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def labels_of(pod: Mapping[str, Any]) -> dict[str, str]:
    return dict(pod["metadata"].get("labels") or {})


def annotations_of(pod: Mapping[str, Any]) -> dict[str, str]:
    return dict(pod["metadata"].get("annotations") or {})


def condition(pod: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    """The condition of type `kind`, or None."""
    for item in pod.get("status", {}).get("conditions") or []:
        if item.get("type") == kind:
            return dict(item)
    return None
