"""manifests/components/podmonitor: what an overlay with it renders, and what Prometheus
makes of it.

The component adds one PodMonitor and changes nothing else; its fields are ones
monitoring.coreos.com/v1 defines (prometheus-operator's podmonitor_types.go; the repo
vendors no CRD schema for field checks, so the field names are listed here); it selects
exactly the DaemonSet's pods in the DaemonSet's namespace, on a port the container
declares, at the path the daemon serves. What the operator's scrape job makes of a
daemon's port (tests/prometheus_sd.py) has `node`, `namespace`, `pod` and `job`; other
pods and ports are not scraped. The `prometheus.io/*` overlay of docs/operations.md
renders and gives the community chart's `kubernetes-pods` job the same URL. It composes
with the other components and moves with an overlay's `namespace:`.
"""

from __future__ import annotations

import copy
import os
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from probemarker.api import rules
from probemarker.daemon.settings import parse_run_settings
from tests.manifests.test_manifests import (
    KRUISE_COMPONENT,
    KUBECTL,
    MAIN,
    MANIFESTS,
    NAMESPACE,
    dig,
    kustomize,
    render,
)
from tests.prometheus_sd import PodPort, scraped, target
from tests.rbac_check import REPO

pytestmark = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl is not on PATH (kubectl kustomize)"
)

COMPONENTS = MANIFESTS / "components"
COMPONENT = COMPONENTS / "podmonitor"
OPERATIONS_DOC = REPO / "docs" / "operations.md"
MONITOR = ("PodMonitor", "probemarker")
DAEMONSET = ("DaemonSet", "probemarker")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    return render(tmp_path_factory.mktemp("base"))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    return render(tmp_path_factory.mktemp("podmonitor"), COMPONENT)


def daemon_port(objects: dict[tuple[str, str], Any], *, node: str = "node-7") -> PodPort:
    """The metrics port of one of the rendered DaemonSet's pods, as discovery sees it."""
    ds = objects[DAEMONSET]
    container = dig(ds, MAIN)
    (port,) = container["ports"]
    return PodPort(
        namespace=ds["metadata"]["namespace"],
        pod="probemarker-x7k2q",
        node=node,
        labels=ds["spec"]["template"]["metadata"]["labels"],
        annotations=ds["spec"]["template"]["metadata"].get("annotations", {}),
        container=container["name"],
        port_name=port["name"],
        port=port["containerPort"],
    )


# -- the files ---------------------------------------------------------------------------


def test_it_is_a_kustomize_component_that_says_how_to_include_it() -> None:
    text = (COMPONENT / "kustomization.yaml").read_text()
    body = yaml.safe_load(text)
    assert (body["apiVersion"], body["kind"]) == ("kustomize.config.k8s.io/v1alpha1", "Component")
    assert body["resources"] == ["podmonitor.yaml"]
    lines = [line.removeprefix("#") for line in text.splitlines() if line.startswith("#")]
    start = next(i for i, line in enumerate(lines) if "apiVersion:" in line)
    shown = yaml.safe_load(textwrap.dedent("\n".join(lines[start : lines.index("", start)])))
    assert shown["components"] == [f"../manifests/components/{COMPONENT.name}"]
    assert "docs/operations.md" in text


def test_it_adds_the_podmonitor_and_changes_nothing_else(
    base: dict[tuple[str, str], Any], rendered: dict[tuple[str, str], Any]
) -> None:
    assert sorted(rendered) == sorted([*base, MONITOR])
    for key, doc in base.items():
        assert rendered[key] == doc, key


# -- its shape (monitoring.coreos.com/v1, podmonitor_types.go and types.go) ----------------

FIELDS = {
    "spec": {
        "jobLabel",
        "podTargetLabels",
        "podMetricsEndpoints",
        "selector",
        "namespaceSelector",
        "sampleLimit",
        "targetLimit",
        "scrapeProtocols",
        "labelLimit",
        "labelNameLengthLimit",
        "labelValueLengthLimit",
        "keepDroppedTargets",
        "attachMetadata",
        "scrapeClass",
    },
    "endpoint": {
        "port",
        "targetPort",
        "path",
        "scheme",
        "params",
        "interval",
        "scrapeTimeout",
        "tlsConfig",
        "bearerTokenSecret",
        "honorLabels",
        "honorTimestamps",
        "trackTimestampsStaleness",
        "basicAuth",
        "oauth2",
        "authorization",
        "metricRelabelings",
        "relabelings",
        "proxyUrl",
        "followRedirects",
        "enableHttp2",
        "filterRunning",
    },
    "relabeling": {
        "sourceLabels",
        "separator",
        "targetLabel",
        "regex",
        "modulus",
        "replacement",
        "action",
    },
    "selector": {"matchLabels", "matchExpressions"},
}
ACTIONS = {
    "replace",
    "keep",
    "drop",
    "hashmod",
    "labelmap",
    "labeldrop",
    "labelkeep",
    "lowercase",
    "uppercase",
    "keepequal",
    "dropequal",
}
PROMETHEUS_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def test_the_podmonitor_has_the_v1_shape(rendered: dict[tuple[str, str], Any]) -> None:
    monitor = rendered[MONITOR]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    spec = monitor["spec"]
    assert set(spec) <= FIELDS["spec"]
    assert set(spec["selector"]) <= FIELDS["selector"]
    assert re.fullmatch(rules.QUALIFIED_NAME_RE, spec["jobLabel"])
    (endpoint,) = spec["podMetricsEndpoints"]
    assert set(endpoint) <= FIELDS["endpoint"]
    assert isinstance(endpoint["port"], str)  # a name: `port` takes no number
    for relabeling in endpoint["relabelings"]:
        assert set(relabeling) <= FIELDS["relabeling"]
        assert relabeling.get("action", "replace").lower() in ACTIONS
        for name in [*relabeling.get("sourceLabels", []), relabeling.get("targetLabel", "x")]:
            assert PROMETHEUS_LABEL.fullmatch(name), name


def test_it_selects_exactly_the_daemons_pods(rendered: dict[tuple[str, str], Any]) -> None:
    monitor, ds = rendered[MONITOR], rendered[DAEMONSET]
    assert monitor["metadata"]["namespace"] == ds["metadata"]["namespace"] == NAMESPACE
    # No namespaceSelector: the PodMonitor's own namespace (a list would not follow an
    # overlay's `namespace:`).
    assert "namespaceSelector" not in monitor["spec"]
    assert monitor["spec"]["selector"] == ds["spec"]["selector"]
    template = ds["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"] == template


def test_its_port_is_the_containers_metrics_port_and_path(
    rendered: dict[tuple[str, str], Any],
) -> None:
    (endpoint,) = rendered[MONITOR]["spec"]["podMetricsEndpoints"]
    declared = {p["name"]: p["containerPort"] for p in dig(rendered[DAEMONSET], MAIN)["ports"]}
    assert endpoint["port"] in declared
    default = parse_run_settings(["--node", "n"], {}).metrics_address
    assert f":{declared[endpoint['port']]}" == default
    assert endpoint["path"] == "/metrics"  # probemarker/observe/serve.py


# -- what Prometheus makes of it -------------------------------------------------------------


def test_a_daemons_target_has_node_namespace_pod_and_job(
    rendered: dict[tuple[str, str], Any],
) -> None:
    port = daemon_port(rendered)
    (found,) = scraped(rendered[MONITOR], port)
    assert found == {
        "__address__": "10.0.0.7:9808",
        "__metrics_path__": "/metrics",
        "instance": "10.0.0.7:9808",
        "job": "probemarker",
        "namespace": NAMESPACE,
        "pod": "probemarker-x7k2q",
        "container": "probemarker",
        "endpoint": "metrics",
        "node": "node-7",
    }


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"namespace": "games"}, id="another-namespace"),
        pytest.param({"labels": {"app.kubernetes.io/name": "probemarker"}}, id="not-the-daemon"),
        pytest.param({"labels": {"app": "game"}}, id="a-workload"),
        pytest.param({"port_name": "http"}, id="another-port"),
    ],
)
def test_nothing_else_is_scraped(rendered: dict[tuple[str, str], Any], change: Any) -> None:
    port = daemon_port(rendered)
    other = PodPort(**{**port.__dict__, **change})
    assert scraped(rendered[MONITOR], other) == []


def test_an_overlay_namespace_moves_the_monitor_with_the_daemon(tmp_path: Path) -> None:
    objects = render(tmp_path, COMPONENT, namespace="ops")
    assert objects[MONITOR]["metadata"]["namespace"] == "ops"
    (found,) = scraped(objects[MONITOR], daemon_port(objects))
    assert (found["namespace"], found["job"], found["node"]) == ("ops", "probemarker", "node-7")


@pytest.mark.parametrize(
    "others",
    [
        pytest.param((COMPONENTS / "node-scope",), id="node-scope"),
        pytest.param((COMPONENTS / "cri", COMPONENTS / "cri-no-exec-rbac"), id="cri"),
        pytest.param((KRUISE_COMPONENT,), id="kruise-group"),
        pytest.param((COMPONENTS / "metrics-network-policy",), id="metrics-network-policy"),
    ],
)
def test_it_composes_with_the_other_components(
    tmp_path: Path, rendered: dict[tuple[str, str], Any], others: tuple[Path, ...]
) -> None:
    objects = render(tmp_path, *others, COMPONENT)
    assert objects[MONITOR] == rendered[MONITOR]
    assert len(scraped(objects[MONITOR], daemon_port(objects))) == 1


# -- docs/operations.md: the prometheus.io/* annotations instead -----------------------------

# The rules of the prometheus-community `prometheus` chart's `kubernetes-pods` job that
# decide whether a pod is scraped, where, and with which namespace and pod labels
# (charts/prometheus/values.yaml; its IPv6 address rule and the scrape-slow and
# scheme rules left out).
ANNOTATION_JOB = [
    {
        "sourceLabels": ["__meta_kubernetes_pod_annotation_prometheus_io_scrape"],
        "action": "keep",
        "regex": "true",
    },
    {
        "sourceLabels": ["__meta_kubernetes_pod_annotation_prometheus_io_path"],
        "targetLabel": "__metrics_path__",
        "regex": "(.+)",
    },
    {
        "sourceLabels": [
            "__meta_kubernetes_pod_annotation_prometheus_io_port",
            "__meta_kubernetes_pod_ip",
        ],
        "regex": r"(\d+);((([0-9]+?)(\.|$)){4})",
        "replacement": "$2:$1",
        "targetLabel": "__address__",
    },
    {"sourceLabels": ["__meta_kubernetes_namespace"], "targetLabel": "namespace"},
    {"sourceLabels": ["__meta_kubernetes_pod_name"], "targetLabel": "pod"},
]


def doc_objects() -> list[dict[str, Any]]:
    """Every YAML object in docs/operations.md's code blocks."""
    blocks = re.findall(r"```yaml\n(.*?)```", OPERATIONS_DOC.read_text(), flags=re.DOTALL)
    return [d for block in blocks for d in yaml.safe_load_all(block) if isinstance(d, dict)]


def doc_annotation_overlay() -> dict[str, Any]:
    """The Kustomization of docs/operations.md that adds the annotations."""
    found = [d for d in doc_objects() if d.get("kind") == "Kustomization" and d.get("patches")]
    assert len(found) == 1, found
    return dict(found[0])


def test_the_doc_names_the_component_in_an_overlay() -> None:
    text = OPERATIONS_DOC.read_text()
    assert f"components: [../manifests/components/{COMPONENT.name}]" in text


def test_the_doc_annotation_overlay_gives_the_same_url(
    tmp_path: Path, rendered: dict[tuple[str, str], Any]
) -> None:
    here = tmp_path / "doc-overlay"
    here.mkdir()
    body = copy.deepcopy(doc_annotation_overlay())
    body["resources"] = [os.path.relpath(MANIFESTS, here)]
    (here / "kustomization.yaml").write_text(yaml.safe_dump(body))
    objects = {(d["kind"], d["metadata"]["name"]): d for d in kustomize(here)}
    annotations = objects[DAEMONSET]["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    port = daemon_port(objects)
    by_annotation = target(port.meta(), ANNOTATION_JOB, "/metrics")
    (by_monitor,) = scraped(rendered[MONITOR], daemon_port(rendered))
    assert by_annotation is not None
    for key in ("__address__", "__metrics_path__", "namespace", "pod"):
        assert by_annotation[key] == by_monitor[key], key
    # ... and without the annotations (the base), that job leaves the daemon alone.
    assert target(daemon_port(rendered).meta(), ANNOTATION_JOB, "/metrics") is None


def test_the_doc_role_lets_prometheus_discover_the_daemons_pods() -> None:
    """kubernetes_sd `role: pod` lists and watches pods in the namespaces it looks at."""
    docs = doc_objects()
    (role,) = [d for d in docs if d.get("kind") == "Role"]
    (binding,) = [d for d in docs if d.get("kind") == "RoleBinding"]
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == NAMESPACE
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    (rule,) = role["rules"]
    assert (rule["apiGroups"], rule["resources"]) == ([""], ["pods"])
    assert {"list", "watch"} <= set(rule["verbs"])
