"""Readiness gates injected at pod creation, on a real kube-apiserver 1.32 and kubelet:
the readiness-gates-v1alpha1 component (a MutatingAdmissionPolicy, no webhook server)
installed as docs/installation.md says, with the API server serving the alpha API
(hack/cluster.sh turns on the MutatingAdmissionPolicy feature gate and the v1alpha1
runtime-config).

- A Deployment's pods get the gate of an opted-in marker and not that of a marker that
  does not opt in; they stay not Ready (their containers ready) until the probe
  succeeds, then Ready, and the Service's EndpointSlice follows; a probe that fails
  takes the pod's endpoint out.
- A pod that already lists the gate gets no duplicate; its own gates stay.
- matchExpressions select as a label selector does (the daemon's selector_matches
  decides what is expected), and only containers the daemon probes get gates.
- A namespace with no marker admits pods unchanged.

What the policy adds is read from server-side dry runs where no pod needs to run
(admission runs in full for a dry run; nothing is stored).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from probemarker.api.parse import parse_marker
from probemarker.match.match import selector_matches
from tests.cluster.install import MUTATING_POLICY_MINOR, Addon, Cluster, needs_release
from tests.cluster.kube import (
    REPO,
    Kubectl,
    busybox_pod,
    create_namespace,
    exec_in,
    marker,
    wait_for,
)
from tests.podfields import condition

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module", autouse=True)
def _release(cluster: Cluster) -> None:
    """Module-scoped: before the module's own fixtures install anything."""
    needs_release(cluster, MUTATING_POLICY_MINOR, "MutatingAdmissionPolicy (readiness gates)")


GATE = "probemarker.test/gate"
PLAIN = "probemarker.test/not-injected"
OPT_IN = "probemarker.io/inject-readiness-gates"
API = "admissionregistration.k8s.io/v1alpha1"
COMPONENT = REPO / "manifests" / "components" / "readiness-gates-v1alpha1"


def opted_in(body: dict[str, Any]) -> dict[str, Any]:
    body["metadata"]["annotations"] = {OPT_IN: "true"}
    return body


def dry_run(kubectl: Kubectl, pod: dict[str, Any]) -> dict[str, Any]:
    """The pod as the API server would admit it (admission in full, nothing stored)."""
    done = kubectl.run("create", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(pod))
    return dict(json.loads(done.stdout))


def gates_of(pod: dict[str, Any]) -> list[str] | None:
    listed = pod["spec"].get("readinessGates")
    return None if listed is None else [g["conditionType"] for g in listed]


def until_injected(kubectl: Kubectl, namespace: str, labels: dict[str, str], gate: str) -> None:
    """Until the API server's policy sees the namespace's markers (its param informer
    and the policy's compilation follow the API with a short delay)."""
    probe_pod = busybox_pod("canary", namespace, script="true", labels=labels)
    wait_for(
        lambda: gates_of(dry_run(kubectl, probe_pod)) or [],
        lambda gates: gate in gates,
        timeout=60,
        what=f"the policy injecting {gate} in namespace {namespace}",
    )


@pytest.fixture(scope="module")
def injection(
    cluster: Cluster, addon: Addon, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """The component applied from an overlay (as a user's overlay includes it); the
    API server restarted first if it does not serve the alpha API (a cluster kept from
    a run of an older checkout)."""
    kubectl = cluster.kubectl
    if API not in kubectl.run("api-versions").stdout.split():
        cluster.script("restart-apiserver", timeout=180)
    assert API in kubectl.run("api-versions").stdout.split(), (
        "hack/cluster.sh: no MutatingAdmissionPolicy API"
    )
    folder = tmp_path_factory.mktemp("readiness-gates")
    (folder / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "components": [
                    str(Path(*[".."] * len(folder.parts[1:])) / COMPONENT.relative_to("/"))
                ],
            }
        )
    )
    kubectl.run("apply", "-k", str(folder), timeout=60)
    try:
        yield
    finally:
        kubectl.run("delete", "-k", str(folder), "--ignore-not-found", timeout=60, check=False)


def _endpoints(kubectl: Kubectl, namespace: str, service: str) -> dict[str, Any]:
    slices = kubectl.json(
        "-n", namespace, "get", "endpointslices", "-l", f"kubernetes.io/service-name={service}"
    )
    return {
        e["targetRef"]["name"]: e.get("conditions", {}).get("ready")
        for s in slices["items"]
        for e in s.get("endpoints") or []
    }


def _pods(kubectl: Kubectl, namespace: str, app: str) -> list[dict[str, Any]]:
    items = kubectl.json("-n", namespace, "get", "pods", "-l", f"app={app}")["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def _status(pod: dict[str, Any], type_: str) -> str | None:
    return (condition(pod, type_) or {}).get("status")


def test_a_deployments_pods_are_gated_until_the_probe_succeeds(
    cluster: Cluster, addon: Addon, injection: None, namespace: str
) -> None:
    kubectl = cluster.kubectl
    exec_ok = {"exec": {"command": ["cat", "/tmp/ok"]}}
    kubectl.apply(
        opted_in(marker("gate", namespace, app="web", probe=exec_ok, label=None, condition_type=GATE)),
        marker("plain", namespace, app="web", probe={"exec": {"command": ["true"]}}, label=None,
               condition_type=PLAIN),
    )  # fmt: skip
    until_injected(kubectl, namespace, {"app": "web"}, GATE)
    template = busybox_pod("x", namespace, script="exec sleep 2147483647", labels={"app": "web"})
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": template["spec"]},
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }
    kubectl.apply(deployment, service)

    # Created by the ReplicaSet controller, each pod lists the opted-in marker's gate only.
    pods = wait_for(
        lambda: _pods(kubectl, namespace, "web"), lambda ps: len(ps) == 2, timeout=60, what="2 pods"
    )
    assert [gates_of(p) for p in pods] == [[GATE], [GATE]]
    # The policy changes pods only: the Deployment's template is as it was written.
    stored = kubectl.get("deployment", "web", namespace)["spec"]["template"]["spec"]
    assert "readinessGates" not in stored
    # Containers ready, the probe failing (no /tmp/ok): the gate holds Ready False.
    pods = wait_for(
        lambda: _pods(kubectl, namespace, "web"),
        lambda ps: all(
            _status(p, "ContainersReady") == "True" and _status(p, GATE) == "False" for p in ps
        ),
        timeout=60,
        what="containers ready and the gate's condition False",
    )
    assert [_status(p, "Ready") for p in pods] == ["False", "False"]
    # The other marker's condition is written, but gates nothing.
    wait_for(
        lambda: _pods(kubectl, namespace, "web"),
        lambda ps: all(_status(p, PLAIN) == "True" for p in ps),
        timeout=30,
        what=f"{PLAIN} True on both pods",
    )
    names = sorted(p["metadata"]["name"] for p in pods)
    wait_for(lambda: _endpoints(kubectl, namespace, "web"), lambda e: e == dict.fromkeys(names, False),
             timeout=30, what="both endpoints not ready")  # fmt: skip

    for name in names:
        exec_in(kubectl, namespace, name, "touch", "/tmp/ok")
    wait_for(
        lambda: _pods(kubectl, namespace, "web"),
        lambda ps: all(_status(p, GATE) == "True" and _status(p, "Ready") == "True" for p in ps),
        timeout=30,
        what="the probe succeeding and the pods Ready",
    )
    wait_for(lambda: _endpoints(kubectl, namespace, "web"), lambda e: e == dict.fromkeys(names, True),
             timeout=30, what="both endpoints ready")  # fmt: skip

    # A probe that fails takes that pod's endpoint out, and only that one.
    exec_in(kubectl, namespace, names[0], "rm", "/tmp/ok")
    wait_for(
        lambda: kubectl.get("pod", names[0], namespace),
        lambda p: _status(p, GATE) == "False" and _status(p, "Ready") == "False",
        timeout=30,
        what=f"{names[0]} not Ready after its probe fails",
    )
    wait_for(lambda: _endpoints(kubectl, namespace, "web"), lambda e: e == {names[0]: False, names[1]: True},
             timeout=30, what="the failing pod's endpoint out")  # fmt: skip


def test_a_pod_that_lists_the_gate_gets_no_duplicate(
    cluster: Cluster, addon: Addon, injection: None, namespace: str
) -> None:
    kubectl = cluster.kubectl
    exec_ok = {"exec": {"command": ["true"]}}
    kubectl.apply(
        opted_in(
            marker("gate", namespace, app="web", probe=exec_ok, label=None, condition_type=GATE)
        ),
        opted_in(
            marker("same", namespace, app="web", probe=exec_ok, label=None, condition_type=GATE)
        ),
    )
    until_injected(kubectl, namespace, {"app": "web"}, GATE)
    own = {"readinessGates": [{"conditionType": "user.test/own"}, {"conditionType": GATE}]}
    pod = busybox_pod("listed", namespace, script="true", labels={"app": "web"}, spec=own)
    assert gates_of(dry_run(kubectl, pod)) == ["user.test/own", GATE]
    # Two opted-in markers naming one type: added once.
    bare = busybox_pod("bare", namespace, script="true", labels={"app": "web"})
    assert gates_of(dry_run(kubectl, bare)) == [GATE]
    # A pod really created, not a dry run: the same.
    kubectl.apply(pod)
    assert gates_of(kubectl.get("pod", "listed", namespace)) == ["user.test/own", GATE]


SELECTOR = {
    "matchLabels": {"app": "web"},
    "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["front", "edge"]},
        {"key": "track", "operator": "NotIn", "values": ["canary"]},
        {"key": "zone", "operator": "Exists"},
        {"key": "drain", "operator": "DoesNotExist"},
    ],
}
LABELS = [
    {"app": "web", "tier": "front", "zone": "a"},
    {"app": "web", "tier": "edge", "zone": "b", "track": "stable"},
    {"app": "web", "tier": "front", "zone": "a", "track": "canary"},
    {"app": "web", "tier": "back", "zone": "a"},
    {"app": "web", "tier": "front"},
    {"app": "web", "tier": "front", "zone": "a", "drain": ""},
    {"app": "db", "tier": "front", "zone": "a"},
]


def test_match_expressions_select_as_a_label_selector_does(
    cluster: Cluster, addon: Addon, injection: None, namespace: str
) -> None:
    kubectl = cluster.kubectl
    body = opted_in(marker("sel", namespace, app="web", probe={"exec": {"command": ["true"]}}, label=None,
                           condition_type=GATE))  # fmt: skip
    body["spec"]["selector"] = SELECTOR
    side = dict(
        body["spec"]["probes"][0],
        name="side",
        containerName="side",
        podConditionType="probemarker.test/side",
    )
    init = dict(
        body["spec"]["probes"][0],
        name="init",
        containerName="init",
        podConditionType="probemarker.test/init",
    )
    body["spec"]["probes"] += [side, init]
    kubectl.apply(body)
    until_injected(kubectl, namespace, LABELS[0], GATE)
    selector = parse_marker(body).selector
    expected_sets = []
    for labels in LABELS:
        pod = busybox_pod("sel", namespace, script="true", labels=labels)
        pod["spec"]["initContainers"] = [
            {**pod["spec"]["containers"][0], "name": "init"},
            {**pod["spec"]["containers"][0], "name": "side", "restartPolicy": "Always"},
        ]
        selected = selector_matches(selector, labels)
        expected = [GATE, "probemarker.test/side"] if selected else None
        expected_sets.append(selected)
        assert gates_of(dry_run(kubectl, pod)) == expected, labels
    assert set(expected_sets) == {True, False}


def test_a_namespace_with_no_marker_admits_pods_unchanged(
    cluster: Cluster, addon: Addon, injection: None, namespace: str
) -> None:
    kubectl = cluster.kubectl
    other = f"{namespace}-m"
    create_namespace(kubectl, other)
    try:
        # Markers elsewhere: an opted-in one in another namespace is not this pod's.
        kubectl.apply(opted_in(marker("gate", other, app="web", probe={"exec": {"command": ["true"]}},
                                      label=None, condition_type=GATE)))  # fmt: skip
        until_injected(kubectl, other, {"app": "web"}, GATE)
        pod = busybox_pod("plain", namespace, script="true", labels={"app": "web"})
        assert gates_of(dry_run(kubectl, pod)) is None
        own = busybox_pod("own", namespace, script="true", labels={"app": "web"},
                          spec={"readinessGates": [{"conditionType": "user.test/own"}]})  # fmt: skip
        assert gates_of(dry_run(kubectl, own)) == ["user.test/own"]
    finally:
        kubectl.run("delete", "namespace", other, "--wait=false", check=False)
