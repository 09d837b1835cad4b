"""match/match.py: which probes run on a pod (docs/engine.md), and the diff between two sets."""

from __future__ import annotations

from typing import Any

import pytest

from probemarker.api.model import LabelSelector, Marker, SelectorRequirement
from probemarker.api.parse import parse_marker
from probemarker.identity.probes import ProbeKey
from probemarker.match.match import diff_matches, match_pod, requirement_matches, selector_matches
from probemarker.watch.pods import PodUID, pod_projection, pod_view


def marker(name: str = "m", namespace: str = "ns", selector: Any = None, **probe: Any) -> Marker:
    spec_probe = {
        "name": probe.get("probe", "idle"),
        "containerName": probe.get("container", "app"),
        "probe": {"exec": {"command": ["true"]}},
        "podConditionType": "example.com/idle",
    }
    return parse_marker(
        {
            "apiVersion": "probemarker.io/v1alpha1",
            "kind": "PodProbeMarker",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "selector": selector or {"matchLabels": {"app": "web"}},
                "probes": [spec_probe],
            },
        }
    )


def pod(**over: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "metadata": {
            "name": "web-0",
            "namespace": over.get("namespace", "ns"),
            "uid": "u1",
            "labels": over.get("labels", {"app": "web"}),
        },
        "spec": {
            "containers": [{"name": "app"}],
            "initContainers": over.get("init", []),
        },
        "status": {"phase": over.get("phase", "Running")},
    }
    if over.get("deleting"):
        raw["metadata"]["deletionTimestamp"] = "2026-11-23T10:00:00Z"
    return raw


@pytest.mark.parametrize(
    ("req", "labels", "expected"),
    [
        pytest.param(SelectorRequirement("a", "In", ("1", "2")), {"a": "2"}, True, id="in"),
        pytest.param(SelectorRequirement("a", "In", ("1",)), {}, False, id="in-missing"),
        pytest.param(SelectorRequirement("a", "NotIn", ("1",)), {}, True, id="notin-missing"),
        pytest.param(SelectorRequirement("a", "NotIn", ("1",)), {"a": "1"}, False, id="notin"),
        pytest.param(SelectorRequirement("a", "Exists"), {"a": ""}, True, id="exists"),
        pytest.param(SelectorRequirement("a", "DoesNotExist"), {"a": "x"}, False, id="dne"),
    ],
)
def test_requirement(req: SelectorRequirement, labels: dict[str, str], expected: bool) -> None:
    assert requirement_matches(req, labels) is expected


def test_selector_ands_labels_and_expressions() -> None:
    selector = LabelSelector({"app": "web"}, (SelectorRequirement("tier", "Exists"),))
    assert selector_matches(selector, {"app": "web", "tier": "1"})
    assert not selector_matches(selector, {"app": "web"})
    assert not selector_matches(selector, {"tier": "1"})


KEY = ProbeKey(PodUID("u1"), "app", marker().ref, "idle")


@pytest.mark.parametrize(
    ("raw", "markers", "expected"),
    [
        pytest.param(pod(), [marker()], {KEY}, id="match"),
        pytest.param(pod(labels={}), [marker()], set(), id="no-labels-at-all"),
        pytest.param(pod(labels={"app": "db"}), [marker()], set(), id="selector-misses"),
        pytest.param(pod(namespace="other"), [marker()], set(), id="other-namespace"),
        pytest.param(pod(phase="Succeeded"), [marker()], set(), id="terminal"),
        pytest.param(pod(phase="Failed"), [marker()], set(), id="failed"),
        pytest.param(pod(deleting=True), [marker()], set(), id="deleting"),
        pytest.param(pod(), [marker(container="sidecar")], set(), id="no-such-container"),
        pytest.param(
            pod(init=[{"name": "sidecar", "restartPolicy": "Always"}]),
            [marker(container="sidecar")],
            {ProbeKey(PodUID("u1"), "sidecar", marker().ref, "idle")},
            id="native-sidecar",
        ),
        pytest.param(
            pod(init=[{"name": "sidecar"}]), [marker(container="sidecar")], set(), id="plain-init"
        ),
        pytest.param(
            pod(),
            [marker("way"), marker("gateway")],
            {
                ProbeKey(PodUID("u1"), "app", marker("way").ref, "idle"),
                ProbeKey(PodUID("u1"), "app", marker("gateway").ref, "idle"),
            },
            id="two-markers-distinct-keys",
        ),
    ],
)
def test_match_pod(raw: dict[str, Any], markers: list[Marker], expected: set[ProbeKey]) -> None:
    assert set(match_pod(pod_view(pod_projection(raw)), markers)) == expected


def test_two_probes_on_one_container_are_two_keys() -> None:
    doc = {
        "apiVersion": "probemarker.io/v1alpha1",
        "kind": "PodProbeMarker",
        "metadata": {"name": "m", "namespace": "ns"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "probes": [
                {
                    "name": name,
                    "containerName": "app",
                    "probe": {"exec": {"command": ["true"]}},
                    "podConditionType": f"example.com/{name}",
                }
                for name in ("idle", "role")
            ],
        },
    }
    assert len(match_pod(pod_view(pod_projection(pod())), [parse_marker(doc)])) == 2


def test_diff() -> None:
    a, b = marker("a"), marker("b")
    old = match_pod(pod_view(pod_projection(pod())), [a])
    new = match_pod(pod_view(pod_projection(pod())), [b])
    diff = diff_matches(old, new)
    assert (len(diff.start), len(diff.stop), diff.change) == (1, 1, ())
    assert not diff_matches(old, old)
    changed = marker("a", probe="idle", container="app")
    assert diff_matches(old, match_pod(pod_view(pod_projection(pod())), [changed])) == diff_matches(
        old, old
    )
