"""Decide: when a probe may run, and what its outcomes add up to (kubelet semantics).

Stage: decide (pure; no I/O, time only through `now`). Inputs: the container's facts
from the pod status, the probe's `Timing`, and each run's `Outcome`. Outputs: a `Gate`
before a run, and after it a new `ThresholdState` plus the `Decision` to publish, if
any. Modelled on the kubelet's prober worker (pkg/kubelet/prober/worker.go, doProbe).

Gate (before a run), in the kubelet's order:
- the container is absent from the pod status, or has no containerID yet: WAIT
  (the kubelet waits for more information);
- it has a containerID but is not running: NOT_RUNNING; the run is a Failed outcome
  without an exec (`not_running`) and goes through the thresholds like any other
  (the kubelet sets Failure at once; thresholds are kept here so that a container
  caught between two states by a stale pod status needs `failureThreshold` runs);
- it runs but is not `started` (its startup probe has not passed): WAIT;
- less than `initialDelaySeconds` since `state.running.startedAt`: WAIT. Exactly at
  the delay it runs (as the kubelet, which skips while `int32(elapsed) < delay`).
  A running container without a readable startedAt runs, as the kubelet's zero
  time is long past.

Thresholds (after a run):
- Unknown changes nothing: neither counted nor a break in a run of identical outcomes.
- Identical consecutive results are counted; a different one restarts the count at 1.
- A result is published when its count reaches successThreshold / failureThreshold
  and (state, message) differs from what was last decided. Nothing is published
  before a threshold is met: a new probe shows nothing until then.
- Once a state is decided, an outcome of that same state with a new message is
  published at once, whatever the count: the state is not changing, only the text
  that explains it (the condition message follows the probe output, as Kruise's e2e
  tests expect), so there is nothing for a threshold to debounce. The same holds for
  a new `{{.Result}}` (the value a policy renders from the answer): it is the decided
  state's value, not a new state.
- A run that got no answer (a timeout, a refused connection, a container not
  running: `Outcome.answer` is None) never replaces the decided `{{.Result}}` within
  the same state: one transient would otherwise publish an empty value and the next
  answer the old one again (a flap of a label Services select on). When such a run
  decides a new state, its result is empty, as docs/api.md says of a probe that got
  no answer.
- A new container (containerID or restartCount changed, `observe`) resets the count
  but keeps the decided result. The kubelet resets readiness to its initial value on
  a new container; here that would flip labels and conditions on every restart and
  back once the new container passes, which is the flapping docs/design.md forbids. The
  new container's own outcomes re-decide after the thresholds, as for any change.
- A restarted daemon seeds the decided result from what the pod shows (`seed`),
  with empty counters, so the first runs change no state unless a threshold is met
  with another one. A new message of the same state is published as above; the
  writer holds it back for its message-refresh interval, which before its first
  write to a pod counts from the daemon's start (`write.restrict.message_due`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from probemarker.api.model import ProbeSpec, ProbeState, Timing
from probemarker.probe.outcome import Outcome, Result
from probemarker.probe.output import result_text
from probemarker.watch.pods import ContainerFacts

__all__ = [
    "Decision",
    "Gate",
    "Instance",
    "ThresholdState",
    "gate",
    "not_running",
    "observe",
    "result_of",
    "seed",
    "state_of",
    "step",
]

_STATE_OF = {Result.SUCCEEDED: ProbeState.SUCCEEDED, Result.FAILED: ProbeState.FAILED}


def state_of(result: Result) -> ProbeState | None:
    """The state a run's result decides towards; None for Unknown (never counted)."""
    return _STATE_OF.get(result)


@dataclass(frozen=True, slots=True)
class Instance:
    """One incarnation of a container: a restart changes one of the two."""

    container_id: str
    restart_count: int


@dataclass(frozen=True, slots=True)
class Decision:
    """A published result: what the pod should show for this probe.

    `result`: what `{{.Result}}` stands for (`probe.output.result_text` of the
    outcome's answer) when the probe's policies use it, "" when they do not (so an
    answer nobody shows publishes nothing); None when not known yet (seeded from the
    pod by a restarted daemon: the values the pod shows are kept until a run)."""

    state: ProbeState
    message: str
    result: str | None = ""


@dataclass(frozen=True, slots=True)
class ThresholdState:
    """One probe's counters: the last counted result, its run length, what was decided."""

    instance: Instance | None = None
    last: Result | None = None
    run: int = 0
    decided: Decision | None = None


class Gate(enum.Enum):
    WAIT = "wait"  # do not run now; nothing to record
    RUN = "run"  # run the probe
    NOT_RUNNING = "not_running"  # do not run; record `not_running(...)` as the outcome


def gate(facts: ContainerFacts | None, timing: Timing, *, now: float) -> Gate:
    """Whether a probe may run now (`now`: wall-clock Unix seconds); see the module."""
    if facts is None or not facts.container_id:
        return Gate.WAIT
    if not facts.running:
        return Gate.NOT_RUNNING
    if not facts.started:
        return Gate.WAIT
    # int() truncates towards zero like the kubelet's int32(...Seconds()): a start
    # stamped a fraction of a second "in the future" does not hold a probe back.
    if facts.started_at is not None and int(now - facts.started_at) < timing.initial_delay_seconds:
        return Gate.WAIT
    return Gate.RUN


def not_running(container: str) -> Outcome:
    """The outcome of a run whose container is not running (docs/engine.md: Failed)."""
    return Outcome.failed(f"container {container} is not running")


def observe(state: ThresholdState, facts: ContainerFacts) -> ThresholdState:
    """`state` for the container incarnation in `facts`: counters reset on a new one."""
    instance = Instance(facts.container_id, facts.restart_count)
    if instance == state.instance:
        return state
    return replace(state, instance=instance, last=None, run=0)


def step(
    state: ThresholdState, outcome: Outcome, timing: Timing, *, result: str | None = ""
) -> tuple[ThresholdState, Decision | None]:
    """Count one run's outcome; return the new state and the decision to publish, if
    any. `result`: the run's `{{.Result}}` ("" for a probe whose policies do not use
    it; None for a run that got no answer, `result_of`); a new one in the decided state
    is published at once, as a new message is. A run with no answer keeps the decided
    result in its state, and renders "" when it decides a new one."""
    probe_state = state_of(outcome.result)
    if probe_state is None:  # Unknown: thrown away, as the kubelet throws away errors
        return state, None
    run = state.run + 1 if state.last is outcome.result else 1
    state = replace(state, last=outcome.result, run=run)
    decided = state.decided
    same_state = decided is not None and decided.state is probe_state
    if result is None:  # no answer: the value of the state stands, or there is none
        result = decided.result if decided is not None and same_state else ""
    decision = Decision(probe_state, outcome.message, result)
    if decision == decided:
        return state, None
    threshold = (
        timing.success_threshold
        if probe_state is ProbeState.SUCCEEDED
        else timing.failure_threshold
    )
    if same_state or run >= threshold:
        return replace(state, decided=decision), decision
    return state, None


def result_of(spec: ProbeSpec, outcome: Outcome) -> str | None:
    """What `{{.Result}}` stands for after `outcome`: `probe.output.result_text` of its
    answer when `spec`'s policies use it, "" when they do not (`Decision.result`); None
    when they do and the run got no answer (`step` then keeps the state's value)."""
    if not spec.uses_result:
        return ""
    return None if outcome.answer is None else result_text(outcome.answer)


def seed(decision: Decision) -> ThresholdState:
    """The state of a probe whose pod already shows `decision` (a restarted daemon)."""
    return ThresholdState(decided=decision)
