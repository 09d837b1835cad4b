"""Exec probes end to end: ProbeRunner -> ExecHandler -> pods/exec on the sim.

Over real HTTP and WebSocket. Each test says which docs/engine.md outcome a situation gives;
the sim plays a 1.30+ API server for a v5 offer and a 1.28 kubelet for a v4-only one,
and its exec faults play what real servers do to the connection.
"""

from __future__ import annotations

import asyncio

import pytest

from probemarker.probe.execstream import V4, ExecSettings
from probemarker.probe.outcome import Outcome, Result
from probemarker.sim.exec.runners import ExecIO, ExecRequest
from tests.probe.conftest import NAMESPACE, POD, Probes

V4_ONLY = ExecSettings(protocols=(V4,))
NOT_FOUND = "executable file not found in $PATH"


def unknown(outcome: Outcome, *parts: str) -> None:
    assert outcome.result is Result.UNKNOWN, outcome
    for part in parts:
        assert part in outcome.message, outcome


# --- answers from the container ------------------------------------------------------


@pytest.mark.parametrize("settings", [None, V4_ONLY], ids=["v5", "v4"])
@pytest.mark.parametrize(
    ("script", "expected"),
    [
        pytest.param(
            "echo idle; echo noise >&2",
            Outcome.succeeded("idle", answer="idle"),
            id="exit-0-stdout",
        ),
        pytest.param("true", Outcome.succeeded("", answer=""), id="exit-0-silent"),
        pytest.param(
            "echo out; echo why >&2; exit 3",
            Outcome.failed("why", answer="out"),
            id="exit-3-stderr",
        ),
        pytest.param(
            "echo busy; exit 1", Outcome.failed("busy", answer="busy"), id="exit-1-stdout"
        ),
        pytest.param(
            "exit 3", Outcome.failed("command exited with code 3", answer=""), id="exit-3-silent"
        ),
    ],
)
async def test_exit_codes_and_message(
    probes: Probes, settings: ExecSettings | None, script: str, expected: Outcome
) -> None:
    assert await probes.run("sh", "-c", script, settings=settings) == expected


@pytest.mark.parametrize("settings", [None, V4_ONLY], ids=["v5", "v4"])
async def test_missing_executable_is_failed_with_the_runtime_message(
    probes: Probes, settings: ExecSettings | None
) -> None:
    outcome = await probes.run("no-such-check", settings=settings)
    assert outcome.result is Result.FAILED, outcome
    assert outcome.message.startswith("Internal error occurred: ")
    assert f'exec: "no-such-check": {NOT_FOUND}' in outcome.message


async def test_command_hanging_past_the_time_limit_is_failed_at_the_limit(probes: Probes) -> None:
    loop = asyncio.get_running_loop()
    began = loop.time()
    outcome = await probes.run("sh", "-c", "exec sleep 60", timeout_seconds=1)
    assert outcome == Outcome.failed("command timed out after 1s")
    assert loop.time() - began < 2.5  # the limit, not the outer safety net
    assert probes.sim.server is not None
    # The command runs on, as on a real cluster (the sim no longer kills it).
    assert len(probes.sim.server.exec_sessions) == 1


@pytest.mark.timeout(120)
async def test_ten_megabytes_of_output_are_trimmed(probes: Probes) -> None:
    script = "head -c 10000000 /dev/zero | tr '\\0' o; head -c 10000000 /dev/zero >&2; exit 1"
    outcome = await probes.run("sh", "-c", script, timeout_seconds=60)
    # stderr is NULs only: empty once cleaned, so stdout is the message.
    assert outcome == Outcome.failed("o" * 1024, answer="o" * 1024)


async def test_invalid_utf8_and_control_characters_are_cleaned(probes: Probes) -> None:
    async def frames(request: ExecRequest, io: ExecIO) -> int:
        await io.write_stdout(b"ignored on failure")
        await io.write_stderr(b"\x1b[31mdisk \xff\xfe full\x1b[0m\x00\r\n")
        await io.write_stderr(b"\x07second \xe2\x80\xaeline\r\n\n")
        return 2

    probes.sim.exec_handlers.register_stream(NAMESPACE, POD, "app", frames)
    outcome = await probes.run("check")
    assert outcome == Outcome.failed(
        "disk \ufffd\ufffd full\nsecond line", answer="ignored on failure"
    )


@pytest.mark.parametrize("fault", ["drop_after_close", "drop_after_status"])
@pytest.mark.parametrize(
    ("script", "expected"),
    [
        pytest.param("echo up", Outcome.succeeded("up", answer="up"), id="succeeded"),
        pytest.param("echo down >&2; exit 4", Outcome.failed("down", answer="down"), id="failed"),
    ],
)
async def test_connection_dropped_after_the_status_keeps_the_outcome(
    probes: Probes, fault: str, script: str, expected: Outcome
) -> None:
    # 1.30+ API servers close TCP right after their close frame; the client sees 1006.
    setattr(probes.sim.faults.exec, fault, True)
    assert await probes.run("sh", "-c", script) == expected


async def test_server_that_upgrades_and_stalls_is_unknown(probes: Probes) -> None:
    # Upgraded, but never the "connection established" frame: the command's clock never
    # started, so its limit cannot have run out; the client's deadline did (Unknown).
    probes.sim.faults.exec.stall = True
    outcome = await probes.run("true", timeout_seconds=1, grace=0.3)
    unknown(outcome, "never established")


async def test_a_slow_handshake_does_not_eat_the_commands_time(probes: Probes) -> None:
    # Issue 23, defect 2: 0.7 s to upgrade (a loaded API server), then a 0.5 s command
    # within its 1 s timeout: Succeeded, as the kubelet would judge the command.
    probes.sim.faults.add_latency(0.7, subresource="exec")
    outcome = await probes.run("sh", "-c", "sleep 0.5; echo in time", timeout_seconds=1)
    assert outcome == Outcome.succeeded("in time", answer="in time")


# --- the probe could not be run: Unknown ---------------------------------------------


async def test_pod_gone_is_unknown(probes: Probes) -> None:
    unknown(await probes.run("true", pod="gone"), "HTTP 404", 'pods "gone" not found')


async def test_pod_deleted_is_unknown(probes: Probes) -> None:
    probes.sim.kubelet.remove_pod(NAMESPACE, POD)
    await probes.sim.kubelet.wait_removed(NAMESPACE, POD)
    unknown(await probes.run("true"), "HTTP 404")


async def test_unknown_container_is_unknown(probes: Probes) -> None:
    unknown(await probes.run("true", container="nope"), "HTTP 400", "container nope is not valid")


@pytest.mark.parametrize("code", [403, 500, 503])
async def test_handshake_refused_is_unknown(probes: Probes, code: int) -> None:
    probes.sim.faults.exec.reject_status = code
    unknown(await probes.run("true"), f"HTTP {code}")


@pytest.mark.parametrize("code", [403, 500, 429])
async def test_api_server_errors_are_unknown(probes: Probes, code: int) -> None:
    probes.sim.faults.fail_requests(code=code, subresource="exec")
    unknown(await probes.run("true"), f"HTTP {code}")


async def test_api_server_down_is_unknown(probes: Probes) -> None:
    await probes.sim.faults.take_down()
    try:
        unknown(await probes.run("true"), "exec unreachable")
    finally:
        await probes.sim.faults.bring_up()
    assert await probes.run("echo", "back") == Outcome.succeeded("back", answer="back")


async def test_slow_handshake_past_the_clients_deadline_is_unknown(probes: Probes) -> None:
    probes.sim.faults.add_latency(5.0, subresource="exec")
    outcome = await probes.run("true", timeout_seconds=1, grace=0.5)
    unknown(outcome, "before the WebSocket handshake completed")


async def test_stream_broken_mid_run_is_unknown(probes: Probes) -> None:
    probes.sim.faults.exec.break_after_bytes = 100
    unknown(await probes.run("sh", "-c", "head -c 100000 /dev/zero"), "exec lost")


async def test_container_not_running_v5_is_unknown_as_on_v4(probes: Probes) -> None:
    # The stopped container is Failed from its pod status (decide.gate), without an
    # exec; an exec that races the stop is thrown away, the same through both servers.
    probes.sim.kubelet.stop_container(NAMESPACE, POD, "side", exit_code=1)
    v5 = await probes.run("true", container="side")
    unknown(v5, "unable to upgrade connection", 'container not found ("side")')
    v4 = await probes.run("true", container="side", settings=V4_ONLY)
    unknown(v4, "HTTP 500", 'container not found ("side")')
