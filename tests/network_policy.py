"""NetworkPolicy ingress as Kubernetes defines it (networking.k8s.io/v1), for the tests of
manifests/components/metrics-network-policy: does a set of policies let a connection
from a pod reach a pod's port?

What it models, from the API reference and kubernetes.io's "Network Policies": a pod is
isolated for ingress once a policy in its namespace selects it (`podSelector`) with
`Ingress` in `policyTypes` (or no `policyTypes`: Ingress is implied); an isolated pod
admits a connection that some rule of some such policy admits. A rule admits when one
of its `from` peers matches the source (no `from`: every source) and one of its `ports`
matches (no `ports`: every port). A peer with `podSelector` alone means pods of the
policy's namespace; `namespaceSelector` alone, every pod of the matching namespaces;
both in one peer, matching pods in matching namespaces; `ipBlock`, addresses in the
CIDR but not in `except`. A named port is the target container's port of that name.
An empty selector matches everything.

What it leaves out, because it is the network plugin's: traffic from the pod's own
node (Kubernetes says it is always allowed; plugins differ, docs/security.md), and
whether the plugin enforces policies at all. Sources here are pods.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from probemarker.api.model import LabelSelector, SelectorRequirement
from probemarker.match.match import selector_matches

__all__ = ["Pod", "admits", "selector"]


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: Mapping[str, str]
    ip: str = "10.0.0.9"
    namespace_labels: Mapping[str, str] = field(default_factory=dict)
    ports: Mapping[str, int] = field(default_factory=dict)  # named container ports

    def namespace_view(self) -> Mapping[str, str]:
        """The namespace's labels, with the one Kubernetes sets on every namespace."""
        return {"kubernetes.io/metadata.name": self.namespace, **self.namespace_labels}


def selector(raw: Mapping[str, Any] | None) -> LabelSelector:
    raw = raw or {}
    return LabelSelector(
        match_labels=dict(raw.get("matchLabels") or {}),
        match_expressions=tuple(
            SelectorRequirement(
                key=e["key"],
                operator=cast(Literal["In", "NotIn", "Exists", "DoesNotExist"], e["operator"]),
                values=tuple(e.get("values") or ()),
            )
            for e in raw.get("matchExpressions") or ()
        ),
    )


def _selects(policy: Mapping[str, Any], target: Pod) -> bool:
    spec = policy["spec"]
    types = spec.get("policyTypes") or ["Ingress"]
    return (
        policy["metadata"].get("namespace") == target.namespace
        and "Ingress" in types
        and selector_matches(selector(spec.get("podSelector")), target.labels)
    )


def _peer_matches(peer: Mapping[str, Any], policy_namespace: str, source: Pod) -> bool:
    if "ipBlock" in peer:
        block = peer["ipBlock"]
        address = ipaddress.ip_address(source.ip)
        return address in ipaddress.ip_network(block["cidr"]) and not any(
            address in ipaddress.ip_network(cidr) for cidr in block.get("except") or ()
        )
    if "namespaceSelector" in peer:
        if not selector_matches(selector(peer["namespaceSelector"]), source.namespace_view()):
            return False
    elif source.namespace != policy_namespace:
        return False
    return selector_matches(selector(peer.get("podSelector")), source.labels)


def _port_matches(entry: Mapping[str, Any], target: Pod, port: int, protocol: str) -> bool:
    if entry.get("protocol", "TCP") != protocol:
        return False
    wanted = entry.get("port")
    if wanted is None:
        return True
    if isinstance(wanted, str):
        return target.ports.get(wanted) == port
    return int(wanted) <= port <= int(entry.get("endPort", wanted))


def admits(
    policies: Sequence[Mapping[str, Any]],
    *,
    source: Pod,
    target: Pod,
    port: int,
    protocol: str = "TCP",
) -> bool:
    """Whether `source` may connect to `target`'s `port` under `policies`."""
    selecting = [p for p in policies if _selects(p, target)]
    if not selecting:
        return True  # not isolated
    for policy in selecting:
        namespace = policy["metadata"]["namespace"]
        for rule in policy["spec"].get("ingress") or ():
            peers = rule.get("from") or ()
            ports = rule.get("ports") or ()
            if peers and not any(_peer_matches(p, namespace, source) for p in peers):
                continue
            if ports and not any(_port_matches(e, target, port, protocol) for e in ports):
                continue
            return True
    return False
