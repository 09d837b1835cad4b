"""What identifies a served resource: :class:`ResourceType` (a frozen value), and how
the store addresses and serves its objects.

Shared by the store, the discovery documents and the CRD controller. ``qualified`` is
the ``<plural>[.<group>]`` form Kubernetes error messages use. The store keeps objects
in buckets keyed by (group, plural) (:func:`bucket_of`: every version of a resource
shares one); within a bucket by their etcd-like key ``<namespace>/<name>`` or
``<name>`` (:func:`object_key`), which is also the LIST order. :func:`present` gives an
object as served at a resource's version. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["NAMESPACES", "ResourceType", "bucket_of", "key_of", "object_key", "present"]


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


def bucket_of(rt: ResourceType) -> tuple[str, str]:
    """The store bucket of ``rt``'s objects: (group, plural)."""
    return (rt.group, rt.plural)


def object_key(namespace: str | None, name: str) -> str:
    """An object's key within its bucket: ``<namespace>/<name>`` or ``<name>``."""
    return f"{namespace}/{name}" if namespace else name


def key_of(rt: ResourceType, obj: Mapping[str, Any]) -> str:
    """The key of a stored object of ``rt``."""
    meta = obj["metadata"]
    return object_key(meta.get("namespace") if rt.namespaced else None, meta["name"])


def present(rt: ResourceType, obj: dict[str, Any], *, share: bool = False) -> dict[str, Any]:
    """The object as served at ``rt``'s version (a CR may be served at several); with
    ``share``, ``obj`` is a shared store object and a changed view is a new dict."""
    if obj.get("apiVersion") == rt.api_version or rt.plural == "events":
        return obj
    out = dict(obj) if share else obj
    out["apiVersion"] = rt.api_version
    return out
