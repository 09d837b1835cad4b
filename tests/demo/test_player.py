"""The scenario player: a step writes its files, then waits on the board for the marks
its expectations resolve to, within a bound; a `wait=False` step is waited for beside
the next ones. The test plays the daemon's part by feeding the board."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from probemarker.api.model import ProbeState, Timing
from probemarker.demo.containers import ContainerFiles
from probemarker.demo.examples import Mark, columns_of, load_examples
from probemarker.demo.model import Board
from probemarker.demo.player import Played, Show, play, resolve
from probemarker.demo.scenario import DB_ROLE, GAME_STATE, PODS, Expect, Flip, Step
from probemarker.demo.view import Frame

S, F = ProbeState.SUCCEEDED, ProbeState.FAILED
EXAMPLES = load_examples(fast=True)


class Recorder:
    """A screen that keeps the notes and says when one arrives."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self._noted = anyio.Event()

    def note(self, text: str) -> None:
        self.notes.append(text)
        self._noted.set()
        self._noted = anyio.Event()

    def show(self, frame: Frame) -> None:
        pass

    def close(self) -> None:
        pass

    def write(self, text: str) -> None:
        pass

    async def until(self, predicate: Callable[[list[str]], bool]) -> None:
        with anyio.fail_after(5):
            while not predicate(self.notes):
                await self._noted.wait()


def noted(fragment: str) -> Callable[[list[str]], bool]:
    return lambda notes: any(fragment in n for n in notes)


def pod(namespace: str, name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "labels": labels}}


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Show, Recorder, ContainerFiles]:
    columns = {e.namespace: columns_of(EXAMPLES, e.namespace) for e in EXAMPLES}
    recorder = Recorder()
    files = ContainerFiles(tmp_path)
    for p in PODS:
        files.create(p)
    return Show(Board(columns, [p.key for p in PODS]), recorder), recorder, files


BUSY = Step(
    "game-0 busy",
    flips=(Flip("games/game-0", GAME_STATE, "busy\n"),),
    expects=(Expect("games/game-0", "game-server-idle", "idle", F),),
)
FAILOVER = Step(
    "db-0 steps down",
    flips=(Flip("databases/db-0", DB_ROLE, "replica\n"),),
    expects=(Expect("databases/db-0", "database-role-value", "role", S, "replica"),),
)
BUSY_LABELS = {"gameserver-idle": "false"}
BUSY_POD = {
    "metadata": {
        "namespace": "games",
        "name": "game-0",
        "labels": BUSY_LABELS,
        "annotations": {"controller.kubernetes.io/pod-deletion-cost": "10"},
    }
}


async def test_a_step_writes_its_files_then_waits_for_the_marks(
    setup: tuple[Show, Recorder, ContainerFiles],
) -> None:
    show, recorder, files = setup
    played = Played()
    async with anyio.create_task_group() as group:
        group.start_soon(play, show, files, EXAMPLES, [BUSY], played)
        await recorder.until(noted("write games/game-0"))
        assert files.read(next(p for p in PODS if p.name == "game-0"), GAME_STATE) == "busy\n"
        assert show.waiting == (
            "games/game-0 gameserver-idle=false, controller.kubernetes.io/pod-deletion-cost=10 "
            "(3 failures, every 1 s)",
        )
        show.board.see_pod(pod("games", "game-0", BUSY_LABELS))  # half of it
        show.update()
        show.board.see_pod(BUSY_POD)
        show.update()
    assert played.missed is None
    ((seen),) = played.seen
    assert (seen.step, seen.pod, seen.after is not None) == (1, "games/game-0", True)
    assert any("step 1 done in" in n for n in recorder.notes)
    assert show.waiting == ()
    assert show.headline == "the scenario is over"


async def test_a_step_not_seen_within_its_bound_ends_the_scenario(
    setup: tuple[Show, Recorder, ContainerFiles],
) -> None:
    show, recorder, files = setup
    played = Played()
    with anyio.fail_after(5):
        await play(show, files, EXAMPLES, [FAILOVER, BUSY], played, bound=lambda _t, _s: 0.1)
    assert played.step == 1
    assert played.missed == (
        "databases/db-0 db.example.com/role=replica (the probe's answer, 1 success, every 1 s)"
    )
    assert [(s.pod, s.after) for s in played.seen] == [("databases/db-0", None)]
    assert noted("step 1: not seen within 0 s: databases/db-0")(recorder.notes)
    assert not noted("step 2/2")(recorder.notes)


async def test_a_step_that_does_not_wait_is_waited_for_beside_the_next(
    setup: tuple[Show, Recorder, ContainerFiles],
) -> None:
    show, recorder, files = setup
    played = Played()
    background = Step(BUSY.title, BUSY.flips, BUSY.expects, wait=False)
    async with anyio.create_task_group() as group:
        group.start_soon(play, show, files, EXAMPLES, [background, FAILOVER], played)
        await recorder.until(noted("write databases/db-0"))  # step 2 began at once
        assert len(show.waiting) == 2
        show.board.see_pod(pod("databases", "db-0", {"db.example.com/role": "replica"}))
        show.update()
        await recorder.until(noted("step 2 done"))
        assert not noted("step 1 done")(recorder.notes)
        show.board.see_pod(BUSY_POD)
        show.update()
    assert [s.step for s in played.seen] == [2, 1]
    assert played.missed is None


@pytest.mark.parametrize(
    ("expect", "marks"),
    [
        pytest.param(
            Expect("web/web-0", "upstream-gate", "upstream", F),
            {
                Mark("condition", "example.com/upstream-reachable"): "False",
                Mark("condition", "Ready"): "False",
            },
            id="gate-closes-ready-follows",
        ),
        pytest.param(
            Expect("databases/db-1", "database-role-value", "role", S, "primary"),
            {Mark("label", "db.example.com/role"): "primary"},
            id="no-gate-the-answer-rendered",
        ),
    ],
)
def test_resolve(expect: Expect, marks: dict[Mark, str]) -> None:
    wanted = resolve(EXAMPLES, expect, lambda t, s: 7.0, first=False)
    assert dict(wanted.marks) == marks
    assert wanted.bound == 7.0


def test_resolve_passes_the_timing_and_state_to_the_bound() -> None:
    asked: list[tuple[Timing, ProbeState]] = []
    expect = Expect("games/game-0", "game-server-idle", "idle", F)

    def bound(timing: Timing, state: ProbeState) -> float:
        asked.append((timing, state))
        return 1.0

    resolve(EXAMPLES, expect, bound, first=True)
    assert [(t.failure_threshold, s) for t, s in asked] == [(3, F)]
