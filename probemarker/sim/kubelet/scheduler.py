"""A minimal scheduler for the sim: binds unscheduled pods to the sim's nodes.

Off by default in `SimCluster` (tests usually want unbound pods to stay
Pending) and on in `probemarker sim serve`, so that `kubectl run` works by
hand.  A pod created without `spec.nodeName` gets the node with the fewest
pods bound by this scheduler among the schedulable nodes whose labels match
the pod's `nodeSelector` (ties: node order), and a `Scheduled` event from
default-scheduler ("Successfully assigned <ns>/<pod> to <node>").  The
kubelet then starts the pod.  A pod no node fits stays Pending, as with the
default scheduler: condition PodScheduled False (reason Unschedulable), a
Warning `FailedScheduling` event worded as kube-scheduler words it
("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.
..."), and a line in the sim's log.

Difference from Kubernetes: the binding happens as the pod is created (the
store keeps pod specs immutable and has no pods/binding), so watchers see the
pod ADDED already bound instead of ADDED then MODIFIED.  `SimCluster` hands the
scheduler to the server's create path, which knows it only as a
`server.handlers.resources.PodBinder`.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any

from probemarker.sim.errors import ApiError
from probemarker.sim.server.discovery.catalog import EVENTS, NODES
from probemarker.sim.store.objects import Store

log = logging.getLogger(__name__)

# kube-scheduler's reasons (NodeAffinity and NodeUnschedulable filter plugins).
_NOT_MATCHING = "node(s) didn't match Pod's node affinity/selector"
_UNSCHEDULABLE = "node(s) were unschedulable"


class Scheduler:
    """See the module docstring."""

    def __init__(self, *, store: Store, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._clock = clock
        self._bound: Counter[str] = Counter()

    def bind(self, pod: dict[str, Any]) -> str | None:
        """Set `spec.nodeName` of a pod about to be created; returns the node (None: left
        unbound, because it already names a node, or no node fits and the pod gets the
        Unschedulable condition)."""
        spec = pod.setdefault("spec", {})
        if spec.get("nodeName"):
            return None
        selector = spec.get("nodeSelector") or {}
        fitting, reasons = self._filter(selector)
        if fitting:
            node = min(fitting, key=lambda name: (self._bound[name], fitting.index(name)))
            spec["nodeName"] = node
            self._bound[node] += 1
            return node
        pod.setdefault("status", {})["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": unschedulable_message(reasons),
                "lastProbeTime": None,
                "lastTransitionTime": self._clock().strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        ]
        return None

    def _filter(self, selector: dict[str, str]) -> tuple[list[str], Counter[str]]:
        """The nodes that fit, and for the others why not (reason -> number of nodes)."""
        fitting: list[str] = []
        reasons: Counter[str] = Counter()
        for node in self._store.list(NODES).items:
            labels = node["metadata"].get("labels") or {}
            if (node.get("spec") or {}).get("unschedulable"):
                reasons[_UNSCHEDULABLE] += 1
            elif not all(labels.get(k) == v for k, v in selector.items()):
                reasons[_NOT_MATCHING] += 1
            else:
                fitting.append(str(node["metadata"]["name"]))
        return fitting, reasons

    def record(self, pod: dict[str, Any], node: str | None) -> None:
        """Write the scheduler's event for a created pod: Scheduled on `node`, or
        FailedScheduling (and a log line) when `bind` found no node for it."""
        meta = pod["metadata"]
        if node is not None:
            message = f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}"
            self._event(pod, reason="Scheduled", message=message, warning=False)
            return
        for condition in (pod.get("status") or {}).get("conditions") or ():
            if (
                condition.get("type") == "PodScheduled"
                and condition.get("reason") == "Unschedulable"
            ):
                self._event(
                    pod, reason="FailedScheduling", message=condition["message"], warning=True
                )
                log.warning(
                    "pod %s/%s stays Pending, no node fits: %s",
                    meta["namespace"],
                    meta["name"],
                    condition["message"],
                )

    def _event(self, pod: dict[str, Any], *, reason: str, message: str, warning: bool) -> None:
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
            "reason": reason,
            "message": message,
            "type": "Warning" if warning else "Normal",
            "eventTime": now,
            "action": "Scheduling" if warning else "Binding",
            "reportingComponent": "default-scheduler",
            "reportingInstance": "default-scheduler-sim",
            "source": {},
        }
        with contextlib.suppress(ApiError):
            self._store.create(EVENTS, event, namespace=meta["namespace"])


def unschedulable_message(reasons: Counter[str]) -> str:
    """kube-scheduler's FitError text for pods that no node fits (with the preemption
    part, which is never helpful for a filter failure)."""
    total = sum(reasons.values())
    if total == 0:
        return "no nodes available to schedule pods"
    # Sorted as strings, counts included, as FitError.Error sorts its histogram.
    listed = ", ".join(sorted(f"{count} {reason}" for reason, count in reasons.items()))
    return (
        f"0/{total} nodes are available: {listed}. preemption: 0/{total} nodes are "
        f"available: {total} Preemption is not helpful for scheduling."
    )
