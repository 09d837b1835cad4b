"""The demo's model: pods and events in, snapshots and their changes out."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest

from probemarker.demo.examples import Mark
from probemarker.demo.model import (
    EVENT,
    Board,
    Change,
    PodState,
    changes,
    daemon_event,
    read_marks,
)

IDLE = Mark("label", "gameserver-idle")
COST = Mark("annotation", "controller.kubernetes.io/pod-deletion-cost")
READY = Mark("condition", "Ready")
GATE = Mark("condition", "example.com/upstream-reachable")


def pod(
    name: str = "game-0",
    namespace: str = "games",
    *,
    labels: dict[str, Any] | None = None,
    annotations: dict[str, Any] | None = None,
    conditions: list[Any] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    out: dict[str, Any] = {"metadata": meta}
    if conditions is not None:
        out["status"] = {"conditions": conditions}
    return out


@pytest.mark.parametrize(
    ("obj", "found"),
    [
        pytest.param(pod(), {}, id="bare-pod"),
        pytest.param(
            pod(labels={"gameserver-idle": "true", "app": "x"}), {IDLE: "true"}, id="label"
        ),
        pytest.param(
            pod(annotations={"controller.kubernetes.io/pod-deletion-cost": "-10"}),
            {COST: "-10"},
            id="annotation",
        ),
        pytest.param(
            pod(
                conditions=[
                    {"type": "Ready", "status": "False"},
                    {"type": "example.com/upstream-reachable", "status": "True"},
                    "not a condition",
                ]
            ),
            {READY: "False", GATE: "True"},
            id="conditions",
        ),
        pytest.param(pod(labels={"gameserver-idle": 1}), {}, id="not-a-string"),
    ],
)
def test_read_marks(obj: dict[str, Any], found: dict[Mark, str]) -> None:
    assert read_marks(obj, (IDLE, COST, READY, GATE)) == found


def event(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "reportingComponent": "probemarker.io/daemon",
        "reason": "ProbeFailed",
        "message": "game-server-idle/idle on container game-server: Failed: match: busy",
        "involvedObject": {"kind": "Pod", "namespace": "games", "name": "game-0"},
    }
    return {**base, **over}


@pytest.mark.parametrize(
    ("obj", "found"),
    [
        pytest.param(
            event(),
            ("games/game-0", "ProbeFailed: match: busy"),
            id="daemon",
        ),
        pytest.param(
            event(
                reason="ProbeSucceeded",
                message="database-role/primary on container database: Succeeded",
            ),
            ("games/game-0", "ProbeSucceeded"),
            id="no-message",
        ),
        pytest.param(
            event(reason="PortNotFound", message="m/web on container app: port 'x' is not..."),
            ("games/game-0", "PortNotFound: m/web on container app: port 'x' is not..."),
            id="not-a-transition",
        ),
        pytest.param(
            event(reason="ProbeSucceeded", message="m", series={"count": 2}),
            ("games/game-0", "ProbeSucceeded: m (x2)"),
            id="series",
        ),
        pytest.param(
            event(reason="ProbeSucceeded", message="m", count=3),
            ("games/game-0", "ProbeSucceeded: m (x3)"),
            id="core-count",
        ),
        pytest.param(event(reportingComponent="kubelet"), None, id="kubelet"),
        pytest.param(
            event(involvedObject={"kind": "PodProbeMarker", "namespace": "games", "name": "m"}),
            None,
            id="about-a-marker",
        ),
    ],
)
def test_daemon_event(obj: dict[str, Any], found: tuple[str, str] | None) -> None:
    assert daemon_event(obj) == found


def state(marks: dict[Mark, str], ev: str | None = None) -> PodState:
    return PodState(MappingProxyType(marks), ev)


@pytest.mark.parametrize(
    ("before", "after", "found"),
    [
        pytest.param({}, {}, [], id="nothing"),
        pytest.param(
            {},
            {"games/game-0": state({IDLE: "true"})},
            [Change("games/game-0", "label gameserver-idle", None, "true")],
            id="appears",
        ),
        pytest.param(
            {"games/game-0": state({IDLE: "true", COST: "-10"})},
            {"games/game-0": state({IDLE: "false", COST: "10"})},
            [
                Change(
                    "games/game-0",
                    "annotation controller.kubernetes.io/pod-deletion-cost",
                    "-10",
                    "10",
                ),
                Change("games/game-0", "label gameserver-idle", "true", "false"),
            ],
            id="changes",
        ),
        pytest.param(
            {"games/game-0": state({IDLE: "true"})},
            {"games/game-0": state({})},
            [Change("games/game-0", "label gameserver-idle", "true", None)],
            id="goes",
        ),
        pytest.param(
            {"games/game-0": state({}, "a")},
            {"games/game-0": state({}, "b")},
            [Change("games/game-0", EVENT, "a", "b")],
            id="event",
        ),
        pytest.param(
            {},
            {"web/web-0": state({READY: "True"}), "games/game-0": state({READY: "True"})},
            [
                Change("games/game-0", "condition Ready", None, "True"),
                Change("web/web-0", "condition Ready", None, "True"),
            ],
            id="in-cast-order",
        ),
        pytest.param(
            {},
            {"other/pod": state({READY: "True"})},
            [],
            id="not-in-the-cast",
        ),
    ],
)
def test_changes(
    before: dict[str, PodState], after: dict[str, PodState], found: list[Change]
) -> None:
    assert changes(before, after, ["games/game-0", "web/web-0"]) == found


def test_the_board_follows_the_cast_and_keeps_the_last_daemon_event() -> None:
    board = Board({"games": (IDLE, READY)}, ["games/game-0", "games/game-1"])
    board.see_pod(pod(labels={"gameserver-idle": "true"}))
    board.see_pod(pod("stranger", labels={"gameserver-idle": "true"}))
    board.see_event(event())
    board.see_event(event(reportingComponent="kubelet", reason="Started"))
    assert dict(board.snapshot()) == {
        "games/game-0": PodState(MappingProxyType({IDLE: "true"}), "ProbeFailed: match: busy")
    }
    board.see_pod(pod(), deleted=True)
    assert board.snapshot()["games/game-0"].marks == {}
