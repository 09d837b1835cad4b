"""What the engine holds of a pod and its probes, read for `probemarker status`.

Stage: engine (pure values; no I/O). Input: a probe's state as the engine keeps it, the
pod's view, the wall clock's now. Output: `PodSeen` / `ProbeSeen` values, taken only
when someone asks (`Engine.inspect`), and the reason a probe is not running now
(`waiting_of`), which follows `decide.gate`'s order so that it says what the gate does.

Invariants: nothing here is kept between two questions; each value is a copy (frozen
dataclasses over immutable engine values), so reading it never changes what the
engine does next.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from probemarker.api.model import ProbeSpec, Timing
from probemarker.decide.decide import ThresholdState
from probemarker.identity.probes import ProbeKey
from probemarker.probe.outcome import Outcome
from probemarker.watch.pods import ContainerFacts, PodView
from probemarker.write.desired import DesiredPod

__all__ = ["LastRun", "PodSeen", "ProbeSeen", "Waiting", "waiting_of"]


@dataclass(frozen=True, slots=True)
class LastRun:
    """A probe's last run: when it started (wall-clock Unix seconds), how long its
    handler took (0 for a run decided without one: a container not running, a missing
    port), and its outcome."""

    at: float
    duration: float
    outcome: Outcome


class Waiting(enum.StrEnum):
    """Why a probe does not run now (None: it runs on its schedule)."""

    POD_TERMINATING = "PodTerminating"  # being deleted: probing stopped (docs/engine.md)
    POD_FINISHED = "PodFinished"  # Succeeded or Failed phase
    CONTAINER_MISSING = "ContainerMissing"  # containerName is not a container of the pod
    CONTAINER_NOT_CREATED = "ContainerNotCreated"  # no containerID in the status yet
    CONTAINER_NOT_STARTED = "ContainerNotStarted"  # its startup probe has not passed
    INITIAL_DELAY = "InitialDelay"  # initialDelaySeconds since its start not over yet
    COMMAND_HELD = "CommandHeld"  # the previous command may still run (a held exec)
    CANNOT_RUN = "CannotRun"  # a named port the container lacks, a kind not installed


@dataclass(frozen=True, slots=True)
class ProbeSeen:
    """One probe of one pod as the engine holds it. `due`: its next run on the engine's
    clock (monotonic seconds; None: not booked, e.g. while it runs); `running`: a run is
    in progress."""

    key: ProbeKey
    spec: ProbeSpec
    kind: str
    thresholds: ThresholdState
    last: LastRun | None = None
    due: float | None = None
    running: bool = False
    waiting: Waiting | None = None
    detail: str = ""  # the waiting reason in words
    unknown_runs: int = 0  # Unknown outcomes in a row (not counted towards thresholds)


@dataclass(frozen=True, slots=True)
class PodSeen:
    """A pod with its probes; `desired`: what the daemon wants it to show (None: it
    writes nothing to it, a terminating or finished pod)."""

    view: PodView
    probes: tuple[ProbeSeen, ...]
    desired: DesiredPod | None


def waiting_of(
    view: PodView,
    container: str,
    facts: ContainerFacts | None,
    timing: Timing,
    *,
    now: float,
    held: bool = False,
    blocked: str | None = None,
) -> tuple[Waiting | None, str]:
    """Why a probe of `container` does not run at `now` (wall-clock Unix seconds), and
    the reason in words; (None, "") when it runs. A container that exists but does not
    run is not a reason: such a run is Failed (docs/engine.md)."""
    if view.deleting:
        return Waiting.POD_TERMINATING, "the pod is being deleted: probing stopped"
    if view.terminal:
        return Waiting.POD_FINISHED, f"the pod's phase is {view.phase}: probing stopped"
    if facts is None:
        return Waiting.CONTAINER_MISSING, f"the pod has no container {container}"
    if not facts.container_id:
        return Waiting.CONTAINER_NOT_CREATED, f"container {container} has no containerID yet"
    if not facts.running:
        return None, ""
    if not facts.started:
        return Waiting.CONTAINER_NOT_STARTED, f"container {container} has not started yet"
    delay = timing.initial_delay_seconds
    if facts.started_at is not None and int(now - facts.started_at) < delay:
        left = max(0.0, facts.started_at + delay - now)
        return Waiting.INITIAL_DELAY, f"initialDelaySeconds {delay}: {left:.0f}s left"
    if held:
        return (
            Waiting.COMMAND_HELD,
            "the previous command may still run in the container: its periods are skipped",
        )
    if blocked is not None:
        return Waiting.CANNOT_RUN, blocked
    return None, ""
