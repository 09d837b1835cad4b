"""exec_outcome: every exec result mapped to the outcome docs/engine.md and the issue ask for."""

from __future__ import annotations

import pytest

from probemarker.api.model import HTTPGetAction, TCPSocketAction
from probemarker.probe.exec import ExecHandler, exec_outcome
from probemarker.probe.execresult import (
    ExecExited,
    ExecNotStarted,
    ExecResult,
    ExecTransportError,
    TransportFailure,
)
from probemarker.probe.handler import ProbeTarget
from probemarker.probe.outcome import Outcome
from probemarker.watch.pods import PodUID

# As a 1.30+ API server (v5, the stream translator) and a 1.28 kubelet (v4) word them.
MISSING_V5 = (
    "Internal error occurred: Internal error occurred: error executing command in container: "
    'failed to exec in container: failed to start exec "abc": OCI runtime exec failed: exec '
    'failed: unable to start container process: exec: "check": executable file not found '
    "in $PATH: unknown"
)
MISSING_V4 = MISSING_V5.removeprefix("Internal error occurred: ")
ISSUE_TEXT = 'Internal error occurred: failed to start command: exec: "check": not here'
DIAL = "Internal error occurred: error dialing backend: dial tcp 10.0.0.7:10250: connect: refused"
UPGRADE = 'Internal error occurred: unable to upgrade connection: container not found ("app")'

CASES = [
    pytest.param(
        ExecExited(0, "idle\n", "warn"),
        Outcome.succeeded("idle", answer="idle"),
        id="exit-0-stdout",
    ),
    pytest.param(ExecExited(0, "", ""), Outcome.succeeded("", answer=""), id="exit-0-silent"),
    pytest.param(
        ExecExited(3, "out", "err\n"), Outcome.failed("err", answer="out"), id="exit-3-stderr"
    ),
    pytest.param(
        ExecExited(1, "busy\n", ""), Outcome.failed("busy", answer="busy"), id="exit-1-stdout-297"
    ),
    pytest.param(
        ExecExited(3, "", " \n"),
        Outcome.failed("command exited with code 3", answer=""),
        id="exit-3-silent",
    ),
    pytest.param(
        ExecExited(255, "\x1b[31m\x00", ""),
        Outcome.failed("command exited with code 255", answer=""),
        id="exit-255-only-control-characters",
    ),
    pytest.param(
        ExecExited(2, "", "x" * 1024, 0, 9_000_000),
        Outcome.failed("x" * 1024, answer="x" * 1024),
        id="dropped-output",
    ),
    pytest.param(ExecNotStarted(MISSING_V5), Outcome.failed(MISSING_V5), id="missing-exe-v5"),
    pytest.param(ExecNotStarted(MISSING_V4), Outcome.failed(MISSING_V4), id="missing-exe-v4"),
    pytest.param(ExecNotStarted(ISSUE_TEXT), Outcome.failed(ISSUE_TEXT), id="failed-to-start"),
    pytest.param(
        ExecNotStarted(DIAL), Outcome.unknown(f"exec not started: {DIAL}"), id="kubelet-unreachable"
    ),
    pytest.param(
        ExecNotStarted(UPGRADE), Outcome.unknown(f"exec not started: {UPGRADE}"), id="upgrade-v5"
    ),
    pytest.param(
        ExecTransportError(
            TransportFailure.DEADLINE, "expired before the exit status", None, True, True
        ),
        Outcome.failed("command timed out after 1s"),
        id="deadline-while-running",
    ),
]


@pytest.mark.parametrize(("result", "expected"), CASES)
def test_decided(result: ExecResult, expected: Outcome) -> None:
    assert exec_outcome(result, time_limit=1.0) == expected


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(ExecTransportError(TransportFailure.REFUSED, "not found", 404), id="pod-gone"),
        pytest.param(ExecTransportError(TransportFailure.REFUSED, "bad", 400), id="no-container"),
        pytest.param(ExecTransportError(TransportFailure.REFUSED, "rbac", 403), id="forbidden"),
        pytest.param(ExecTransportError(TransportFailure.REFUSED, "boom", 500), id="server-error"),
        pytest.param(ExecTransportError(TransportFailure.UNREACHABLE, "refused"), id="unreachable"),
        pytest.param(ExecTransportError(TransportFailure.DEADLINE, "handshake"), id="slow-upgrade"),
        pytest.param(
            ExecTransportError(TransportFailure.DEADLINE, "no first frame", None, True),
            id="upgraded-never-established",
        ),
        pytest.param(ExecTransportError(TransportFailure.LOST, "1006", None, True), id="lost"),
        pytest.param(
            ExecTransportError(TransportFailure.NO_STATUS, "closed", None, True), id="no-status"
        ),
        pytest.param(ExecTransportError(TransportFailure.PROTOCOL, "x", None, True), id="protocol"),
    ],
)
def test_outside_the_container_is_unknown(error: ExecTransportError) -> None:
    outcome = exec_outcome(error, time_limit=1.0)
    assert outcome == Outcome.unknown(str(error))


def test_timeout_message_names_the_limit() -> None:
    error = ExecTransportError(TransportFailure.DEADLINE, "x", None, True, True)
    assert exec_outcome(error, time_limit=2.5).message == "command timed out after 2.5s"


class NoClient:
    """Never used: the action is refused before any I/O."""


@pytest.mark.parametrize(
    "action", [HTTPGetAction(port=80), TCPSocketAction(port="http")], ids=["http", "tcp"]
)
async def test_other_actions_are_a_bug(action: HTTPGetAction | TCPSocketAction) -> None:
    handler = ExecHandler(NoClient())  # type: ignore[arg-type]
    target = ProbeTarget("ns", "pod", PodUID("u"), "c")
    with pytest.raises(TypeError, match="ExecHandler runs exec actions, not"):
        await handler.run(action, target, time_limit=1.0)
