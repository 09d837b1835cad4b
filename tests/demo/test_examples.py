"""The demo's example markers: manifests/examples/ unchanged, parsed, and what
each probe state writes onto a pod, with its pace and bound."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import yaml

from probemarker.api.model import ProbeState, Timing
from probemarker.demo.examples import (
    FILES,
    Mark,
    answered,
    columns_of,
    decide_bound,
    example_text,
    find_probe,
    load_examples,
    marks_for,
    pace_text,
    quicken,
)

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "manifests" / "examples"
S, F = ProbeState.SUCCEEDED, ProbeState.FAILED
COST = "controller.kubernetes.io/pod-deletion-cost"


# Examples the demo's scenario does not play; validated with the others
# (tests/unit/cli/test_validate_cli.py) and run by the integration tests of their feature.
# primary-secondary.yaml: the demo plays the same role from the probe's answer
# (result-values.yaml's database-role-value) instead; both write db.example.com/role.
NOT_IN_THE_DEMO = ("primary-secondary.yaml",)


def test_the_demo_applies_the_manifests_examples_unchanged() -> None:
    shipped = sorted(p.name for p in EXAMPLES_DIR.glob("*.yaml"))
    assert shipped == sorted((*FILES, *NOT_IN_THE_DEMO))
    for name in FILES:
        assert example_text(name) == (EXAMPLES_DIR / name).read_text(encoding="utf-8")
    for example in load_examples():  # as the file holds it, one marker of a file of two
        bodies = list(yaml.safe_load_all((EXAMPLES_DIR / example.file).read_text()))
        assert example.body in bodies


def test_the_wheel_carries_the_examples_for_the_demo() -> None:
    """An installed probemarker has no manifests/: the wheel maps them into the package."""
    config = tomllib.loads((EXAMPLES_DIR.parents[1] / "pyproject.toml").read_text())
    include = config["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert include["manifests/examples"] == "probemarker/demo/examples"


def test_the_examples_load_as_three_markers_in_their_namespaces() -> None:
    examples = load_examples()
    assert [(e.namespace, e.name) for e in examples] == [
        ("games", "game-server-idle"),
        ("databases", "database-role-value"),
        ("web", "upstream-gate"),
    ]
    assert find_probe(examples, "game-server-idle", "idle").timing == Timing(
        initial_delay_seconds=10,
        timeout_seconds=3,
        period_seconds=10,
        success_threshold=1,
        failure_threshold=3,
    )


def test_fast_copies_run_every_second_and_keep_thresholds_and_timeouts() -> None:
    slow, fast = load_examples(), load_examples(fast=True)
    for before, after in zip(slow, fast, strict=True):
        for a, b in zip(before.marker.probes, after.marker.probes, strict=True):
            assert (b.timing.period_seconds, b.timing.initial_delay_seconds) == (1, 0)
            assert b.timing.success_threshold == a.timing.success_threshold
            assert b.timing.failure_threshold == a.timing.failure_threshold
            assert b.timing.timeout_seconds == a.timing.timeout_seconds
            assert b.policies == a.policies


def test_quicken_leaves_its_input_alone() -> None:
    body = {"spec": {"probes": [{"probe": {"periodSeconds": 10, "initialDelaySeconds": 5}}]}}
    quick = quicken(body)
    assert body["spec"]["probes"][0]["probe"] == {"periodSeconds": 10, "initialDelaySeconds": 5}
    assert quick["spec"]["probes"][0]["probe"] == {"periodSeconds": 1, "initialDelaySeconds": 0}


@pytest.mark.parametrize(
    ("marker", "probe", "state", "marks"),
    [
        pytest.param(
            "game-server-idle",
            "idle",
            S,
            {Mark("label", "gameserver-idle"): "true", Mark("annotation", COST): "-10"},
            id="idle",
        ),
        pytest.param(
            "game-server-idle",
            "idle",
            F,
            {Mark("label", "gameserver-idle"): "false", Mark("annotation", COST): "10"},
            id="busy",
        ),
        pytest.param(
            "database-role-value",
            "role",
            S,
            {Mark("label", "db.example.com/role"): "{{.Result}}"},
            id="role-the-template-without-an-answer",
        ),
        pytest.param("database-role-value", "role", F, {}, id="role-nothing-on-failure"),
        pytest.param(
            "upstream-gate",
            "upstream",
            S,
            {Mark("condition", "example.com/upstream-reachable"): "True"},
            id="gate-open",
        ),
        pytest.param(
            "upstream-gate",
            "upstream",
            F,
            {Mark("condition", "example.com/upstream-reachable"): "False"},
            id="gate-closed",
        ),
    ],
)
def test_marks_for_a_state(
    marker: str, probe: str, state: ProbeState, marks: dict[Mark, str]
) -> None:
    assert marks_for(find_probe(load_examples(), marker, probe), state) == marks


@pytest.mark.parametrize("answer", ["primary", "replica"])
def test_a_value_from_the_answer_is_rendered_with_it(answer: str) -> None:
    role = find_probe(load_examples(), "database-role-value", "role")
    label = Mark("label", "db.example.com/role")
    assert marks_for(role, S, answer=answer) == {label: answer}
    assert answered(role, S) == {label}
    assert answered(role, F) == frozenset()
    idle = find_probe(load_examples(), "game-server-idle", "idle")
    assert answered(idle, S) == frozenset()
    assert marks_for(idle, S, answer=answer) == marks_for(idle, S)  # nothing to render


@pytest.mark.parametrize(
    ("namespace", "columns"),
    [
        pytest.param(
            "games",
            (
                Mark("label", "gameserver-idle"),
                Mark("annotation", COST),
                Mark("condition", "Ready"),
            ),
            id="games",
        ),
        pytest.param(
            "databases",
            (Mark("label", "db.example.com/role"), Mark("condition", "Ready")),
            id="databases",
        ),
        pytest.param(
            "web",
            (Mark("condition", "example.com/upstream-reachable"), Mark("condition", "Ready")),
            id="web",
        ),
        pytest.param("elsewhere", (Mark("condition", "Ready"),), id="no-marker"),
    ],
)
def test_columns_of_a_namespace(namespace: str, columns: tuple[Mark, ...]) -> None:
    assert columns_of(load_examples(), namespace) == columns


@pytest.mark.parametrize(
    ("marker", "probe", "message"),
    [
        pytest.param("nope", "idle", "no example marker named nope", id="marker"),
        pytest.param(
            "game-server-idle", "nope", "marker game-server-idle has no probe nope", id="probe"
        ),
    ],
)
def test_find_probe_names_what_is_missing(marker: str, probe: str, message: str) -> None:
    with pytest.raises(KeyError, match=message):
        find_probe(load_examples(), marker, probe)


GAME = Timing(
    initial_delay_seconds=10,
    timeout_seconds=3,
    period_seconds=10,
    success_threshold=1,
    failure_threshold=3,
)
GATE = Timing(timeout_seconds=2, period_seconds=5, success_threshold=2, failure_threshold=3)


@pytest.mark.parametrize(
    ("timing", "state", "first", "text", "bound"),
    [
        pytest.param(GAME, F, False, "3 failures, every 10 s", 10 + 10 + 3 * 13 + 10, id="busy"),
        pytest.param(
            GAME,
            S,
            True,
            "1 success, every 10 s, after a 10 s initial delay",
            10 + 10 + 13 + 10,
            id="first-idle",
        ),
        pytest.param(GATE, S, False, "2 successes, every 5 s", 5 + 2 * 7 + 10, id="gate-open"),
        pytest.param(GATE, S, True, "2 successes, every 5 s", 5 + 2 * 7 + 10, id="no-delay"),
    ],
)
def test_pace_and_bound(
    timing: Timing, state: ProbeState, first: bool, text: str, bound: float
) -> None:
    assert pace_text(timing, state, first=first) == text
    assert decide_bound(timing, state) == bound
