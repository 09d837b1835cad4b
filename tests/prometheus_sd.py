"""What a PodMonitor makes of a pod's port: a model of the Prometheus Operator's scrape
job for it and of Prometheus' relabelling, for the tests of manifests/components/podmonitor.

The operator (pkg/prometheus/promcfg.go, generatePodMonitorConfig) writes one
kubernetes_sd `role: pod` job over the PodMonitor's namespace, whose relabel_configs
are, in order: `keep` for each selector label (`__meta_kubernetes_pod_label_<name>`),
`keep` for the endpoint's port name (`__meta_kubernetes_pod_container_port_name`),
`namespace`, `container` and `pod` from their `__meta_` labels, `job` (the PodMonitor's
"<namespace>/<name>", or the pod's `jobLabel` label when it has one), `endpoint` (the
port's name), then the endpoint's own `relabelings`. Prometheus applies them to the
target's labels and drops the `__`-prefixed ones after relabelling. Relabelling
(prometheus/model/relabel): the source labels' values joined with `separator` (";"),
matched by `regex` ("(.*)", anchored at both ends); `replace` writes `replacement`
("$1", groups expanded) to `target_label` when it matches; `keep` drops the target
when it does not match, `drop` when it does; `labelmap` copies each label whose name
matches to the name `replacement` makes of it. Only what the tests use is modelled:
matchLabels (not matchExpressions), a port by name, replace, keep, drop and labelmap.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PodPort:
    """One container port of a pod, as Kubernetes service discovery sees it."""

    namespace: str
    pod: str
    node: str
    labels: Mapping[str, str]
    container: str
    port_name: str
    ip: str = "10.0.0.7"
    port: int = 9808
    annotations: Mapping[str, str] = field(default_factory=dict)

    def meta(self) -> dict[str, str]:
        """The labels discovery gives the target (a subset of kubernetes_sd's)."""
        out = {
            "__address__": f"{self.ip}:{self.port}",
            "__meta_kubernetes_namespace": self.namespace,
            "__meta_kubernetes_pod_name": self.pod,
            "__meta_kubernetes_pod_ip": self.ip,
            "__meta_kubernetes_pod_node_name": self.node,
            "__meta_kubernetes_pod_container_name": self.container,
            "__meta_kubernetes_pod_container_port_name": self.port_name,
            "__meta_kubernetes_pod_container_port_number": str(self.port),
        }
        for key, value in self.labels.items():
            out[f"__meta_kubernetes_pod_label_{sanitize(key)}"] = value
        for key, value in self.annotations.items():
            out[f"__meta_kubernetes_pod_annotation_{sanitize(key)}"] = value
        return out


def sanitize(name: str) -> str:
    """A Kubernetes label name as a Prometheus label name (invalid characters to `_`)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def relabel(labels: dict[str, str], rules: Sequence[Mapping[str, Any]]) -> dict[str, str] | None:
    """Prometheus' relabelling of one target, in the operator's spelling
    (`sourceLabels`, `targetLabel`); None when the target is dropped."""
    out = dict(labels)
    for rule in rules:
        source = rule.get("separator", ";").join(
            out.get(n, "") for n in rule.get("sourceLabels", [])
        )
        match = re.fullmatch(rule.get("regex", "(.*)"), source)
        action = rule.get("action", "replace").lower()
        if action == "labelmap":
            regex = rule["regex"]
            for name, value in list(out.items()):
                if (found := re.fullmatch(regex, name)) is not None:
                    out[found.expand(_python(rule.get("replacement", "$1")))] = value
            continue
        # keep drops a target that does not match, drop one that does
        if action in ("keep", "drop") and (action == "keep") == (match is None):
            return None
        if action == "replace" and match is not None:
            value = match.expand(_python(rule.get("replacement", "$1")))
            if value:
                out[rule["targetLabel"]] = value
            else:
                out.pop(rule["targetLabel"], None)
    return out


def _python(replacement: str) -> str:
    """Go's `$1` / `${1}` as Python's `\\g<1>`."""
    return re.sub(r"\$\{?(\d+)\}?", r"\\g<\1>", replacement)


def operator_rules(monitor: Mapping[str, Any], endpoint: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The relabel rules the operator writes for one of the monitor's endpoints."""
    spec, meta = monitor["spec"], monitor["metadata"]
    rules: list[dict[str, Any]] = [
        {
            "action": "keep",
            "sourceLabels": [f"__meta_kubernetes_pod_label_{sanitize(k)}"],
            "regex": v,
        }
        for k, v in sorted(spec["selector"]["matchLabels"].items())
    ]
    rules.append(
        {
            "action": "keep",
            "sourceLabels": ["__meta_kubernetes_pod_container_port_name"],
            "regex": endpoint["port"],
        }
    )
    for meta_label, target in (
        ("namespace", "namespace"),
        ("pod_container_name", "container"),
        ("pod_name", "pod"),
    ):
        rules.append({"sourceLabels": [f"__meta_kubernetes_{meta_label}"], "targetLabel": target})
    rules.append({"targetLabel": "job", "replacement": f"{meta['namespace']}/{meta['name']}"})
    if spec.get("jobLabel"):
        rules.append(
            {
                "sourceLabels": [f"__meta_kubernetes_pod_label_{sanitize(spec['jobLabel'])}"],
                "targetLabel": "job",
                "regex": "(.+)",
                "replacement": "${1}",
            }
        )
    rules.append({"targetLabel": "endpoint", "replacement": endpoint["port"]})
    return rules + list(endpoint.get("relabelings", []))


def target(
    meta: Mapping[str, str], rules: Sequence[Mapping[str, Any]], path: str
) -> dict[str, str] | None:
    """The target a job with these rules and this `metrics_path` makes of a port: its
    labels after relabelling, `instance` defaulting to the address, and the URL
    (`__address__`, `__metrics_path__`) kept; None when it is dropped."""
    labels = relabel({"__metrics_path__": path, **meta}, rules)
    if labels is None:
        return None
    labels.setdefault("instance", labels["__address__"])
    keep = ("__address__", "__metrics_path__")
    return {k: v for k, v in labels.items() if not k.startswith("__") or k in keep}


def scraped(monitor: Mapping[str, Any], port: PodPort) -> list[dict[str, str]]:
    """The targets the monitor makes of `port`: one per endpoint that keeps it."""
    selector = monitor["spec"].get("namespaceSelector", {})
    namespaces = selector.get("matchNames") or [monitor["metadata"]["namespace"]]
    if not selector.get("any") and port.namespace not in namespaces:
        return []
    found = []
    for endpoint in monitor["spec"]["podMetricsEndpoints"]:
        rules = operator_rules(monitor, endpoint)
        made = target(port.meta(), rules, endpoint.get("path", "/metrics"))
        if made is not None:
            found.append(made)
    return found
