"""The simulated kubelet's event recorder (client-go tools/record, core/v1 Events).

`EventRecorder.record` writes a core/v1 Event about a pod's container as the
kubelet's recorder does: name `<pod>.<hex>`, source/reportingComponent
`kubelet`, reportingInstance the node, `fieldPath` `spec.containers{name}` or
`spec.initContainers{name}`.  A repeat of an identical event (same source,
involved object, type, reason and message: the EventCorrelator's EventLogger
key) updates the first one instead, `count` + 1 and a new `lastTimestamp`,
as the recorder's PATCH does; so a restarted container's Pulled/Created/Started
events show `x2 over ...` in `kubectl describe pod`.

Invariant: writes go straight to the store (like the rest of the kubelet) and
never raise; an event that cannot be written is dropped, as the recorder does.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable
from typing import Any

from probemarker.sim.errors import ApiError
from probemarker.sim.server.discovery.catalog import EVENTS
from probemarker.sim.store.objects import Store

__all__ = ["EventRecorder", "field_path"]

_MAX_KEYS = 4096  # the EventLogger's LRU cache size


def field_path(pod: dict[str, Any], container: str) -> str:
    """The fieldPath the kubelet puts in an event about `container` of `pod`."""
    for c in pod.get("spec", {}).get("initContainers") or []:
        if c.get("name") == container:
            return f"spec.initContainers{{{container}}}"
    return f"spec.containers{{{container}}}"


class EventRecorder:
    """See the module docstring."""

    def __init__(self, *, store: Store, clock: Callable[[], str]) -> None:
        self._store, self._clock = store, clock
        self._seen: dict[tuple[str, ...], tuple[str, str]] = {}  # key -> (namespace, name)

    def record(
        self,
        pod: dict[str, Any],
        container: str,
        reason: str,
        message: str,
        *,
        event_type: str = "Normal",
    ) -> None:
        meta = pod["metadata"]
        namespace, node = str(meta["namespace"]), str(pod.get("spec", {}).get("nodeName", ""))
        path = field_path(pod, container)
        key: tuple[str, ...] = (node, namespace, str(meta["name"]), str(meta.get("uid", "")))
        key += (path, event_type, reason, message)
        now = self._clock()
        with contextlib.suppress(ApiError):
            if key in self._seen and self._bump(self._seen[key], now):
                return
            event = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {
                    "name": f"{meta['name']}.{secrets.token_hex(8)}",
                    "namespace": namespace,
                },
                "involvedObject": {
                    "kind": "Pod",
                    "namespace": namespace,
                    "name": meta["name"],
                    "uid": meta.get("uid", ""),
                    "apiVersion": "v1",
                    "resourceVersion": meta.get("resourceVersion", ""),
                    "fieldPath": path,
                },
                "reason": reason,
                "message": message,
                "source": {"component": "kubelet", "host": node},
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
                "type": event_type,
                "eventTime": None,
                "reportingComponent": "kubelet",
                "reportingInstance": node,
            }
            created = self._store.create(EVENTS, event, namespace=namespace)
            if len(self._seen) >= _MAX_KEYS:
                self._seen.pop(next(iter(self._seen)))
            self._seen[key] = (namespace, str(created["metadata"]["name"]))

    def _bump(self, where: tuple[str, str], now: str) -> bool:
        """count + 1 and lastTimestamp on the stored event; False if it is gone."""
        try:
            event = self._store.get(EVENTS, where[0], where[1])
        except ApiError:
            return False
        event["count"] = int(event.get("count") or 1) + 1
        event["lastTimestamp"] = now
        self._store.update(EVENTS, event, namespace=where[0], name=where[1])
        return True
