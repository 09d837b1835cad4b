"""The engine's dials: the settings it runs with and the counters it keeps.

Stage: engine (pure values; no I/O). Input: the daemon's flags, turned into
`EngineSettings` by daemon/app.py (`engine_settings`), checked when made. Output: the
settings the hub (engine/engine.py) reads, and `EngineStats`, the counters the hub adds
to and /metrics reads (observe/metrics.py), never reset.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from probemarker.kit.histogram import Histogram
from probemarker.schedule.timing import step_problem

__all__ = ["EngineSettings", "EngineStats"]


@dataclass(frozen=True, slots=True)
class EngineSettings:
    max_concurrent: int = 64  # probe runs at once on this node
    tick: float = 0.05  # the timer wheel's resolution, seconds
    # A run that could start only more than this after its slot is counted late; a wait
    # for a free slot under the cap is counted apart (Dispatcher.stats.slot_waits).
    late_after: float = 1.0
    cleanup_delay: float = 30.0  # seconds from a marker's deletion to its clean-up
    # InvalidResultValue Warnings for keys whose answer is a new invalid value every run
    # are raised at most once per pod per this many seconds (--message-refresh-seconds).
    warning_refresh: float = 10.0
    # Probes' phases lie on steps of this many seconds, so runs come due in groups
    # (schedule/timing.py; --probe-phase-step-seconds); 0: each probe a phase of its own.
    phase_step: float = 0.25

    def __post_init__(self) -> None:
        if self.max_concurrent < 1 or self.tick <= 0 or self.late_after <= 0:
            raise ValueError("engine needs max_concurrent >= 1, tick > 0, late_after > 0")
        if self.cleanup_delay < 0 or self.warning_refresh < 0:
            raise ValueError("engine needs cleanup_delay >= 0 and warning_refresh >= 0")
        if problem := step_problem(self.phase_step):
            raise ValueError(f"engine's phase_step {problem}")


@dataclass(slots=True)
class EngineStats:
    runs: Counter[tuple[str, str]] = field(default_factory=Counter)  # (handler, result)
    # How long handlers took, by handler kind: runs that reached a handler only (not a
    # container not running, a missing port, a handler this build lacks).
    durations: defaultdict[str, Histogram] = field(default_factory=lambda: defaultdict(Histogram))
    transitions: Counter[str] = field(default_factory=Counter)  # by new state
    missed_slots: int = 0  # periods skipped because a run overran or started late
    # periods skipped because the probe's previous command may still run (a held exec)
    periods_skipped: int = 0
    dropped_results: int = 0  # results of runs whose probe changed or went away
    # values rendered from {{.Result}} that could not go on a pod, by kind (label,
    # annotation): each reported once per pod, key and value (InvalidResultValue)
    invalid_values: Counter[str] = field(default_factory=Counter)
    # new invalid values of keys reported already, not reported: the pod's last such
    # Warning was raised less than `warning_refresh` seconds before (answers that
    # change every run)
    invalid_values_kept: int = 0
