"""Resource types: the URL of a collection, an object or a subresource, and its RBAC terms.

Used by every conversation of the client layer (informer, exec, status writes, events),
so one place spells the API's paths: `/api/v1/...` for the core group,
`/apis/<group>/<version>/...` for the others; namespaces, names and subresources are
percent-encoded. Pure values, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from probemarker.kube.connect.errors import RequestInfo

__all__ = ["EVENTS", "PODS", "Resource"]


def _segment(text: str) -> str:
    return quote(text, safe="")


@dataclass(frozen=True, slots=True)
class Resource:
    """A resource type's URL pieces: group ("" for core), version, plural."""

    group: str
    version: str
    plural: str
    namespaced: bool = True

    def path(
        self, namespace: str | None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The collection (in `namespace`, or across all), or one object's (sub)resource."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace is not None and self.namespaced:
            base = f"{base}/namespaces/{_segment(namespace)}"
        path = f"{base}/{self.plural}"
        if name is not None:
            path = f"{path}/{_segment(name)}"
            if subresource:
                path = f"{path}/{subresource}"
        return path

    def info(
        self,
        verb: str,
        namespace: str | None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> RequestInfo:
        """The request in RBAC's terms, for errors that name what was refused."""
        return RequestInfo(
            verb=verb,
            resource=self.plural,
            namespace=namespace,
            name=name,
            subresource=subresource,
            group=self.group,
        )


PODS = Resource("", "v1", "pods")
EVENTS = Resource("events.k8s.io", "v1", "events")
