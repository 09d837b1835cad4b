"""decide: the gate before a run and the kubelet's thresholds after it, with exact counts."""

from __future__ import annotations

import pytest

from probemarker.api.model import ExecAction, MarkerPolicy, ProbeSpec, ProbeState, Timing
from probemarker.decide.decide import (
    Decision,
    Gate,
    Instance,
    ThresholdState,
    gate,
    not_running,
    observe,
    result_of,
    seed,
    step,
)
from probemarker.probe.outcome import Outcome, Result
from probemarker.watch.pods import ContainerFacts

S, F = ProbeState.SUCCEEDED, ProbeState.FAILED


def outcome(token: str) -> Outcome:
    """`S`, `F`, `U`, or with a message: `S:idle`. Default messages: ok / bad."""
    kind, _, message = token.partition(":")
    if kind == "U":
        return Outcome.unknown("api server down")
    if kind == "S":
        return Outcome.succeeded(message or "ok")
    return Outcome.failed(message or "bad")


def published(decision: Decision | None) -> str | None:
    if decision is None:
        return None
    default = "ok" if decision.state is S else "bad"
    letter = "S" if decision.state is S else "F"
    return letter if decision.message == default else f"{letter}:{decision.message}"


def feed(
    tokens: str, timing: Timing, start: ThresholdState | None = None
) -> tuple[ThresholdState, list[str | None]]:
    state, out = start or ThresholdState(), []
    for token in tokens.split():
        state, decision = step(state, outcome(token), timing)
        out.append(published(decision))
    return state, out


def timing(success: int, failure: int) -> Timing:
    return Timing(success_threshold=success, failure_threshold=failure)


N = None  # "nothing published" in the tables below

THRESHOLD_CASES = [
    # thresholds 1/1: every change is published at once, repeats are not
    pytest.param(1, 1, "S", ["S"], id="1/1-success"),
    pytest.param(1, 1, "F", ["F"], id="1/1-failure"),
    pytest.param(1, 1, "S S F F S", ["S", N, "F", N, "S"], id="1/1-flips"),
    # the kubelet's defaults: 1 success, 3 failures
    pytest.param(1, 3, "F F F F", [N, N, "F", N], id="1/3-three-failures"),
    pytest.param(1, 3, "S F F S F F F", ["S", N, N, N, N, N, "F"], id="1/3-success-breaks-run"),
    # 3/3
    pytest.param(3, 3, "S S S S", [N, N, "S", N], id="3/3-success"),
    pytest.param(3, 3, "F F F", [N, N, "F"], id="3/3-failure"),
    pytest.param(3, 3, "S S S F F F", [N, N, "S", N, N, "F"], id="3/3-flip"),
    pytest.param(3, 3, "S S F S S", [N, N, N, N, N], id="3/3-interrupted"),
    # 2/5
    pytest.param(2, 5, "S S", [N, "S"], id="2/5-success"),
    pytest.param(2, 5, "F F F F F", [N, N, N, N, "F"], id="2/5-failure"),
    pytest.param(2, 5, "S S F F F F F S S", [N, "S", N, N, N, N, "F", N, "S"], id="2/5-round"),
    pytest.param(2, 5, "S S F F F F S", [N, "S", N, N, N, N, N], id="2/5-four-failures-only"),
    # alternating outcomes never decide (thresholds above 1)
    pytest.param(2, 2, "S F S F S F S F", [N] * 8, id="2/2-alternating"),
    pytest.param(3, 3, "F S F S F S", [N] * 6, id="3/3-alternating"),
    # Unknown: thrown away, neither counted nor breaking a run
    pytest.param(1, 1, "U U U", [N, N, N], id="unknown-alone"),
    pytest.param(3, 3, "F U F U U F", [N, N, N, N, N, "F"], id="unknown-between-failures"),
    pytest.param(2, 2, "S U S", [N, N, "S"], id="unknown-between-successes"),
    pytest.param(1, 1, "S U F", ["S", N, "F"], id="unknown-publishes-nothing"),
    pytest.param(2, 2, "S U F U S", [N, N, N, N, N], id="unknown-does-not-join-a-run"),
    pytest.param(1, 3, "S F F U U U", ["S", N, N, N, N, N], id="outage-never-fails"),
    # message changes: at once in the decided state, never before a decision
    pytest.param(1, 1, "S:a S:b S:b", ["S:a", "S:b", N], id="message-only-change"),
    pytest.param(3, 3, "S:a S:b S:c", [N, N, "S:c"], id="message-of-the-deciding-run"),
    pytest.param(3, 3, "S S S S:idle", [N, N, "S", "S:idle"], id="message-at-once-after"),
    pytest.param(
        3, 3, "F F F S F:other", [N, N, "F", N, "F:other"], id="message-while-state-holds"
    ),
    pytest.param(1, 3, "S F:x F:y", ["S", N, N], id="message-changes-count-as-same-result"),
    pytest.param(1, 3, "S F:x F:y F:z", ["S", N, N, "F:z"], id="failure-message-of-third"),
]


@pytest.mark.parametrize(("success", "failure", "tokens", "expected"), THRESHOLD_CASES)
def test_thresholds(success: int, failure: int, tokens: str, expected: list[str | None]) -> None:
    _, out = feed(tokens, timing(success, failure))
    assert out == expected


def test_unknown_leaves_the_state_untouched() -> None:
    state, _ = feed("F F", timing(3, 3))
    after, decision = step(state, outcome("U"), timing(3, 3))
    assert after is state
    assert decision is None


def test_counters() -> None:
    state, _ = feed("S S F F", timing(3, 3))
    assert (state.last, state.run, state.decided) == (Result.FAILED, 2, None)
    state, _ = feed("F", timing(3, 3), state)
    assert (state.last, state.run, state.decided) == (Result.FAILED, 3, Decision(F, "bad"))


def test_a_changed_threshold_applies_from_the_next_run() -> None:
    state, out = feed("F F", timing(1, 5))
    assert out == [N, N]
    _, out = feed("F", timing(1, 3), state)  # the marker now says 3: the run of 3 is met
    assert out == ["F"]


# --- container restarts ---------------------------------------------------------------

RUNNING = ContainerFacts("server", "containerd://a", 0, running=True, started=True, started_at=0)


def test_first_observation_records_the_instance() -> None:
    state = observe(ThresholdState(), RUNNING)
    assert state == ThresholdState(instance=Instance("containerd://a", 0))
    assert observe(state, RUNNING) is state


@pytest.mark.parametrize(
    "restarted",
    [
        pytest.param(ContainerFacts("server", "containerd://b", 1, running=True), id="new-id"),
        pytest.param(ContainerFacts("server", "containerd://a", 1, running=True), id="count-only"),
        pytest.param(ContainerFacts("server", "containerd://b", 0, running=True), id="id-only"),
    ],
)
def test_restart_resets_counters_and_keeps_the_decision(restarted: ContainerFacts) -> None:
    t = timing(1, 3)
    state, out = feed("S F F", t, observe(ThresholdState(), RUNNING))
    assert out == ["S", N, N]
    state = observe(state, restarted)
    assert (state.last, state.run, state.decided) == (None, 0, Decision(S, "ok"))
    assert state.instance == Instance(restarted.container_id, restarted.restart_count)
    _, out = feed("F F F", t, state)  # the old container's two failures do not count
    assert out == [N, N, "F"]


def test_restart_keeps_a_decided_failure_until_the_new_container_succeeds() -> None:
    t = timing(2, 1)
    state, out = feed("F", t, observe(ThresholdState(), RUNNING))
    assert out == ["F"]
    state = observe(state, ContainerFacts("server", "containerd://b", 1, running=True))
    _, out = feed("S S", t, state)
    assert out == [N, "S"]


# --- a restarted daemon ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("decision", "tokens", "expected"),
    [
        pytest.param(Decision(S, "ok"), "S S", [N, N], id="same-result-no-write"),
        pytest.param(Decision(S, "ok"), "S:idle", ["S:idle"], id="new-message"),
        pytest.param(Decision(S, "ok"), "F F F", [N, N, "F"], id="flip-after-threshold"),
        pytest.param(Decision(F, "bad"), "F U F", [N, N, N], id="failed-stays"),
        pytest.param(Decision(F, "bad"), "S", ["S"], id="recovers"),
    ],
)
def test_seed(decision: Decision, tokens: str, expected: list[str | None]) -> None:
    state = seed(decision)
    assert state == ThresholdState(decided=decision)
    _, out = feed(tokens, timing(1, 3), state)
    assert out == expected


# --- the gate ---------------------------------------------------------------------------

STARTED_AT = 1_000.0


def facts(**changes: object) -> ContainerFacts:
    base: dict[str, object] = {
        "name": "server",
        "container_id": "containerd://a",
        "running": True,
        "started": True,
        "started_at": STARTED_AT,
    }
    base.update(changes)
    return ContainerFacts(**base)  # type: ignore[arg-type]


GATE_CASES = [
    pytest.param(None, 0, 2_000.0, Gate.WAIT, id="container-absent-from-status"),
    pytest.param(facts(container_id="", running=False), 0, 2_000.0, Gate.WAIT, id="no-id-yet"),
    pytest.param(facts(container_id=""), 0, 2_000.0, Gate.WAIT, id="no-id-but-running"),
    pytest.param(facts(running=False, started=False), 0, 2_000.0, Gate.NOT_RUNNING, id="stopped"),
    pytest.param(
        facts(running=False, started=False), 30, 1_001.0, Gate.NOT_RUNNING, id="stopped-in-delay"
    ),
    pytest.param(facts(started=False), 0, 2_000.0, Gate.WAIT, id="not-started"),
    pytest.param(facts(), 0, STARTED_AT, Gate.RUN, id="no-delay-at-start"),
    pytest.param(facts(), 0, STARTED_AT - 0.5, Gate.RUN, id="no-delay-start-stamp-ahead"),
    pytest.param(facts(), 5, STARTED_AT + 4.999, Gate.WAIT, id="just-before-the-delay"),
    pytest.param(facts(), 5, STARTED_AT + 5, Gate.RUN, id="exactly-at-the-delay"),
    pytest.param(facts(), 5, STARTED_AT + 60, Gate.RUN, id="long-after-the-delay"),
    pytest.param(facts(), 5, STARTED_AT, Gate.WAIT, id="delay-at-start"),
    pytest.param(facts(started_at=None), 5, 0.0, Gate.RUN, id="unknown-start-time"),
]


@pytest.mark.parametrize(("container", "delay", "now", "expected"), GATE_CASES)
def test_gate(container: ContainerFacts | None, delay: int, now: float, expected: Gate) -> None:
    assert gate(container, Timing(initial_delay_seconds=delay), now=now) is expected


def test_not_running_outcome() -> None:
    assert not_running("server") == Outcome.failed("container server is not running")
    _, decision = step(ThresholdState(), not_running("server"), timing(1, 1))
    assert decision == Decision(F, "container server is not running")


@pytest.mark.parametrize(
    ("results", "published"),
    [
        pytest.param(["a", "a", "a"], ["a", None, None], id="same-result-once"),
        pytest.param(["a", "b", "b", "a"], ["a", "b", None, "a"], id="new-result-at-once"),
        pytest.param(["", ""], ["", None], id="empty-result"),
    ],
)
def test_a_new_result_in_the_decided_state_is_published_at_once(
    results: list[str], published: list[str | None]
) -> None:
    """A `{{.Result}}` that changes changes the pod's values, not its state: no
    threshold holds it back (failureThreshold 3 would hold a new state)."""
    state = ThresholdState()
    seen: list[str | None] = []
    for value in results:
        state, decision = step(state, Outcome.succeeded("ok"), timing(1, 3), result=value)
        seen.append(None if decision is None else decision.result)
    assert seen == published


def test_a_seeded_decision_with_an_unknown_result_publishes_the_first_run() -> None:
    """A restarted daemon does not know the result the pod shows (None): its first run
    of the same state is published; the writer finds nothing to change if it renders
    what the pod shows."""
    state = seed(Decision(ProbeState.SUCCEEDED, "ok", None))
    state, decision = step(state, Outcome.succeeded("ok"), timing(1, 3), result="primary")
    assert decision == Decision(ProbeState.SUCCEEDED, "ok", "primary")
    state, decision = step(state, Outcome.failed("down"), timing(1, 3), result="x")
    assert decision is None  # a new state still waits for its threshold


# A run that got no answer: `result_of` gives None (issue 29, defect 2).
ANSWERED_REPLICA = Outcome.failed("replica", answer="replica")
TIMED_OUT = Outcome.failed("command timed out after 1s")
ANSWERED_PRIMARY = Outcome.succeeded("primary", answer="primary")


@pytest.mark.parametrize(
    ("runs", "results"),
    [
        pytest.param(
            [ANSWERED_REPLICA, TIMED_OUT, ANSWERED_REPLICA],
            ["replica", "replica", "replica"],
            id="a-timeout-within-the-state-keeps-the-value",
        ),
        pytest.param(
            [ANSWERED_REPLICA, TIMED_OUT, TIMED_OUT, TIMED_OUT],
            ["replica"] * 4,
            id="any-number-of-timeouts-keep-it",
        ),
        pytest.param(
            [ANSWERED_PRIMARY, TIMED_OUT],
            ["primary", ""],
            id="a-new-state-decided-with-no-answer-renders-empty",
        ),
        pytest.param(
            [TIMED_OUT, ANSWERED_REPLICA],
            ["", "replica"],
            id="a-first-decision-with-no-answer-renders-empty",
        ),
    ],
)
def test_a_run_with_no_answer_never_replaces_the_value_within_its_state(
    runs: list[Outcome], results: list[str]
) -> None:
    """The database example of docs/api.md: `role: "{{.Result}}"` in both states, an
    answer `replica` with exit 1; one timed-out run must not publish an empty role
    (before: `replica`, `""`, `replica`: two writes and a flap)."""
    spec = probe_spec(uses_result=True)
    state = ThresholdState()
    seen = []
    for outcome in runs:
        state, _ = step(state, outcome, timing(1, 1), result=result_of(spec, outcome))
        assert state.decided is not None
        seen.append(state.decided.result)
    assert seen == results


def test_result_of_tells_no_answer_from_an_empty_one() -> None:
    spec = probe_spec(uses_result=True)
    assert result_of(spec, Outcome.failed("timed out")) is None
    assert result_of(spec, Outcome.failed("exit 1", answer="")) == ""
    assert result_of(spec, Outcome.succeeded(answer=" |a| \nb")) == "a"
    assert result_of(probe_spec(uses_result=False), Outcome.failed("timed out")) == ""


def probe_spec(*, uses_result: bool) -> ProbeSpec:
    value = "{{.Result}}" if uses_result else "static"
    return ProbeSpec(
        name="role",
        container_name="db",
        handler=ExecAction(("role",)),
        timing=Timing(),
        policies=(
            MarkerPolicy(ProbeState.SUCCEEDED, labels={"db/role": value}),
            MarkerPolicy(ProbeState.FAILED, labels={"db/role": value}),
        ),
    )
