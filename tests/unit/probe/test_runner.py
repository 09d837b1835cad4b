"""ProbeRunner: handler choice, the outer bound, errors as Unknown, cancellation kept."""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio
import pytest
from structlog.testing import capture_logs

from probemarker.api.model import (
    ExecAction,
    GRPCAction,
    Handler,
    HTTPGetAction,
    ProbeSpec,
    TCPSocketAction,
    Timing,
)
from probemarker.probe.handler import ProbeHandler, ProbeTarget
from probemarker.probe.outcome import Outcome, Result
from probemarker.probe.runner import ProbeRunner, action_kind
from probemarker.watch.pods import PodUID

TARGET = ProbeTarget("games", "gs-1", PodUID("uid-1"), "server")
EXEC = ExecAction(("check",))


def spec(action: Handler = EXEC, *, timeout: int = 1) -> ProbeSpec:
    return ProbeSpec("idle", "server", action, Timing(timeout_seconds=timeout))


@dataclass
class Scripted:
    """Returns the given outcome and records the time limits it was given."""

    outcome: Outcome
    limits: list[float] = field(default_factory=list)

    async def run(self, action: Handler, target: ProbeTarget, *, time_limit: float) -> Outcome:
        self.limits.append(time_limit)
        return self.outcome


@dataclass
class Raising:
    error: Exception

    async def run(self, action: Handler, target: ProbeTarget, *, time_limit: float) -> Outcome:
        raise self.error


@dataclass
class Hanging:
    """Never answers; optionally turns its cancellation into another exception."""

    started: anyio.Event = field(default_factory=anyio.Event)
    raise_on_cancel: bool = False

    async def run(self, action: Handler, target: ProbeTarget, *, time_limit: float) -> Outcome:
        self.started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            if self.raise_on_cancel:
                raise RuntimeError("cleanup failed") from None
            raise
        raise AssertionError("not reached")


def runner(handler: ProbeHandler, *, grace: float = 0.5) -> ProbeRunner:
    return ProbeRunner({ExecAction: handler}, grace=grace)


async def test_handler_chosen_by_action_type_and_given_the_timeout() -> None:
    exec_handler = Scripted(Outcome.succeeded("ok"))
    http_handler = Scripted(Outcome.failed("503"))
    probes = ProbeRunner({ExecAction: exec_handler, HTTPGetAction: http_handler})
    assert await probes.run(spec(timeout=3), TARGET) == Outcome.succeeded("ok")
    assert await probes.run(spec(HTTPGetAction(port=80)), TARGET) == Outcome.failed("503")
    assert exec_handler.limits == [3.0]
    assert http_handler.limits == [1.0]


@pytest.mark.parametrize(
    ("action", "kind"),
    [
        pytest.param(HTTPGetAction(port=8080), "httpGet", id="http"),
        pytest.param(TCPSocketAction(port="game"), "tcpSocket", id="tcp"),
        pytest.param(GRPCAction(port=9000), "grpc", id="grpc"),
    ],
)
async def test_no_handler_is_unknown_naming_the_kind(action: Handler, kind: str) -> None:
    outcome = await runner(Scripted(Outcome.succeeded())).run(spec(action), TARGET)
    assert outcome == Outcome.unknown(f"{kind} probes are not supported by this build")
    assert action_kind(action) == kind


class Unavailable(Scripted):
    """A handler whose library is missing (as grpc without its extra)."""

    async def unavailable(self) -> str | None:
        return "grpc probes need the optional grpc extra"


async def test_a_handler_without_its_library_says_why() -> None:
    probes = ProbeRunner(
        {ExecAction: Scripted(Outcome.succeeded()), GRPCAction: Unavailable(Outcome.unknown("x"))}
    )
    assert (
        await probes.unavailable(GRPCAction(port=9000))
        == "grpc probes need the optional grpc extra"
    )
    assert await probes.unavailable(ExecAction(("true",))) is None
    assert (
        await probes.unavailable(HTTPGetAction(port=80))
        == "httpGet probes are not supported by this build"
    )


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param(Outcome.succeeded("\x1b[32mok\x1b[0m\x00\n"), "ok", id="escapes"),
        pytest.param(Outcome.failed("x" * 5000), "x" * 1024, id="trimmed"),
        pytest.param(Outcome.unknown("why\r\n"), "why", id="unknown-too"),
    ],
)
async def test_message_cleaned_as_last_line_of_defence(given: Outcome, expected: str) -> None:
    outcome = await runner(Scripted(given)).run(spec(), TARGET)
    assert outcome == Outcome(given.result, expected)


async def test_handler_overrunning_the_outer_bound_is_failed() -> None:
    hanging = Hanging()
    with anyio.fail_after(5), capture_logs() as logs:
        outcome = await runner(hanging, grace=0.05).run(spec(timeout=0), TARGET)
    assert hanging.started.is_set()
    assert outcome == Outcome.failed("exec probe timed out after 0s")
    assert [entry["event"] for entry in logs] == ["probe.handler_overran"]


async def test_unexpected_exception_is_unknown_and_logged_with_one_traceback() -> None:
    probes = runner(Raising(KeyError("containers")))
    with capture_logs() as logs:
        first = await probes.run(spec(), TARGET)
        second = await probes.run(spec(), TARGET)
    assert first == second == Outcome.unknown("exec probe handler error: KeyError('containers')")
    assert [entry["event"] for entry in logs] == ["probe.handler_error"] * 2
    assert [entry["log_level"] for entry in logs] == ["error"] * 2
    assert isinstance(logs[0]["exc_info"], KeyError)  # the traceback once per kind and type
    assert logs[1]["exc_info"] is None
    assert logs[0]["target"] == "games/gs-1/server"


async def test_a_type_error_from_the_handler_is_a_logged_bug_too() -> None:
    with capture_logs() as logs:
        outcome = await runner(Raising(TypeError("bad action"))).run(spec(), TARGET)
    assert outcome.result is Result.UNKNOWN
    assert logs[0]["event"] == "probe.handler_error"


@pytest.mark.parametrize("raise_on_cancel", [False, True], ids=["plain", "handler-raises"])
async def test_cancellation_propagates(raise_on_cancel: bool) -> None:
    hanging = Hanging(raise_on_cancel=raise_on_cancel)
    returned: list[Outcome] = []

    async def probe() -> None:
        returned.append(await runner(hanging).run(spec(timeout=30), TARGET))

    with anyio.fail_after(5), capture_logs() as logs:
        async with anyio.create_task_group() as group:
            group.start_soon(probe)
            await hanging.started.wait()
            group.cancel_scope.cancel()
    assert returned == []  # cancelled, not turned into an outcome
    assert logs == []


async def test_grace_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="grace"):
        ProbeRunner({}, grace=-1)
