"""manifests/components/metrics-network-policy: what an overlay with it renders, and what
the policy admits.

The component adds one NetworkPolicy and changes nothing else; the policy has the shape
networking.k8s.io/v1 gives it, selects exactly the DaemonSet's pods in the DaemonSet's
namespace, isolates them for ingress only (never egress: the daemon must reach the API
server and the pods it probes), and admits TCP to the port named `metrics` (the
DaemonSet's 9808) from kube-prometheus' Prometheus as shipped, from nothing else. The
overlay of docs/security.md that names another scraper renders and admits that scraper
instead. It composes with the other components and with an overlay's `namespace:`.
tests/network_policy.py evaluates the policies as Kubernetes defines them; its own
cases are at the end.
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
from tests.network_policy import Pod, admits, selector
from tests.rbac_check import REPO

pytestmark = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl is not on PATH (kubectl kustomize)"
)

COMPONENTS = MANIFESTS / "components"
COMPONENT = COMPONENTS / "metrics-network-policy"
SECURITY_DOC = REPO / "docs" / "security.md"
POLICY = ("NetworkPolicy", "probemarker-metrics")
PORT = 9808


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    return render(tmp_path_factory.mktemp("base"))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    return render(tmp_path_factory.mktemp("policy"), COMPONENT)


def daemon_pod(objects: dict[tuple[str, str], Any]) -> Pod:
    """A pod of the rendered DaemonSet, as the policy sees it."""
    ds = objects[("DaemonSet", "probemarker")]
    ports = {p["name"]: p["containerPort"] for p in dig(ds, MAIN)["ports"]}
    return Pod(
        namespace=ds["metadata"]["namespace"],
        labels=ds["spec"]["template"]["metadata"]["labels"],
        ports=ports,
    )


# -- the files ---------------------------------------------------------------------------


def test_it_is_a_kustomize_component_that_says_how_to_include_it() -> None:
    text = (COMPONENT / "kustomization.yaml").read_text()
    body = yaml.safe_load(text)
    assert (body["apiVersion"], body["kind"]) == ("kustomize.config.k8s.io/v1alpha1", "Component")
    assert body["resources"] == ["networkpolicy.yaml"]
    assert f"../manifests/components/{COMPONENT.name}" in text
    assert "docs/security.md" in text


def test_it_adds_the_policy_and_changes_nothing_else(
    base: dict[tuple[str, str], Any], rendered: dict[tuple[str, str], Any]
) -> None:
    assert sorted(rendered) == sorted([*base, POLICY])
    for key, doc in base.items():
        assert rendered[key] == doc, key


# -- the policy's shape (networking.k8s.io/v1) -------------------------------------------

FIELDS = {
    "spec": {"podSelector", "policyTypes", "ingress", "egress"},
    "rule": {"from", "ports"},
    "peer": {"podSelector", "namespaceSelector", "ipBlock"},
    "port": {"protocol", "port", "endPort"},
    "selector": {"matchLabels", "matchExpressions"},
}


def check_selector(raw: dict[str, Any]) -> None:
    assert set(raw) <= FIELDS["selector"]
    assert raw, "an empty selector would admit every pod or namespace"
    for key, value in (raw.get("matchLabels") or {}).items():
        assert re.match(rules.QUALIFIED_NAME_RE, key), key
        assert re.match(rules.LABEL_VALUE_RE, value), value


def test_the_policy_has_the_v1_shape(rendered: dict[tuple[str, str], Any]) -> None:
    policy = rendered[POLICY]
    assert policy["apiVersion"] == "networking.k8s.io/v1"
    spec = policy["spec"]
    assert set(spec) <= FIELDS["spec"]
    check_selector(spec["podSelector"])
    assert spec["policyTypes"] == ["Ingress"]
    assert "egress" not in spec
    (rule,) = spec["ingress"]
    assert set(rule) <= FIELDS["rule"]
    assert rule["from"], "a rule without `from` admits every source"
    for peer in rule["from"]:
        assert set(peer) <= FIELDS["peer"]
        assert "ipBlock" not in peer
        assert {"podSelector", "namespaceSelector"} <= set(peer)  # both, in one entry
        check_selector(peer["podSelector"])
        check_selector(peer["namespaceSelector"])
    (port,) = rule["ports"]
    assert set(port) <= FIELDS["port"]
    assert port == {"protocol": "TCP", "port": "metrics"}


def test_it_selects_exactly_the_daemons_pods(rendered: dict[tuple[str, str], Any]) -> None:
    policy, ds = rendered[POLICY], rendered[("DaemonSet", "probemarker")]
    assert policy["metadata"]["namespace"] == ds["metadata"]["namespace"] == NAMESPACE
    assert policy["spec"]["podSelector"] == ds["spec"]["selector"]


def test_the_named_port_is_the_metrics_port(rendered: dict[tuple[str, str], Any]) -> None:
    assert daemon_pod(rendered).ports == {"metrics": PORT}


# -- what it admits --------------------------------------------------------------------

PROMETHEUS = Pod("monitoring", {"app.kubernetes.io/name": "prometheus"}, ip="10.1.0.5")

# (the source, the port it connects to, admitted?)
SOURCES = [
    pytest.param(PROMETHEUS, PORT, True, id="kube-prometheus-scrapes"),
    pytest.param(PROMETHEUS, 8080, False, id="another-port"),
    pytest.param(
        Pod("monitoring", {"app.kubernetes.io/name": "grafana"}), PORT, False, id="its-neighbour"
    ),
    pytest.param(
        Pod("games", {"app.kubernetes.io/name": "prometheus"}),
        PORT,
        False,
        id="same-label-elsewhere",
    ),
    pytest.param(Pod("games", {"app": "game"}), PORT, False, id="a-workload"),
    pytest.param(
        Pod(NAMESPACE, {"app.kubernetes.io/name": "probemarker"}), PORT, False, id="another-daemon"
    ),
]


@pytest.mark.parametrize(("source", "port", "expected"), SOURCES)
def test_who_reaches_the_daemon(
    rendered: dict[tuple[str, str], Any], source: Pod, port: int, expected: bool
) -> None:
    policies = [rendered[POLICY]]
    assert admits(policies, source=source, target=daemon_pod(rendered), port=port) is expected


def test_without_the_component_everyone_does(base: dict[tuple[str, str], Any]) -> None:
    anyone = Pod("games", {"app": "game"})
    policies = [d for d in base.values() if d["kind"] == "NetworkPolicy"]
    assert admits(policies, source=anyone, target=daemon_pod(base), port=PORT)


# -- docs/security.md: naming another scraper ----------------------------------------------


def doc_overlay() -> dict[str, Any]:
    """The Kustomization of docs/security.md that includes the component."""
    blocks = re.findall(r"```yaml\n(.*?)```", SECURITY_DOC.read_text(), flags=re.DOTALL)
    found = [
        doc
        for doc in map(yaml.safe_load, blocks)
        if isinstance(doc, dict)
        and doc.get("kind") == "Kustomization"
        and any(COMPONENT.name in c for c in doc.get("components") or ())
    ]
    assert len(found) == 1, found
    return dict(found[0])


def render_doc_overlay(tmp_path: Path, overlay: dict[str, Any]) -> dict[tuple[str, str], Any]:
    here = tmp_path / "doc-overlay"
    here.mkdir()
    real = os.path.relpath(MANIFESTS, here)
    body = copy.deepcopy(overlay)
    body["resources"] = [r.replace("../manifests", real, 1) for r in overlay["resources"]]
    body["components"] = [c.replace("../manifests", real, 1) for c in overlay["components"]]
    (here / "kustomization.yaml").write_text(yaml.safe_dump(body))
    return {(d["kind"], d["metadata"]["name"]): d for d in kustomize(here)}


def test_the_doc_overlay_admits_its_scraper_and_no_longer_the_default(tmp_path: Path) -> None:
    objects = render_doc_overlay(tmp_path, doc_overlay())
    policies, target = [objects[POLICY]], daemon_pod(objects)
    theirs = Pod("observability", {"app": "prometheus"})
    assert admits(policies, source=theirs, target=target, port=PORT)
    assert not admits(policies, source=theirs, target=target, port=8080)
    assert not admits(policies, source=PROMETHEUS, target=target, port=PORT)
    assert not admits(policies, source=Pod("observability", {"app": "x"}), target=target, port=PORT)


def test_the_component_comment_shows_the_same_patch_as_the_doc() -> None:
    lines = [
        line.removeprefix("#")
        for line in (COMPONENT / "kustomization.yaml").read_text().splitlines()
        if line.startswith("#")
    ]
    start = next(i for i, line in enumerate(lines) if "apiVersion:" in line)
    end = lines.index("", start)
    shown = yaml.safe_load(textwrap.dedent("\n".join(lines[start:end])))
    assert shown["components"] == doc_overlay()["components"]
    assert shown["patches"] == doc_overlay()["patches"]


# -- composition -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "others",
    [
        pytest.param((COMPONENTS / "node-scope",), id="node-scope"),
        pytest.param((COMPONENTS / "cri", COMPONENTS / "cri-no-exec-rbac"), id="cri"),
        pytest.param((KRUISE_COMPONENT,), id="kruise-group"),
    ],
)
def test_it_composes_with_the_other_components(
    tmp_path: Path, rendered: dict[tuple[str, str], Any], others: tuple[Path, ...]
) -> None:
    objects = render(tmp_path, *others, COMPONENT)
    assert objects[POLICY] == rendered[POLICY]
    assert admits([objects[POLICY]], source=PROMETHEUS, target=daemon_pod(objects), port=PORT)


def test_an_overlay_namespace_moves_the_policy_with_the_daemon(tmp_path: Path) -> None:
    objects = render(tmp_path, COMPONENT, namespace="ops")
    assert objects[POLICY]["metadata"]["namespace"] == "ops"
    target = daemon_pod(objects)
    assert target.namespace == "ops"
    assert admits([objects[POLICY]], source=PROMETHEUS, target=target, port=PORT)
    assert not admits([objects[POLICY]], source=Pod("ops", {}), target=target, port=PORT)


# -- the evaluator (tests/network_policy.py) -------------------------------------------------

TARGET = Pod("ns", {"app": "db"}, ports={"sql": 5432})


def policy(rule: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns"},
        "spec": {"podSelector": {"matchLabels": {"app": "db"}}, "ingress": [rule], **spec},
    }


# (the policy, the source, the port) -> admitted? Cases after kubernetes.io's page.
EVALUATOR = [
    pytest.param(policy({"from": [{"podSelector": {}}]}), Pod("ns", {"x": "1"}), 1, True,
                 id="podSelector-alone-is-the-policys-namespace"),
    pytest.param(policy({"from": [{"podSelector": {}}]}), Pod("other", {}), 1, False,
                 id="...and-not-another"),
    pytest.param(policy({"from": [{"namespaceSelector": {"matchLabels": {"team": "a"}}}]}),
                 Pod("other", {}, namespace_labels={"team": "a"}), 1, True,
                 id="namespaceSelector-alone-is-every-pod-there"),
    pytest.param(policy({"from": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"r": "c"}}}]}),
                 Pod("other", {"r": "c"}), 1, True, id="both-in-one-entry"),
    pytest.param(policy({"from": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"r": "c"}}}]}),
                 Pod("other", {"r": "d"}), 1, False, id="both-in-one-entry-pod-differs"),
    pytest.param(policy({"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}]}),
                 Pod("x", {}, ip="10.2.0.1"), 1, True, id="ipBlock"),
    pytest.param(policy({"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}]}),
                 Pod("x", {}, ip="10.1.0.1"), 1, False, id="ipBlock-except"),
    pytest.param(policy({}), Pod("x", {}), 1, True, id="empty-rule-admits-all"),
    pytest.param(policy({"ports": [{"port": "sql"}]}), Pod("x", {}), 5432, True, id="named-port"),
    pytest.param(policy({"ports": [{"port": "sql"}]}), Pod("x", {}), 5433, False, id="named-port-other"),
    pytest.param(policy({"ports": [{"port": 5000, "endPort": 6000}]}), Pod("x", {}), 5432, True,
                 id="port-range"),
    pytest.param(policy({"ports": [{"protocol": "UDP", "port": 5432}]}), Pod("x", {}), 5432, False,
                 id="protocol"),
    pytest.param(policy({}, policyTypes=["Egress"]), Pod("x", {}), 1, True,
                 id="egress-only-does-not-isolate-ingress"),
    pytest.param({**policy({}), "spec": {"podSelector": {"matchLabels": {"app": "web"}}, "ingress": []}},
                 Pod("x", {}), 1, True, id="not-selected-not-isolated"),
    pytest.param({"metadata": {"namespace": "ns"}, "spec": {"podSelector": {}}}, Pod("ns", {}), 1, False,
                 id="selected-no-rules-deny-all"),
]  # fmt: skip


@pytest.mark.parametrize(("policy_doc", "source", "port", "expected"), EVALUATOR)
def test_the_evaluator(policy_doc: dict[str, Any], source: Pod, port: int, expected: bool) -> None:
    assert admits([policy_doc], source=source, target=TARGET, port=port) is expected


def test_the_evaluators_selector_matches_expressions() -> None:
    raw = {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}
    assert selector(raw).match_expressions[0].values == ("a", "b")
