"""The scenario player, and the `Show` every change of the demo goes through.

Stage: demo control (writes the containers' files; reads time from the monotonic
clock). Input: the steps (scenario.py), the examples, the board fed by the runner's
watches. Output: notes and frames on the screen, and `Played`: for every expectation,
how long after its step's start the pod showed it (or that it did not).

A step writes its flips, then waits until every pod it names shows the marks its probe
writes for the expected state (and, for a pod whose readiness gate that probe's
condition is, the Ready condition the kubelet derives from it), at most the longest
`bound` of its expectations. A step with `wait=False` is waited for beside the next
ones. The player waits on the board's changes, never on fixed sleeps.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import anyio

from probemarker.api.model import ProbeState, Timing
from probemarker.demo.containers import ContainerFiles
from probemarker.demo.examples import (
    READY,
    Example,
    Mark,
    answered,
    decide_bound,
    find_probe,
    marks_for,
    pace_text,
)
from probemarker.demo.model import Board, Snapshot, changes
from probemarker.demo.scenario import Expect, Step, pod_named
from probemarker.demo.screen import Screen
from probemarker.demo.view import Frame, Seen, change_line, marks_text, stamp, step_lines

FRESH_SECONDS = 3.0  # a changed cell stays bold this long

Bound = Callable[[Timing, ProbeState], float]


@dataclass(slots=True)
class Show:
    """The board, the screen and the clock of one run."""

    board: Board
    screen: Screen
    started: float = field(default_factory=time.monotonic)
    headline: str = "starting"
    waiting: tuple[str, ...] = ()
    footer: str = "Ctrl-C stops the demo and cleans up"
    recent: list[str] = field(default_factory=list)
    _last: Snapshot = field(default_factory=dict)
    _fresh: dict[tuple[str, str], float] = field(default_factory=dict)
    _changed: anyio.Event = field(default_factory=anyio.Event)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def note(self, text: str) -> None:
        self.screen.note(text)
        self.recent = [*self.recent[-39:], text]
        self.redraw()

    def update(self) -> None:
        """The board changed: note each change, wake the waiters, redraw."""
        now, snapshot = self.elapsed(), self.board.snapshot()
        for change in changes(self._last, snapshot, self.board.order):
            self.screen.note(change_line(now, change))
            self.recent = [*self.recent[-39:], change_line(now, change)]
            self._fresh[(change.pod, change.what)] = now
        self._last = snapshot
        self._changed.set()
        self._changed = anyio.Event()
        self.redraw()

    @property
    def snapshot(self) -> Snapshot:
        return self._last

    async def wait_change(self, within: float) -> None:
        with anyio.move_on_after(max(0.0, within)):
            await self._changed.wait()

    def redraw(self) -> None:
        now = self.elapsed()
        fresh = frozenset(k for k, at in self._fresh.items() if now - at < FRESH_SECONDS)
        recent = tuple(self.recent)
        frame = Frame(now, self.headline, self.waiting, self._last, recent, fresh, self.footer)
        self.screen.show(frame)


@dataclass(frozen=True, slots=True)
class Wanted:
    """An expectation, resolved: the marks to see on the pod, and within how long."""

    expect: Expect
    marks: Mapping[Mark, str]
    bound: float
    pace: str  # how it is decided; says so when a value is the probe's answer

    def text(self) -> str:
        return f"{self.expect.pod} {marks_text(self.marks)} ({self.pace})"

    def met(self, snapshot: Snapshot) -> bool:
        state = snapshot.get(self.expect.pod)
        return state is not None and all(state.marks.get(m) == v for m, v in self.marks.items())


def resolve(examples: Sequence[Example], expect: Expect, bound: Bound, *, first: bool) -> Wanted:
    probe = find_probe(examples, expect.marker, expect.probe)
    marks = marks_for(probe, expect.state, answer=expect.answer)
    if probe.condition_type and probe.condition_type == pod_named(expect.pod).readiness_gate:
        # The kubelet's Ready follows the pod's only readiness gate.
        marks[Mark("condition", READY)] = marks[Mark("condition", probe.condition_type)]
    pace = pace_text(probe.timing, expect.state, first=first)
    if expect.answer is not None and answered(probe, expect.state):
        pace = f"the probe's answer, {pace}"
    return Wanted(expect, marks, bound(probe.timing, expect.state), pace)


@dataclass(slots=True)
class Played:
    seen: list[Seen] = field(default_factory=list)
    step: int = 0  # the last step started (1-based)
    missed: str | None = None  # what was not seen in time


@dataclass(slots=True)
class _Pending:
    """The expectations of the steps still waiting, for the screen's "waiting for"."""

    steps: dict[int, list[Wanted]] = field(default_factory=dict)

    def texts(self) -> tuple[str, ...]:
        return tuple(w.text() for wanted in self.steps.values() for w in wanted)


async def play(
    show: Show,
    files: ContainerFiles,
    examples: Sequence[Example],
    steps: Sequence[Step],
    played: Played,
    *,
    bound: Bound = decide_bound,
) -> None:
    """Play `steps` in order; on a step not seen in time, stop there."""
    pending = _Pending()
    async with anyio.create_task_group() as group:
        for number, step in enumerate(steps, start=1):
            played.step = number
            start = show.elapsed()
            show.headline = f"step {number}/{len(steps)}: {step.title}"
            for line in step_lines(start, number, len(steps), step):
                show.note(line)
            for flip in step.flips:
                files.write(pod_named(flip.pod), flip.path, flip.text)
            first = not step.flips
            pending.steps[number] = [resolve(examples, e, bound, first=first) for e in step.expects]
            if step.wait:
                if not await _wait_step(show, played, pending, number, start):
                    group.cancel_scope.cancel()
                    return
            else:
                group.start_soon(_wait_or_stop, show, played, pending, number, start, group)
    show.headline = "the scenario is over"


async def _wait_or_stop(
    show: Show,
    played: Played,
    pending: _Pending,
    number: int,
    start: float,
    group: anyio.abc.TaskGroup,
) -> None:
    if not await _wait_step(show, played, pending, number, start):
        group.cancel_scope.cancel()


async def _wait_step(
    show: Show, played: Played, pending: _Pending, number: int, start: float
) -> bool:
    """Until step `number` is seen (True) or its bound has passed (False)."""
    wanted = pending.steps[number]
    deadline = start + max((w.bound for w in wanted), default=0.0)
    try:
        while True:
            for item in [w for w in wanted if w.met(show.snapshot)]:
                wanted.remove(item)
                seen = Seen(
                    number,
                    item.expect.pod,
                    marks_text(item.marks),
                    item.pace,
                    show.elapsed() - start,
                )
                played.seen.append(seen)
            show.waiting = pending.texts()
            if not wanted:
                took = show.elapsed() - start
                show.note(f"{stamp(show.elapsed())} step {number} done in {took:.1f} s")
                return True
            if show.elapsed() >= deadline:
                played.missed = "; ".join(w.text() for w in wanted)
                show.note(
                    f"{stamp(show.elapsed())} step {number}: not seen within "
                    f"{deadline - start:.0f} s: {played.missed}"
                )
                return False
            show.redraw()
            await show.wait_change(deadline - show.elapsed())
    finally:
        # Not seen: the bound passed, or the demo was stopped first.
        played.seen += [
            Seen(number, w.expect.pod, marks_text(w.marks), w.pace, None) for w in wanted
        ]
        del pending.steps[number]
        show.waiting = pending.texts()
