"""Text for the demo: plain lines for a pipe, a table for a terminal, and the summary.

Stage: demo view (pure: values in, text out; no I/O, no clock). Inputs: a `Layout`
(one section per namespace: its marker, its columns, which value is which state),
`Snapshot`s and `Change`s from model.py, and the `Frame` the runner assembles. Output:
lines. A line is a list of `Segment`s (text and style names) until `paint` turns it
into text, with ANSI colours or without; `fit` cuts a line to a width first, so that
escape codes never count towards it and a cut never splits one.

Plain lines (a pipe): one line per change, `  12.3s games/game-0 label gameserver-idle:
true -> false`, and one per step; no colours, no cursor movement.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from probemarker.api.model import ExecAction, HTTPGetAction, ProbeState
from probemarker.demo.examples import READY, Example, Mark, answered, marks_for
from probemarker.demo.model import EVENT, Change, PodState, Snapshot
from probemarker.demo.scenario import DemoPod, Step

ABSENT = "-"
_SGR = {"ok": "32", "bad": "33", "down": "31", "dim": "2", "bold": "1", "title": "1;36"}


@dataclass(frozen=True, slots=True)
class Segment:
    text: str
    style: tuple[str, ...] = ()


Line = list[Segment]


def paint(line: Sequence[Segment], *, colour: bool) -> str:
    """The text of `line`, with ANSI SGR codes around styled segments when `colour`."""
    if not colour:
        return "".join(s.text for s in line)
    out = []
    for seg in line:
        codes = ";".join(_SGR[name] for name in seg.style if name in _SGR)
        out.append(f"\x1b[{codes}m{seg.text}\x1b[0m" if codes and seg.text else seg.text)
    return "".join(out)


def fit(line: Sequence[Segment], width: int) -> Line:
    """`line` cut to `width` characters, the last one an ellipsis when cut."""
    total = sum(len(s.text) for s in line)
    if total <= width:
        return list(line)
    out: Line = []
    room = max(0, width - 1)
    for seg in line:
        if room <= 0:
            break
        out.append(Segment(seg.text[:room], seg.style))
        room -= len(out[-1].text)
    out.append(Segment("…"))
    return out


# -- layout --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Section:
    """One namespace: its marker's title line, its columns and its pods."""

    namespace: str
    title: str
    columns: tuple[Mark, ...]
    pods: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Layout:
    sections: tuple[Section, ...]
    # (mark, value) -> the probe state that writes it; colours the cell.
    states: Mapping[tuple[Mark, str], ProbeState] = field(default_factory=dict)
    # mark -> the probe state whose value for it is the probe's answer ({{.Result}})
    answers: Mapping[Mark, ProbeState] = field(default_factory=dict)


def describe_probe(example: Example) -> str:
    """`exec /home/game/idle.sh, every 10 s` for each probe of the marker, and each
    value it writes from its answer: `label db.example.com/role = "{{.Result}}", the
    probe's answer`."""
    parts = []
    for probe in example.marker.probes:
        handler = probe.handler
        if isinstance(handler, ExecAction):
            what = "exec " + " ".join(handler.command)
        elif isinstance(handler, HTTPGetAction):
            what = f"httpGet {handler.path} on port {handler.port}"
        else:
            what = type(handler).__name__
        parts.append(f"{what}, every {probe.timing.period_seconds} s")
        for state in (ProbeState.SUCCEEDED, ProbeState.FAILED):
            templates = marks_for(probe, state)
            parts += [
                f'{mark} = "{templates[mark]}", the probe\'s answer'
                for mark in sorted(answered(probe, state))
            ]
    return "; ".join(parts)


def build_layout(
    examples: Sequence[Example], pods: Sequence[DemoPod], columns: Mapping[str, tuple[Mark, ...]]
) -> Layout:
    sections = []
    states: dict[tuple[Mark, str], ProbeState] = {}
    answers: dict[Mark, ProbeState] = {}
    for example in examples:
        sections.append(
            Section(
                namespace=example.namespace,
                title=f"{example.namespace}: {example.name} ({example.file}): "
                f"{describe_probe(example)}",
                columns=columns[example.namespace],
                pods=tuple(p.name for p in pods if p.namespace == example.namespace),
            )
        )
        for probe in example.marker.probes:
            for state in (ProbeState.SUCCEEDED, ProbeState.FAILED):
                states.update(dict.fromkeys(marks_for(probe, state).items(), state))
                answers.update(dict.fromkeys(answered(probe, state), state))
    return Layout(tuple(sections), states, answers)


def _value_style(layout: Layout, mark: Mark, value: str | None) -> tuple[str, ...]:
    if value is None:
        return ("dim",)
    if mark == Mark("condition", READY):
        return ("ok",) if value == "True" else ("down",)
    state = layout.states.get((mark, value)) or layout.answers.get(mark)
    if state is ProbeState.SUCCEEDED:
        return ("ok",)
    return ("bad",) if state is ProbeState.FAILED else ()


def header_text(mark: Mark) -> str:
    """A column's header: the key's name without its prefix (`db.example.com/role`: role)."""
    return mark.key.rsplit("/", 1)[-1]


# -- plain lines ---------------------------------------------------------------------


def stamp(at: float) -> str:
    return f"{at:7.1f}s"


def change_line(at: float, change: Change) -> str:
    if change.what == EVENT:
        return f"{stamp(at)} {change.pod} event {change.new or ABSENT}"
    return (
        f"{stamp(at)} {change.pod} {change.what}: {change.old or ABSENT} -> {change.new or ABSENT}"
    )


def step_lines(at: float, number: int, total: int, step: Step) -> list[str]:
    lines = [f"{stamp(at)} step {number}/{total}: {step.title}"]
    lines.extend(f"{stamp(at)}   write {flip}" for flip in step.flips)
    return lines


# -- the live table ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Frame:
    """What the terminal shows at one moment."""

    elapsed: float
    headline: str  # the step being played
    waiting: tuple[str, ...]  # what that step still waits for
    snapshot: Snapshot
    recent: tuple[str, ...]  # the last plain lines
    fresh: frozenset[tuple[str, str]] = frozenset()  # (pod, what) changed just now
    footer: str = "Ctrl-C stops the demo and cleans up"


def _widths(section: Section, snapshot: Snapshot) -> list[int]:
    widths = [max([3, *(len(p) for p in section.pods)])]
    for mark in section.columns:
        values = [
            len(snapshot.get(f"{section.namespace}/{p}", PodState()).marks.get(mark, ABSENT))
            for p in section.pods
        ]
        widths.append(max([len(header_text(mark)), *values]))
    return widths


def _section_lines(layout: Layout, section: Section, frame: Frame) -> list[Line]:
    widths = _widths(section, frame.snapshot)
    heads = ["POD", *(header_text(m) for m in section.columns), "LAST EVENT"]
    head: Line = [Segment("  ")]
    for text, width in zip(heads, [*widths, 0], strict=True):
        head.append(Segment(text.ljust(width) + ("  " if width else ""), ("bold",)))
    lines: list[Line] = [[Segment(section.title, ("title",))], head]
    for name in section.pods:
        key = f"{section.namespace}/{name}"
        state = frame.snapshot.get(key, PodState())
        row: Line = [Segment("  " + name.ljust(widths[0]) + "  ")]
        for mark, width in zip(section.columns, widths[1:], strict=True):
            value = state.marks.get(mark)
            style = _value_style(layout, mark, value)
            if (key, str(mark)) in frame.fresh:
                style = (*style, "bold")
            row += [Segment((value or ABSENT).ljust(width), style), Segment("  ")]
        fresh = (key, EVENT) in frame.fresh
        row.append(Segment(state.event or ABSENT, ("bold",) if fresh else ("dim",)))
        lines.append(row)
    return lines


def render_frame(layout: Layout, frame: Frame, *, width: int, height: int) -> list[Line]:
    """The live table: a headline, one block per namespace, then the latest changes;
    at most `height` lines (the oldest changes go first) of at most `width` characters."""
    lines: list[Line] = [
        [
            Segment("probemarker demo", ("title",)),
            Segment(f"  {frame.elapsed:5.1f} s  "),
            Segment(frame.headline, ("bold",)),
        ]
    ]
    lines += [[Segment(f"  waiting for {text}", ("dim",))] for text in frame.waiting]
    for section in layout.sections:
        lines.append([])
        lines += _section_lines(layout, section, frame)
    footer: Line = [Segment(frame.footer, ("dim",))]
    room = max(0, height - len(lines) - 3)
    recent = list(frame.recent[-room:]) if room else []
    lines.append([])
    lines += [[Segment(text)] for text in recent]
    lines += [[], footer]
    return [fit(line, width) for line in lines[: max(1, height)]]


# -- the summary ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Seen:
    """One expectation of a step: what it wanted on which pod, and when it came."""

    step: int  # 1-based
    pod: str
    marks: str  # `gameserver-idle=false, controller.kubernetes.io/pod-deletion-cost=10`
    pace: str  # `3 failures, every 10 s`
    after: float | None  # seconds from the step's start; None: not seen


@dataclass(frozen=True, slots=True)
class Totals:
    elapsed: float
    outcome: str  # "the scenario played to the end", "stopped by Ctrl-C", ...
    runs: int
    transitions: Mapping[str, int]
    writes: int
    events: int


def marks_text(marks: Mapping[Mark, str]) -> str:
    return ", ".join(f"{m.key}={v}" for m, v in marks.items())


def summary_lines(totals: Totals, steps: Sequence[Step], seen: Iterable[Seen]) -> list[str]:
    by_step: dict[int, list[Seen]] = {}
    for item in seen:
        by_step.setdefault(item.step, []).append(item)
    lines = [f"summary: {totals.outcome}, after {totals.elapsed:.1f} s"]
    lines.append("  time from each step's start to the marks on the pod:")
    for number, step in enumerate(steps, start=1):
        items = by_step.get(number)
        if not items:
            continue
        lines.append(f"    step {number}: {step.title}")
        for item in items:
            took = "not seen" if item.after is None else f"{item.after:6.1f} s"
            lines.append(f"      {took}  {item.pod} {item.marks} ({item.pace})")
    states = ", ".join(f"{n} {s}" for s, n in sorted(totals.transitions.items()))
    count = sum(totals.transitions.values())
    lines.append(
        f"  daemon: {totals.runs} probe runs, {count} transitions"
        + (f" ({states})" if states else "")
        + f", {totals.writes} pod writes, {totals.events} events"
    )
    return lines
