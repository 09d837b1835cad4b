"""A minimal scheduler for the sim: binds unscheduled pods to the sim's nodes.

Off by default in `SimCluster` (tests usually want unbound pods to stay
Pending) and on in `probemarker sim serve`, so that `kubectl run` works by
hand.  A pod created without `spec.nodeName` gets the node with the fewest
pods bound by this scheduler among the schedulable nodes whose labels match
the pod's `nodeSelector` (ties: node order), and a `Scheduled` event from
default-scheduler ("Successfully assigned <ns>/<pod> to <node>").  The
kubelet then starts the pod.  A pod no node matches stays Pending.

Difference from Kubernetes: the binding happens as the pod is created (the
store keeps pod specs immutable and has no pods/binding), so watchers see the
pod ADDED already bound instead of ADDED then MODIFIED.
"""

from __future__ import annotations

import contextlib
import secrets
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any

from probemarker.sim.errors import ApiError
from probemarker.sim.server.discovery import EVENTS, NODES
from probemarker.sim.store.objects import Store


class Scheduler:
    """See the module docstring."""

    def __init__(self, *, store: Store, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._clock = clock
        self._bound: Counter[str] = Counter()

    def bind(self, pod: dict[str, Any]) -> str | None:
        """Set `spec.nodeName` of a pod about to be created; returns the node (None: left
        unbound because it already names a node or no node fits)."""
        spec = pod.setdefault("spec", {})
        if spec.get("nodeName"):
            return None
        node = self._pick(spec.get("nodeSelector") or {})
        if node is not None:
            spec["nodeName"] = node
            self._bound[node] += 1
        return node

    def _pick(self, selector: dict[str, str]) -> str | None:
        nodes = self._store.list(NODES).items
        fitting: list[str] = [
            str(n["metadata"]["name"])
            for n in nodes
            if not (n.get("spec") or {}).get("unschedulable")
            and all((n["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())
        ]
        if not fitting:
            return None
        return min(fitting, key=lambda name: (self._bound[name], fitting.index(name)))

    def record(self, pod: dict[str, Any], node: str) -> None:
        """Write the Scheduled event for a created pod."""
        meta = pod["metadata"]
        # Whole seconds, like the kubelet's (core/v1) event timestamps, so that events of
        # the same second show the same age.
        now = self._clock().strftime("%Y-%m-%dT%H:%M:%S.000000Z")
        event = {
            "metadata": {
                "name": f"{meta['name']}.{secrets.token_hex(8)}",
                "namespace": meta["namespace"],
            },
            "involvedObject": {
                "kind": "Pod",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta.get("uid", ""),
                "apiVersion": "v1",
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "reason": "Scheduled",
            "message": f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}",
            "type": "Normal",
            "eventTime": now,
            "action": "Binding",
            "reportingComponent": "default-scheduler",
            "reportingInstance": "default-scheduler-sim",
            "source": {},
        }
        with contextlib.suppress(ApiError):
            self._store.create(EVENTS, event, namespace=meta["namespace"])
