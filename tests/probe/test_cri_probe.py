"""The cri exec handler and its client against a scripted runtime on a unix socket.

A grpc.aio server serves `runtime.v1.RuntimeService` (Version, ExecSync) on a socket in
the test's directory, its ExecSync scripted by the command: `echo WORDS`, `exit N`,
`sleep S` (until the call ends; a cancelled call is recorded), `flood N` (N bytes of
stdout), `fail CODE DETAILS` (the call ends with that grpc status). The mechanics are
tested here: one channel shared by concurrent calls, cancellation reaching the
runtime, the receive cap, a runtime that goes away and comes back, a closed handler,
the missing extra. What a real runtime answers is tests/cri/'s (containerd and runc).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from probemarker.api.model import ExecAction, HTTPGetAction
from probemarker.cri import client as client_module
from probemarker.cri.client import EXTRA_HINT, RuntimeClient
from probemarker.probe.cri import CRIExecHandler
from probemarker.probe.handler import ProbeTarget
from probemarker.probe.outcome import Outcome, Result
from probemarker.watch.pods import PodUID
from tests.fakes import FakeClock
from tests.probe.criserver import Runtime, serve

ID = "c0ffee" * 10 + "abcd"


def target(container_id: str = f"containerd://{ID}", uid: str = "uid-1") -> ProbeTarget:
    return ProbeTarget("default", "web", PodUID(uid), "app", container_id=container_id)


def exec_(*argv: str) -> ExecAction:
    return ExecAction(command=tuple(argv))


async def until_it_answers(handler: CRIExecHandler, word: str, *, tries: int = 100) -> None:
    """Run `echo word` every 0.1 s until it succeeds with `word` (grpc reconnects to a
    runtime that came back with a backoff of 3 s at most: timed, nothing to await)."""
    for _ in range(tries):
        got = await handler.run(exec_("echo", word), target(), time_limit=2.0)
        if got == Outcome.succeeded(word, answer=word):
            return
        await anyio.sleep(0.1)
    raise AssertionError(f"echo {word} never succeeded")


@pytest.fixture
def socket(tmp_path: Path) -> Path:
    return tmp_path / "cri.sock"


@pytest.fixture
async def runtime(socket: Path) -> AsyncIterator[Runtime]:
    scripted = Runtime()
    server = await serve(scripted, socket)
    yield scripted
    await server.stop(grace=None)


@pytest.fixture
async def handler(socket: Path) -> AsyncIterator[CRIExecHandler]:
    async with CRIExecHandler(RuntimeClient(str(socket))) as opened:
        yield opened


async def test_a_command_runs_in_the_container_the_status_names(
    runtime: Runtime, handler: CRIExecHandler
) -> None:
    with anyio.fail_after(10):
        got = await handler.run(exec_("echo", "idle"), target(), time_limit=3.0)
    assert got == Outcome.succeeded("idle", answer="idle")
    (request,) = runtime.requests
    assert (request.container_id, list(request.cmd), request.timeout) == (ID, ["echo", "idle"], 3)


@pytest.mark.parametrize(("limit", "seconds"), [(1.0, 1), (2.0, 2), (2.5, 3), (0.2, 1)])
async def test_the_runtime_gets_the_time_limit_in_whole_seconds_rounded_up(
    runtime: Runtime, handler: CRIExecHandler, limit: float, seconds: int
) -> None:
    with anyio.fail_after(10):
        await handler.run(exec_("echo"), target(), time_limit=limit)
    assert runtime.requests[-1].timeout == seconds


async def test_exit_codes_and_runtime_statuses_reach_the_outcome(
    runtime: Runtime, handler: CRIExecHandler
) -> None:
    with anyio.fail_after(10):
        failed = await handler.run(exec_("exit", "4"), target(), time_limit=2.0)
        missing = await handler.run(
            exec_(
                "fail", "UNKNOWN", "OCI runtime exec failed: exec: nope: executable file not found"
            ),
            target(),
            time_limit=2.0,
        )
        gone = await handler.run(
            exec_("fail", "NOT_FOUND", "no such container"), target(), time_limit=2.0
        )
    assert failed == Outcome.failed("bye", answer="bye")
    assert missing == Outcome.failed(
        "OCI runtime exec failed: exec: nope: executable file not found"
    )
    assert gone.result is Result.UNKNOWN
    assert "has no container app" in gone.message


async def test_a_slow_exec_holds_no_other_exec_up(
    runtime: Runtime, handler: CRIExecHandler
) -> None:
    results: list[Outcome] = []

    async def slow() -> None:
        results.append(await handler.run(exec_("sleep", "30"), target(), time_limit=30.0))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(slow)
            await runtime.reaches(lambda: runtime.sleeping == 3)
            quick = await handler.run(exec_("echo", "quick"), target(), time_limit=2.0)
            assert quick == Outcome.succeeded("quick", answer="quick")
            assert runtime.sleeping == 3  # still running: the quick one went past them
            group.cancel_scope.cancel()
        await runtime.reaches(lambda: len(runtime.cancelled) == 3)
    assert results == []


async def test_a_call_deadline_without_the_runtimes_verdict_is_unknown_and_cancels_the_call(
    runtime: Runtime, socket: Path
) -> None:
    # A runtime that ignores ExecSync's timeout (or hangs): the call's own deadline, the
    # timeout plus the grace, ends it as Unknown (issue 23: not the container's fault;
    # the pod keeps its state), and the runtime sees the call cancelled.
    async with CRIExecHandler(RuntimeClient(str(socket)), grace=0.3) as handler:
        with anyio.fail_after(10):
            got = await handler.run(exec_("sleep", "30"), target(), time_limit=0.2)
            await runtime.reaches(lambda: runtime.cancelled == [("sleep", "30")])
    assert got.result is Result.UNKNOWN, got
    assert "gave no verdict on ExecSync within 1.3s (1s timeout + 0.3s grace)" in got.message


async def test_a_runtime_slow_to_start_the_command_is_waited_for(
    runtime: Runtime, handler: CRIExecHandler
) -> None:
    # Issue 23, defect 2: the shim throttled, the command starts 1.5 s after the call;
    # the runtime's timeout (1 s) counts from the start, and it answers. The kubelet
    # waits for that verdict (its call deadline is the timeout + 2 minutes), so do we:
    # the pod stays as the kubelet sees it. (Before: Failed at 1.2 s, "timed out".)
    with anyio.fail_after(10):
        got = await handler.run(exec_("slowstart", "1.5"), target(), time_limit=1.0)
    assert got == Outcome.succeeded("started late", answer="started late")


async def test_the_runtimes_deadline_verdict_is_a_timeout(
    runtime: Runtime, handler: CRIExecHandler
) -> None:
    verdict = "fail DEADLINE_EXCEEDED timeout 1s exceeded: context deadline exceeded"
    with anyio.fail_after(10):
        got = await handler.run(exec_(*verdict.split(" ")), target(), time_limit=1.0)
    assert got == Outcome.failed("command timed out after 1s")


async def test_a_cancelled_run_raises_the_callers_cancellation_and_cancels_the_call(
    runtime: Runtime, handler: CRIExecHandler
) -> None:
    with anyio.fail_after(10):
        with anyio.move_on_after(0.2) as scope:
            await handler.run(exec_("sleep", "30"), target(), time_limit=30.0)
        assert scope.cancelled_caught
        await runtime.reaches(lambda: len(runtime.cancelled) == 1)


async def test_an_answer_over_the_receive_cap_is_failed_and_the_channel_still_works(
    runtime: Runtime, socket: Path
) -> None:
    async with CRIExecHandler(RuntimeClient(str(socket), max_receive=64 * 1024)) as handler:
        with anyio.fail_after(10):
            flood = await handler.run(exec_("flood", str(100_000)), target(), time_limit=2.0)
            fits = await handler.run(exec_("flood", str(10_000)), target(), time_limit=2.0)
    assert flood == Outcome.failed(
        "the command's output is larger than 65536 bytes, more than a probe may answer with "
        "over the container runtime socket"
    )
    assert fits.result is Result.SUCCEEDED
    assert len(fits.message) == 1024  # kept: 1 KiB


async def test_a_runtime_that_goes_away_is_unknown_and_one_that_comes_back_is_used(
    socket: Path, handler: CRIExecHandler
) -> None:
    first = Runtime()
    server = await serve(first, socket)
    with anyio.fail_after(20):
        assert (
            await handler.run(exec_("echo", "a"), target(), time_limit=2.0)
        ).result is Result.SUCCEEDED
        await server.stop(grace=None)
        down = await handler.run(exec_("echo", "b"), target(), time_limit=2.0)
        assert down.result is Result.UNKNOWN
        assert down.message.startswith(f"container runtime at unix://{socket}: UNAVAILABLE")
        second = Runtime()
        server = await serve(second, socket)
        await until_it_answers(handler, "c")
    await server.stop(grace=None)
    assert [list(r.cmd) for r in second.requests][-1] == ["echo", "c"]


async def test_a_socket_absent_at_start_is_unknown_and_asked_again_later(
    socket: Path, handler: CRIExecHandler
) -> None:
    with anyio.fail_after(20):
        absent = await handler.run(exec_("echo", "a"), target(), time_limit=1.0)
        assert absent.result is Result.UNKNOWN
        assert "UNAVAILABLE" in absent.message
        runtime = Runtime()
        server = await serve(runtime, socket)
        await until_it_answers(handler, "a")
        await handler.run(exec_("echo", "b"), target(), time_limit=1.0)
    await server.stop(grace=None)
    assert runtime.versions == 1  # asked until it answered, then kept


async def test_a_container_of_another_runtime_is_unknown_and_logged_once_per_pod(
    runtime: Runtime, handler: CRIExecHandler
) -> None:
    with anyio.fail_after(10), capture_logs() as logs:
        outcomes = [
            await handler.run(exec_("echo"), target(f"cri-o://{ID}", uid), time_limit=1.0)
            for uid in ("uid-1", "uid-1", "uid-2", "uid-1")
        ]
    assert {o.result for o in outcomes} == {Result.UNKNOWN}
    assert "the container runs on 'cri-o' but --cri-endpoint" in outcomes[0].message
    warned = [e for e in logs if e["event"] == "probe.cri_container_unusable"]
    assert [e["pod"] for e in warned] == ["default/web", "default/web"]  # uid-1, uid-2
    assert runtime.requests == []  # nothing ran in any container


async def test_a_closed_handler_runs_nothing(runtime: Runtime, socket: Path) -> None:
    handler = CRIExecHandler(RuntimeClient(str(socket)))
    with anyio.fail_after(10):
        assert (
            await handler.run(exec_("echo"), target(), time_limit=1.0)
        ).result is Result.SUCCEEDED
        await handler.aclose()
        got = await handler.run(exec_("echo"), target(), time_limit=1.0)
    assert got == Outcome.unknown("the container runtime client is closed")
    assert len(runtime.requests) == 1


async def test_a_missing_extra_is_unknown_and_named(
    monkeypatch: pytest.MonkeyPatch, socket: Path
) -> None:
    monkeypatch.setattr(client_module, "_load", lambda: f"{EXTRA_HINT} (ImportError: no grpc)")
    async with CRIExecHandler(RuntimeClient(str(socket))) as handler:
        with anyio.fail_after(10):
            assert await handler.unavailable() == f"{EXTRA_HINT} (ImportError: no grpc)"
            got = await handler.run(exec_("echo"), target(), time_limit=1.0)
    assert got == Outcome.unknown(f"{EXTRA_HINT} (ImportError: no grpc)")
    assert "pip install 'probemarker[cri]'" in EXTRA_HINT


async def test_an_action_that_is_not_exec_is_a_bug_of_the_caller(handler: CRIExecHandler) -> None:
    with pytest.raises(TypeError, match="CRIExecHandler runs exec actions, not HTTPGetAction"):
        await handler.run(HTTPGetAction(port=80), target(), time_limit=1.0)


async def test_refusals_are_timed_from_the_first_until_the_runtime_answers(socket: Path) -> None:
    clock = FakeClock()
    client = RuntimeClient(str(socket), clock=clock)
    async with CRIExecHandler(client) as handler:
        with anyio.fail_after(20):
            assert client.refused_for() == (0.0, "")
            await handler.run(exec_("echo"), target(), time_limit=1.0)
            clock.advance(30)
            await handler.run(exec_("echo"), target(), time_limit=1.0)
            seconds, error = client.refused_for()
            assert seconds == 30
            assert error.startswith("UNAVAILABLE")
            runtime = Runtime()
            server = await serve(runtime, socket)
            await until_it_answers(handler, "a")
            assert client.refused_for() == (0.0, "")
            # A refusal after an answer starts a new count.
            await server.stop(grace=None)
            await handler.run(exec_("echo"), target(), time_limit=1.0)
            assert client.refused_for()[1].startswith("UNAVAILABLE")


async def test_whose_container_it_is_is_asked_once_per_container(
    runtime: Runtime, handler: CRIExecHandler
) -> None:
    with anyio.fail_after(10):
        for _ in range(3):
            got = await handler.run(exec_("echo", "x"), target(), time_limit=1.0)
            assert got == Outcome.succeeded("x", answer="x")
    assert runtime.statuses == [ID]


async def test_another_pods_container_runs_nothing_and_is_logged_once_per_pod(
    runtime: Runtime, handler: CRIExecHandler
) -> None:
    runtime.owners[ID] = {
        "io.kubernetes.pod.uid": "uid-9",
        "io.kubernetes.container.name": "app",
        "io.kubernetes.pod.namespace": "default",
        "io.kubernetes.pod.name": "bank",
    }
    with anyio.fail_after(10), capture_logs() as logs:
        first = await handler.run(exec_("echo", "x"), target(), time_limit=1.0)
        again = await handler.run(exec_("echo", "x"), target(), time_limit=1.0)
    assert first.result is again.result is Result.UNKNOWN
    assert "which the runtime says is container 'app' of pod default/bank (uid uid-9)" in (
        first.message
    )
    assert runtime.requests == []  # no ExecSync at all
    assert runtime.statuses == [ID, ID]  # a refusal is not remembered as checked
    assert len([e for e in logs if e["event"] == "probe.cri_container_unusable"]) == 1


# Another pod's container whose ID shares its first six digits with ID's.
OTHER = "c0ffee" + "1" * 58
BANK = {
    "io.kubernetes.pod.uid": "uid-9",
    "io.kubernetes.container.name": "app",
    "io.kubernetes.pod.namespace": "bank",
    "io.kubernetes.pod.name": "vault",
}


@pytest.mark.parametrize(
    "bare",
    [
        pytest.param(ID[:6], id="prefix"),
        pytest.param(ID[:12], id="prefix-12"),
        pytest.param(ID[:63], id="one-short"),
        pytest.param(ID + "0", id="one-long"),
        pytest.param(ID.upper(), id="uppercase"),
        pytest.param(ID[:-1] + "F", id="one-uppercase-digit"),
        pytest.param(f" {ID}", id="leading-space"),
        pytest.param(f"{ID} ", id="trailing-space"),
        pytest.param(f"{ID}\n", id="trailing-newline"),
        pytest.param(f"\t{ID}", id="leading-tab"),
        pytest.param(ID[:-1] + "g", id="not-hex"),
        pytest.param(ID[:-1] + "\u0661", id="arabic-indic-digit"),
        pytest.param(f"{ID}://x", id="another-scheme-part"),
    ],
)
async def test_a_container_id_not_in_the_runtimes_full_form_reaches_no_runtime_call(
    runtime: Runtime, handler: CRIExecHandler, bare: str
) -> None:
    # containerd resolves any unique prefix of an ID (its CRI store is a truncindex):
    # the pod's own container today, another pod's tomorrow. Nothing but the full,
    # lowercase ID the kubelet writes may reach the runtime.
    runtime.containers = [ID]
    with anyio.fail_after(10), capture_logs() as logs:
        outcomes = [
            await handler.run(exec_("echo", "x"), target(f"containerd://{bare}"), time_limit=1.0)
            for _ in range(2)
        ]
    assert {o.result for o in outcomes} == {Result.UNKNOWN}
    message = outcomes[0].message
    assert message.startswith("container app of pod default/web: containerID 'containerd://")
    assert "is not a full containerd container ID (64 lowercase hex digits" in message
    assert "nothing is run" in message
    assert runtime.statuses == []  # not even ContainerStatus
    assert runtime.requests == []
    warned = [e for e in logs if e["event"] == "probe.cri_container_unusable"]
    assert [(e["pod"], e["container"]) for e in warned] == [("default/web", "app")]


async def test_a_prefix_that_later_names_another_pods_container_runs_nothing_there(
    runtime: Runtime, handler: CRIExecHandler
) -> None:
    # The attack of issue 22: a pod status patched to `containerd://c0ffee` names the
    # pod's own container while it exists (and a check that passes is remembered);
    # once it is gone, another pod's container with the same first digits answers to it.
    prefix = target(f"containerd://{ID[:6]}")
    runtime.containers = [ID]
    with anyio.fail_after(10):
        first = await handler.run(exec_("echo", "mine"), prefix, time_limit=1.0)
        runtime.containers = [OTHER]
        runtime.owners[OTHER] = BANK
        second = await handler.run(exec_("echo", "theirs"), prefix, time_limit=1.0)
    assert first.result is second.result is Result.UNKNOWN
    assert runtime.ran_in == []  # neither the pod's container nor the bank's


async def test_a_runtime_answering_for_another_id_than_asked_runs_nothing(
    runtime: Runtime, handler: CRIExecHandler
) -> None:
    # Should a runtime ever resolve other spellings of an ID, its answer names the
    # container it found: only the ID asked for, confirmed, may reach ExecSync.
    runtime.containers = [ID, OTHER]
    runtime.answer_ids[ID] = OTHER
    with anyio.fail_after(10), capture_logs() as logs:
        got = await handler.run(exec_("echo", "x"), target(), time_limit=1.0)
        again = await handler.run(exec_("echo", "x"), target(), time_limit=1.0)
    assert got.result is again.result is Result.UNKNOWN
    assert f"the runtime answered ContainerStatus for {ID[:12]} with container {OTHER!r}" in (
        got.message
    )
    assert runtime.requests == []
    assert runtime.statuses == [ID, ID]  # a refusal is not remembered as checked
    assert len([e for e in logs if e["event"] == "probe.cri_container_unusable"]) == 1


async def test_the_full_id_the_runtime_confirmed_is_what_execsync_gets(
    runtime: Runtime, handler: CRIExecHandler
) -> None:
    runtime.containers = [ID, OTHER]
    with anyio.fail_after(10):
        for _ in range(2):
            assert await handler.run(exec_("echo", "x"), target(), time_limit=1.0) == (
                Outcome.succeeded("x", answer="x")
            )
    assert runtime.statuses == [ID]
    assert [r.container_id for r in runtime.requests] == [ID, ID]
    assert runtime.ran_in == [ID, ID]
