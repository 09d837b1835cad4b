"""What identifies a served resource: :class:`ResourceType` (a frozen value).

Shared by the store, the discovery documents and the CRD controller. ``qualified`` is
the ``<plural>[.<group>]`` form Kubernetes error messages use.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NAMESPACES", "ResourceType"]


@dataclass(frozen=True, slots=True)
class ResourceType:
    """One served resource (a group/version/plural)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    subresources: frozenset[str] = frozenset()
    short_names: tuple[str, ...] = ()
    singular: str = ""
    is_custom: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """``pods`` or ``podprobemarkers.probemarker.io`` as errors name it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def is_pod(self) -> bool:
        return self.group == "" and self.plural == "pods"


NAMESPACES = ResourceType(
    group="", version="v1", plural="namespaces", kind="Namespace", namespaced=False,
    subresources=frozenset({"status"}), short_names=("ns",), singular="namespace",
)  # fmt: skip
