"""The demo's script is consistent with the example markers it plays against: each pod
is selected by its namespace's marker and has the probed container, each flip changes
a file the pod has, each expectation names a probe that runs on its pod."""

from __future__ import annotations

import pytest

from probemarker.demo.examples import find_probe, load_examples
from probemarker.demo.scenario import DB_ROLE, PODS, STEPS, SUCCEEDED, DemoPod, pod_named
from probemarker.match.match import selector_matches


@pytest.mark.parametrize("pod", [pytest.param(p, id=p.key) for p in PODS])
def test_each_pod_is_selected_by_its_namespaces_marker_only(pod: DemoPod) -> None:
    selecting = [
        e.name
        for e in load_examples()
        if e.namespace == pod.namespace and selector_matches(e.marker.selector, pod.labels)
    ]
    assert len(selecting) == 1
    example = next(e for e in load_examples() if e.name == selecting[0])
    assert {p.container_name for p in example.marker.probes} == {pod.container}
    if pod.readiness_gate is not None:
        assert {p.condition_type for p in example.marker.probes} == {pod.readiness_gate}


def test_the_first_step_waits_for_every_pods_first_decision_and_writes_nothing() -> None:
    first = STEPS[0]
    assert first.flips == ()
    assert sorted(e.pod for e in first.expects) == sorted(p.key for p in PODS)


def test_each_later_step_changes_a_file_and_expects_a_decision() -> None:
    contents = {(p.key, path): text for p in PODS for path, text in p.files.items()}
    for step in STEPS[1:]:
        assert step.flips, step.title
        assert step.expects, step.title
        for flip in step.flips:
            assert (flip.pod, flip.path) in contents, f"{flip}: the pod has no such file"
            assert contents[(flip.pod, flip.path)] != flip.text, f"{flip}: changes nothing"
            contents[(flip.pod, flip.path)] = flip.text


def test_each_expectation_names_a_probe_that_runs_on_its_pod() -> None:
    examples = load_examples()
    for step in STEPS:
        for expect in step.expects:
            pod = pod_named(expect.pod)
            probe = find_probe(examples, expect.marker, expect.probe)
            assert probe.container_name == pod.container
            (example,) = [e for e in examples if e.name == expect.marker]
            assert example.namespace == pod.namespace
            assert selector_matches(example.marker.selector, pod.labels)


def test_the_scenario_flips_each_kind_of_answer_both_ways() -> None:
    seen = {(e.marker, e.state) for step in STEPS[1:] for e in step.expects}
    assert ("upstream-gate", "Failed") in seen
    assert ("upstream-gate", "Succeeded") in seen
    assert ("game-server-idle", "Failed") in seen


def test_the_failover_swaps_the_databases_answers() -> None:
    """The role label is the probe's answer: each database answers `primary` or
    `replica`, and the failover swaps them with no change of decided state."""
    roles = [
        {e.pod: (e.state, e.answer) for e in step.expects if e.marker == "database-role-value"}
        for step in STEPS
    ]
    first, failover = (r for r in roles if r)
    assert first == {
        "databases/db-0": (SUCCEEDED, "primary"),
        "databases/db-1": (SUCCEEDED, "replica"),
    }
    assert failover == {
        "databases/db-0": (SUCCEEDED, "replica"),
        "databases/db-1": (SUCCEEDED, "primary"),
    }
    assert {p.files[DB_ROLE] for p in PODS if p.namespace == "databases"} == {
        "primary\n",
        "replica\n",
    }


def test_pod_named_refuses_an_unknown_pod() -> None:
    with pytest.raises(KeyError, match="the demo has no pod games/nope"):
        pod_named("games/nope")
