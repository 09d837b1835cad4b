"""The demo's text: plain lines, the live table and the summary, from values."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from probemarker.api.model import ProbeState
from probemarker.demo.examples import Mark, columns_of, load_examples
from probemarker.demo.model import EVENT, Change, PodState
from probemarker.demo.scenario import PODS, STEPS
from probemarker.demo.view import (
    Frame,
    Layout,
    Section,
    Seen,
    Segment,
    Totals,
    build_layout,
    change_line,
    fit,
    paint,
    render_frame,
    step_lines,
    summary_lines,
)

IDLE = Mark("label", "gameserver-idle")
COST = Mark("annotation", "controller.kubernetes.io/pod-deletion-cost")
READY = Mark("condition", "Ready")
S, F = ProbeState.SUCCEEDED, ProbeState.FAILED


@pytest.mark.parametrize(
    ("at", "change", "line"),
    [
        pytest.param(
            12.34,
            Change("games/game-0", "label gameserver-idle", "true", "false"),
            "   12.3s games/game-0 label gameserver-idle: true -> false",
            id="label",
        ),
        pytest.param(
            0.0,
            Change("web/web-0", "condition Ready", None, "True"),
            "    0.0s web/web-0 condition Ready: - -> True",
            id="appears",
        ),
        pytest.param(
            1.0,
            Change("web/web-0", "label x", "a", None),
            "    1.0s web/web-0 label x: a -> -",
            id="goes",
        ),
        pytest.param(
            123.45,
            Change("games/game-0", EVENT, "ProbeSucceeded", "ProbeFailed: match: busy"),
            "  123.5s games/game-0 event ProbeFailed: match: busy",
            id="event",
        ),
    ],
)
def test_change_line(at: float, change: Change, line: str) -> None:
    assert change_line(at, change) == line


def test_step_lines_name_the_step_and_each_write() -> None:
    assert step_lines(5.0, 3, 5, STEPS[2]) == [
        "    5.0s step 3/5: primary failover: db-0 steps down, db-1 takes over (the role is "
        "the answer)",
        "    5.0s   write databases/db-0: /var/run/db/role = replica",
        "    5.0s   write databases/db-1: /var/run/db/role = primary",
    ]


@pytest.mark.parametrize(
    ("line", "width", "fitted"),
    [
        pytest.param([Segment("abc")], 3, [Segment("abc")], id="fits"),
        pytest.param([Segment("abcdef")], 4, [Segment("abc"), Segment("…")], id="cut"),
        pytest.param(
            [Segment("ab", ("ok",)), Segment("cdef", ("bad",))],
            4,
            [Segment("ab", ("ok",)), Segment("c", ("bad",)), Segment("…")],
            id="across-segments-styles-kept",
        ),
        pytest.param([Segment("ab"), Segment("cd")], 1, [Segment("…")], id="one-column"),
    ],
)
def test_fit(line: list[Segment], width: int, fitted: list[Segment]) -> None:
    assert fit(line, width) == fitted


def test_paint_with_and_without_colour() -> None:
    line = [Segment("POD", ("bold",)), Segment(" "), Segment("true", ("ok", "bold"))]
    assert paint(line, colour=False) == "POD true"
    assert paint(line, colour=True) == "\x1b[1mPOD\x1b[0m \x1b[32;1mtrue\x1b[0m"


LAYOUT = Layout(
    sections=(
        Section(
            namespace="games",
            title="games: game-server-idle",
            columns=(IDLE, COST, READY),
            pods=("game-0", "game-1"),
        ),
    ),
    states={(IDLE, "true"): S, (COST, "-10"): S, (IDLE, "false"): F, (COST, "10"): F},
)
SNAPSHOT = MappingProxyType(
    {
        "games/game-0": PodState(
            MappingProxyType({IDLE: "false", COST: "10", READY: "True"}),
            "ProbeFailed: match: busy",
        ),
        "games/game-1": PodState(MappingProxyType({READY: "False"})),
    }
)


def frame(fresh: frozenset[tuple[str, str]] = frozenset()) -> Frame:
    return Frame(
        elapsed=12.5,
        headline="step 2/5: game-0 starts a match",
        waiting=("games/game-1 gameserver-idle=true",),
        snapshot=SNAPSHOT,
        recent=("    1.0s one", "    2.0s two", "    3.0s three"),
        fresh=fresh,
    )


def text(lines: list[list[Segment]]) -> list[str]:
    return [paint(line, colour=False) for line in lines]


def test_the_table_shows_each_pods_marks_and_last_event() -> None:
    assert text(render_frame(LAYOUT, frame(), width=200, height=40)) == [
        "probemarker demo   12.5 s  step 2/5: game-0 starts a match",
        "  waiting for games/game-1 gameserver-idle=true",
        "",
        "games: game-server-idle",
        "  POD     gameserver-idle  pod-deletion-cost  Ready  LAST EVENT",
        "  game-0  false            10                 True   ProbeFailed: match: busy",
        "  game-1  -                -                  False  -",
        "",
        "    1.0s one",
        "    2.0s two",
        "    3.0s three",
        "",
        "Ctrl-C stops the demo and cleans up",
    ]


def test_a_small_terminal_drops_the_oldest_changes_and_cuts_long_lines() -> None:
    lines = text(render_frame(LAYOUT, frame(), width=30, height=12))
    assert len(lines) == 12
    assert all(len(line) <= 30 for line in lines)
    assert lines[-4:] == ["    2.0s two", "    3.0s three", "", "Ctrl-C stops the demo and cle…"]
    assert "    1.0s one" not in lines


@pytest.mark.parametrize(
    ("pod", "column", "style"),
    [
        pytest.param("games/game-0", 1, ("bad",), id="failed-value"),
        pytest.param("games/game-0", 3, ("ok",), id="ready"),
        pytest.param("games/game-1", 1, ("dim",), id="absent"),
        pytest.param("games/game-1", 3, ("down",), id="not-ready"),
    ],
)
def test_cell_styles(pod: str, column: int, style: tuple[str, ...]) -> None:
    row = {"games/game-0": 5, "games/game-1": 6}[pod]
    line = render_frame(LAYOUT, frame(), width=200, height=40)[row]
    cells = [seg for seg in line if seg.text.strip() and seg.text != "  "]
    assert cells[column].style == style


def test_a_fresh_cell_is_bold() -> None:
    fresh = frozenset({("games/game-0", str(IDLE)), ("games/game-0", EVENT)})
    line = render_frame(LAYOUT, frame(fresh=fresh), width=200, height=40)[5]
    assert [seg.style for seg in line if seg.text.startswith(("false", "Probe"))] == [
        ("bad", "bold"),
        ("bold",),
    ]


def test_the_layout_of_the_examples() -> None:
    examples = load_examples()
    columns = {e.namespace: columns_of(examples, e.namespace) for e in examples}
    layout = build_layout(examples, PODS, columns)
    assert [(s.namespace, s.pods) for s in layout.sections] == [
        ("games", ("game-0", "game-1")),
        ("databases", ("db-0", "db-1")),
        ("web", ("web-0", "web-1")),
    ]
    assert [s.title for s in layout.sections] == [
        "games: game-server-idle (game-server-idle.yaml): exec /home/game/idle.sh, every 10 s",
        "databases: database-role-value (result-values.yaml): exec cat /var/run/db/role, "
        'every 5 s; label db.example.com/role = "{{.Result}}", the probe\'s answer',
        "web: upstream-gate (readiness-gate.yaml): httpGet /healthz/upstream on port http, "
        "every 5 s",
    ]
    role = Mark("label", "db.example.com/role")
    assert layout.answers == {role: S}  # any answer is the Succeeded policy's value
    assert (role, "primary") not in layout.states
    assert layout.states[(Mark("condition", "example.com/upstream-reachable"), "False")] is F


def test_the_summary() -> None:
    totals = Totals(
        elapsed=43.21,
        outcome="the scenario played to the end",
        runs=42,
        transitions={"Succeeded": 7, "Failed": 4},
        writes=11,
        events=11,
    )
    seen = [
        Seen(
            1,
            "databases/db-0",
            "db.example.com/role=primary",
            "the probe's answer, 1 success, every 5 s",
            0.7,
        ),
        Seen(2, "games/game-0", "gameserver-idle=false", "3 failures, every 10 s", 23.84),
        Seen(3, "databases/db-1", "db.example.com/role=primary", "1 success, every 5 s", None),
    ]
    assert summary_lines(totals, STEPS, seen) == [
        "summary: the scenario played to the end, after 43.2 s",
        "  time from each step's start to the marks on the pod:",
        "    step 1: the daemon marks every pod",
        "         0.7 s  databases/db-0 db.example.com/role=primary (the probe's answer, "
        "1 success, every 5 s)",
        "    step 2: game-0 starts a match: idle -> busy (the next steps play meanwhile)",
        "        23.8 s  games/game-0 gameserver-idle=false (3 failures, every 10 s)",
        "    step 3: primary failover: db-0 steps down, db-1 takes over (the role is the answer)",
        "      not seen  databases/db-1 db.example.com/role=primary (1 success, every 5 s)",
        "  daemon: 42 probe runs, 11 transitions (4 Failed, 7 Succeeded), 11 pod writes, 11 events",
    ]


def test_the_databases_table_shows_each_answer_as_the_role() -> None:
    """The role column holds what each pod's probe answered, coloured as the Succeeded
    policy's value it is, and the title says the value is the probe's answer."""
    examples = load_examples()
    columns = {e.namespace: columns_of(examples, e.namespace) for e in examples}
    layout = build_layout(examples, PODS, columns)
    role, ready = Mark("label", "db.example.com/role"), Mark("condition", "Ready")
    snapshot = MappingProxyType(
        {
            "databases/db-0": PodState(MappingProxyType({role: "replica", ready: "True"})),
            "databases/db-1": PodState(MappingProxyType({role: "primary", ready: "True"})),
        }
    )
    shown = Frame(1.0, "step 3/5", (), snapshot, ())
    lines = render_frame(layout, shown, width=200, height=60)
    painted = text(lines)
    title = painted.index(
        "databases: database-role-value (result-values.yaml): exec cat /var/run/db/role, "
        'every 5 s; label db.example.com/role = "{{.Result}}", the probe\'s answer'
    )
    assert painted[title + 1].split() == ["POD", "role", "Ready", "LAST", "EVENT"]
    assert painted[title + 2].split() == ["db-0", "replica", "True", "-"]
    assert painted[title + 3].split() == ["db-1", "primary", "True", "-"]
    for row in (title + 2, title + 3):
        (cell,) = [seg for seg in lines[row] if seg.text.strip() in ("primary", "replica")]
        assert cell.style == ("ok",)
