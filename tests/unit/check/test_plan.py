"""The pure parts of `probemarker check`: how a probe is reached, which pods are
probed, the daemon's gate, and the plan's treatment of other markers' keys."""

from __future__ import annotations

from typing import Any

import pytest

from probemarker.api.model import (
    ExecAction,
    GRPCAction,
    HTTPGetAction,
    LabelSelector,
    Marker,
    MarkerPolicy,
    MarkerRef,
    ProbeSpec,
    ProbeState,
    SelectorRequirement,
    TCPSocketAction,
    Timing,
)
from probemarker.check import plan
from probemarker.identity.probes import OwnerRef, ProbeKey
from probemarker.probe.outcome import Outcome, Result
from probemarker.watch.pods import ContainerFacts, PodUID, pod_projection, pod_view
from probemarker.write.ownership import OWNED_KEY, Owned, render_record

UID = PodUID("uid-1")


def spec(name: str = "idle", **over: Any) -> ProbeSpec:
    fields: dict[str, Any] = {
        "name": name,
        "container_name": "app",
        "handler": ExecAction(("idle",)),
        "timing": Timing(),
        "policies": (
            MarkerPolicy(ProbeState.SUCCEEDED, labels={"idle": "true"}),
            MarkerPolicy(ProbeState.FAILED, labels={"idle": "false"}),
        ),
        **over,
    }
    return ProbeSpec(**fields)


def marker(name: str = "m", *probes: ProbeSpec) -> Marker:
    return Marker(
        ref=MarkerRef("default", name),
        api_version="probemarker.io/v1alpha1",
        selector=LabelSelector(match_labels={"app": "game"}),
        probes=probes or (spec(),),
    )


def pod(**meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "default", "name": "p", "uid": UID, **meta},
        "spec": {"containers": [{"name": "app"}]},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "app",
                    "containerID": "containerd://1",
                    "started": True,
                    "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                }
            ],
        },
    }


@pytest.mark.parametrize(
    ("action", "proxy", "direct", "via"),
    [
        pytest.param(ExecAction(("x",)), False, False, plan.VIA_EXEC, id="exec"),
        pytest.param(HTTPGetAction(80), False, False, None, id="http-not-reachable"),
        pytest.param(HTTPGetAction(80), True, False, plan.VIA_PROXY, id="http-proxy"),
        pytest.param(TCPSocketAction(80), True, False, None, id="tcp-never-proxied"),
        pytest.param(GRPCAction(80), True, False, None, id="grpc-never-proxied"),
        pytest.param(TCPSocketAction(80), False, True, plan.VIA_DIRECT, id="tcp-direct"),
        pytest.param(HTTPGetAction(80), False, True, plan.VIA_DIRECT, id="http-direct"),
    ],
)
def test_route(action: Any, proxy: bool, direct: bool, via: str | None) -> None:
    assert plan.route(action, via_api_proxy=proxy, direct=direct) == via


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        pytest.param(pod(labels={"app": "game"}), None, id="selected"),
        pytest.param(
            pod(labels={"app": "web"}), "not selected: the marker's selector", id="labels"
        ),
        pytest.param(
            {
                **pod(labels={"app": "game"}),
                "metadata": {**pod()["metadata"], "namespace": "x", "labels": {"app": "game"}},
            },
            "not selected: the pod is in namespace x",
            id="namespace",
        ),
        pytest.param(
            pod(labels={"app": "game"}, deletionTimestamp="2026-01-01T00:00:00Z"),
            "the pod is terminating",
            id="terminating",
        ),
        pytest.param(
            {**pod(labels={"app": "game"}), "status": {"phase": "Succeeded"}},
            "the pod has finished (phase Succeeded)",
            id="finished",
        ),
        pytest.param(
            {**pod(labels={"app": "game"}), "spec": {"containers": [{"name": "other"}]}},
            "the pod has none of the marker's containers (app)",
            id="no-container",
        ),
    ],
)
def test_selection_problem(raw: dict[str, Any], problem: str | None) -> None:
    found = plan.selection_problem(pod_view(pod_projection(raw)), marker())
    assert (found if problem is None else (found or "")[: len(problem)]) == problem


def test_selector_text() -> None:
    selector = LabelSelector(
        match_labels={"app": "game"},
        match_expressions=(
            SelectorRequirement("tier", "In", ("a", "b")),
            SelectorRequirement("x", "Exists"),
            SelectorRequirement("y", "DoesNotExist"),
        ),
    )
    assert plan.selector_text(selector) == "app=game,tier in (a,b),x,!y"


@pytest.mark.parametrize(
    ("facts", "result", "text"),
    [
        pytest.param(
            ContainerFacts("app", "id", running=True, started=True, started_at=0.0),
            None,
            "",
            id="run",
        ),
        pytest.param(ContainerFacts("app", "id"), Result.FAILED, "is not running", id="stopped"),
        pytest.param(None, Result.UNKNOWN, "has not been created", id="absent"),
        pytest.param(
            ContainerFacts("app", "id", running=True),
            Result.UNKNOWN,
            "has not started",
            id="startup",
        ),
        pytest.param(
            ContainerFacts("app", "id", running=True, started=True, started_at=95.0),
            Result.UNKNOWN,
            "initialDelaySeconds (10)",
            id="initial-delay",
        ),
    ],
)
def test_not_run_is_the_daemons_gate(
    facts: ContainerFacts | None, result: Result | None, text: str
) -> None:
    found = plan.not_run(facts, "app", Timing(initial_delay_seconds=10), now=100.0)
    if result is None:
        assert found is None
    else:
        assert found is not None
        assert found.result is result
        assert text in found.message


def test_unknown_is_never_decided() -> None:
    owner = OwnerRef("m", "idle")
    assert plan.decided_of(owner, spec(), Outcome.unknown("x")) is None
    decided = plan.decided_of(owner, spec(), Outcome.failed("busy"))
    assert decided is not None
    assert (decided.state, decided.message) == (ProbeState.FAILED, "busy")


def test_other_markers_are_held_and_own_departed_probes_are_cleaned() -> None:
    record = {
        OwnerRef("other", "ready"): Owned(ProbeState.SUCCEEDED, labels={"ready": "yes"}),
        OwnerRef("m", "gone"): Owned(ProbeState.SUCCEEDED, labels={"gone": "yes"}),
    }
    raw = pod(
        labels={"app": "game", "ready": "yes", "gone": "yes"},
        annotations={OWNED_KEY: render_record(record, pod_uid=UID)},
    )
    view = pod_view(pod_projection(raw))
    key = ProbeKey(UID, "app", MarkerRef("default", "m"), "idle")
    found = plan.plan_pod(
        view, marker(), {key: Outcome.succeeded("idle")}, now="2026-01-01T00:00:00Z"
    )
    assert found.frozen_markers == frozenset({"other"})
    removed = {op["path"] for op in found.patch if op["op"] == "remove"}
    assert removed == {"/metadata/labels/gone"}  # never /metadata/labels/ready
    assert found.desired.labels["idle"] == "true"


def test_an_unknown_outcome_plans_no_patch() -> None:
    view = pod_view(pod_projection(pod(labels={"app": "game"})))
    key = ProbeKey(UID, "app", MarkerRef("default", "m"), "idle")
    found = plan.plan_pod(view, marker(), {key: Outcome.unknown("x")}, now="t")
    assert found.patch == []


ROLE = spec(
    "role",
    policies=(
        MarkerPolicy(ProbeState.SUCCEEDED, labels={"role": "{{.Result}}"}),
        MarkerPolicy(ProbeState.FAILED, labels={"role": "{{.Result}}"}),
    ),
)
ROLE_KEY = ProbeKey(UID, "app", MarkerRef("default", "m"), "role")


@pytest.mark.parametrize(
    ("shown", "outcome", "role"),
    [
        pytest.param(None, Outcome.failed("timed out"), "", id="first-decision-renders-empty"),
        pytest.param(
            Owned(ProbeState.FAILED, labels={"role": "replica"}),
            Outcome.failed("timed out"),
            "replica",
            id="same-state-keeps-the-value",
        ),
        pytest.param(
            Owned(ProbeState.SUCCEEDED, labels={"role": "primary"}),
            Outcome.failed("timed out"),
            "",
            id="transition-renders-empty",
        ),
        pytest.param(
            Owned(ProbeState.SUCCEEDED, labels={"role": "primary"}),
            Outcome.failed("down", answer="connection refused: db down"),
            None,
            id="transition-to-an-invalid-value-removes-it",
        ),
    ],
)
def test_check_plans_what_the_daemon_would_for_no_answer_and_invalid_values(
    shown: Owned | None, outcome: Outcome, role: str | None
) -> None:
    """Issue 29: check shows the daemon's verdict for a run with no answer (defect 2)
    and for a transition to an invalid value (defect 7)."""
    meta: dict[str, Any] = {"labels": {"app": "game"}}
    if shown is not None:
        meta["labels"]["role"] = shown.labels["role"]
        record = {OwnerRef("m", "role"): shown}
        meta["annotations"] = {OWNED_KEY: render_record(record, pod_uid=UID)}
    view = pod_view(pod_projection(pod(**meta)))
    found = plan.plan_pod(view, marker("m", ROLE), {ROLE_KEY: outcome}, now="t")
    assert found.desired.labels.get("role", "(untouched)") == role


def test_check_counts_room_over_the_whole_patch() -> None:
    """Defect 1: check shows one of two rendered annotations refused for room, as the
    daemon refuses it, where before it showed both as set in a patch the API server
    would refuse."""
    notes = spec(
        "notes",
        policies=(
            MarkerPolicy(
                ProbeState.SUCCEEDED, annotations={"a.io/a": "{{.Result}}", "a.io/b": "{{.Result}}"}
            ),
        ),
    )
    view = pod_view(
        pod_projection(pod(labels={"app": "game"}, annotations={"big": "x" * (256 * 1024 - 1600)}))
    )
    key = ProbeKey(UID, "app", MarkerRef("default", "m"), "notes")
    answer = Outcome.succeeded("ok", answer="y" * 1000)
    found = plan.plan_pod(view, marker("m", notes), {key: answer}, now="t")
    assert found.desired.annotations["a.io/a"] == "y" * 1000
    assert "a.io/b" not in found.desired.annotations
    assert [(bad.key, bad.kind) for bad in found.desired.invalid] == [("a.io/b", "annotation")]


@pytest.mark.parametrize(
    ("pod", "gates"),
    [
        (
            {"spec": {"readinessGates": [{"conditionType": "a.io/x"}, {"conditionType": "b"}]}},
            {"a.io/x", "b"},
        ),
        ({"spec": {}}, set()),
        ({}, set()),
        ({"spec": {"readinessGates": None}}, set()),
        ({"spec": {"readinessGates": [{"conditionType": 3}, "junk", {}]}}, set()),
    ],
)
def test_readiness_gates_of_a_pod(pod: dict[str, Any], gates: set[str]) -> None:
    assert plan.readiness_gates(pod) == gates
