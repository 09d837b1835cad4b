"""The daemon's cri exec backend against real containers (containerd and runc).

`CRIExecHandler` with its `RuntimeClient`, the daemon's own code, asked to run
commands in containers the tests' own CRI client started (tests/cri/client.py, which
shares nothing with the daemon's). Every outcome of the issue's list, from the
runtime's real answers: exit codes, both streams and their cap, a timeout the runtime
kills, a missing executable, a stopped container, a removed one, a slow exec beside a
quick one, and the runtime down and back.
"""

from __future__ import annotations

import os
import signal

import anyio
import pytest

from probemarker.api.model import ExecAction
from probemarker.cri.client import RuntimeClient, RuntimeInfo
from probemarker.cri.endpoint import socket_path
from probemarker.probe.cri import CRIExecHandler
from probemarker.probe.handler import ProbeTarget
from probemarker.probe.outcome import Outcome, Result
from probemarker.watch.pods import PodUID
from tests.cri.client import CRIClient
from tests.cri.runtime import (
    Containers,
    RuntimeControl,
    StartContainer,
    kubelet_labels,
    processes,
)

pytestmark = pytest.mark.cri


UID = "0b2f8a86-5c8e-4b5e-9f57-0a1f3c2d4e5f"
OURS = kubelet_labels(uid=UID, container="app", namespace="default", pod="gs-1")


def target(container_id: str) -> ProbeTarget:
    return ProbeTarget(
        "default", "gs-1", PodUID(UID), "app", container_id=f"containerd://{container_id}"
    )


@pytest.fixture
def start_ours(start_container: StartContainer) -> StartContainer:
    """Containers the kubelet made for the probe's pod and container (its labels)."""

    def start(name: str, command: list[str] | None = None) -> str:
        return start_container(name, command, labels=OURS)

    return start


def sh(script: str) -> ExecAction:
    return ExecAction(command=("sh", "-c", script))


async def run(
    endpoint: str, container_id: str, action: ExecAction, *, limit: float = 5.0
) -> Outcome:
    async with CRIExecHandler(RuntimeClient(socket_path(endpoint))) as handler:
        with anyio.fail_after(limit + 10):
            return await handler.run(action, target(container_id), time_limit=limit)


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        pytest.param("echo idle", Outcome.succeeded("idle", answer="idle"), id="exit-0-stdout"),
        pytest.param(
            "echo out; echo err >&2; exit 3",
            Outcome.failed("err", answer="out"),
            id="exit-3-stderr",
        ),
        pytest.param(
            "echo only-out; exit 1",
            Outcome.failed("only-out", answer="only-out"),
            id="exit-1-stdout",
        ),
        pytest.param(
            "exit 42", Outcome.failed("command exited with code 42", answer=""), id="exit-42"
        ),
        pytest.param(
            "kill -9 $$", Outcome.failed("command exited with code 137", answer=""), id="killed"
        ),
    ],
)
async def test_exit_codes_and_streams(
    cri_endpoint: str, start_ours: StartContainer, script: str, expected: Outcome
) -> None:
    container_id = start_ours("streams")
    assert await run(cri_endpoint, container_id, sh(script)) == expected


async def test_output_beyond_the_cap_is_read_and_cut_at_1_kib(
    cri_endpoint: str, start_ours: StartContainer
) -> None:
    container_id = start_ours("flood")
    # 200 KiB on each stream; stdout kept on success: 1 KiB of it.
    script = "yes o | head -c 204800; yes e | head -c 204800 >&2"
    got = await run(cri_endpoint, container_id, sh(script))
    assert got.result is Result.SUCCEEDED
    assert len(got.message.encode()) <= 1024
    assert got.message.startswith("o\no\n")


async def test_a_command_past_its_timeout_is_failed_and_killed(
    cri: CRIClient, cri_endpoint: str, start_ours: StartContainer
) -> None:
    container_id = start_ours("slow")
    got = await run(cri_endpoint, container_id, ExecAction(command=("sleep", "37")), limit=1.0)
    assert got == Outcome.failed("command timed out after 1s")
    assert not [p for p in processes(cri, container_id) if p.startswith("sleep 37")]


async def test_a_missing_executable_is_failed_with_the_runtimes_message(
    cri_endpoint: str, start_ours: StartContainer
) -> None:
    container_id = start_ours("missing")
    got = await run(cri_endpoint, container_id, ExecAction(command=("no-such-exe",)))
    assert got.result is Result.FAILED
    assert "OCI runtime exec failed" in got.message
    assert 'exec: "no-such-exe": executable file not found in $PATH' in got.message


async def test_a_stopped_container_is_failed_as_not_running(
    cri_endpoint: str, start_ours: StartContainer, cri_containers: Containers
) -> None:
    container_id = start_ours("stopped")
    cri_containers.stop(container_id)
    got = await run(cri_endpoint, container_id, sh("echo hi"))
    assert got == Outcome.failed(
        "container app is not running: failed to exec in container: container is in "
        "CONTAINER_EXITED state"
    )


async def test_a_removed_container_is_unknown(
    cri_endpoint: str, start_ours: StartContainer, cri_containers: Containers
) -> None:
    container_id = start_ours("removed")
    cri_containers.remove(container_id)
    got = await run(cri_endpoint, container_id, sh("echo hi"))
    assert got.result is Result.UNKNOWN
    assert "has no container app (the pod status may be behind)" in got.message


async def test_a_slow_exec_holds_no_other_exec_up(
    cri_endpoint: str, start_ours: StartContainer
) -> None:
    container_id = start_ours("both")
    finished: list[str] = []
    async with CRIExecHandler(RuntimeClient(socket_path(cri_endpoint))) as handler:

        async def one(name: str, script: str, limit: float) -> None:
            got = await handler.run(sh(script), target(container_id), time_limit=limit)
            assert got.result is Result.SUCCEEDED, got
            finished.append(name)

        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(one, "slow", "sleep 3; echo slow", 10.0)
                await anyio.sleep(0.3)  # the slow one is in the runtime by now
                group.start_soon(one, "quick", "echo quick", 5.0)
    assert finished == ["quick", "slow"]


async def test_the_runtime_down_is_unknown_and_back_is_used_again(
    cri_endpoint: str, start_ours: StartContainer, cri_runtime: RuntimeControl
) -> None:
    container_id = start_ours("survivor")
    async with CRIExecHandler(RuntimeClient(socket_path(cri_endpoint))) as handler:
        with anyio.fail_after(60):
            before = await handler.run(sh("echo up"), target(container_id), time_limit=5.0)
            assert before == Outcome.succeeded("up", answer="up")
            info = await handler.runtime(wait=5.0)
            assert isinstance(info, RuntimeInfo)
            assert info.name == "containerd"
            await anyio.to_thread.run_sync(cri_runtime.down)
            down = await handler.run(sh("echo down"), target(container_id), time_limit=5.0)
            assert down.result is Result.UNKNOWN
            assert "UNAVAILABLE" in down.message
            await anyio.to_thread.run_sync(cri_runtime.up)
            for _ in range(100):  # grpc reconnects with a backoff of 3 s at most
                again = await handler.run(sh("echo again"), target(container_id), time_limit=5.0)
                if again.result is not Result.UNKNOWN:
                    break
                await anyio.sleep(0.1)
    assert again == Outcome.succeeded(
        "again", answer="again"
    )  # the same container, through its shim


async def test_a_child_holding_the_output_open_is_unknown_at_the_call_deadline(
    cri_endpoint: str, start_ours: StartContainer
) -> None:
    # sh exits at once; containerd then waits for the output pipes, which the background
    # sleep holds, so no verdict comes within the timeout + grace (the kubelet would
    # wait 2 minutes and see exit 0 at 30 s). Issue 23: a client deadline without the
    # runtime's verdict is Unknown, never Failed.
    container_id = start_ours("child")
    async with CRIExecHandler(RuntimeClient(socket_path(cri_endpoint)), grace=1.0) as handler:
        with anyio.fail_after(15):
            got = await handler.run(
                sh("sleep 30 & echo started"), target(container_id), time_limit=1.0
            )
    assert got.result is Result.UNKNOWN, got
    assert "gave no verdict on ExecSync within 2s (1s timeout + 1s grace)" in got.message


async def test_a_hanging_command_never_runs_twice_at_once(
    cri: CRIClient, cri_endpoint: str, start_ours: StartContainer
) -> None:
    # Issue 23: `sleep 30`, timeout 1, run back to back as the engine runs one probe (a
    # run starts only when the last one has ended): at most one in the container.
    container_id = start_ours("hang")
    most = 0
    done = anyio.Event()

    async def count() -> None:
        nonlocal most
        while not done.is_set():
            running = [p for p in processes(cri, container_id) if p.startswith("sleep 31")]
            most = max(most, len(running))
            await anyio.sleep(0.1)

    async with (
        CRIExecHandler(RuntimeClient(socket_path(cri_endpoint))) as handler,
        anyio.create_task_group() as group,
    ):
        group.start_soon(count)
        with anyio.fail_after(60):
            outcomes = [
                await handler.run(
                    ExecAction(command=("sleep", "31")), target(container_id), time_limit=1.0
                )
                for _ in range(4)
            ]
        done.set()
    assert outcomes == [Outcome.failed("command timed out after 1s")] * 4
    assert most <= 1


async def test_output_over_the_receive_cap_is_failed(
    cri_endpoint: str, start_ours: StartContainer
) -> None:
    container_id = start_ours("huge")
    got = await run(cri_endpoint, container_id, sh("yes | head -c 2000000"))
    assert got.result is Result.FAILED
    assert got.message.startswith("the command's output is larger than 1048576 bytes")


async def test_a_hung_runtime_is_unknown_not_failed(
    cri_endpoint: str, start_ours: StartContainer, cri_runtime: RuntimeControl
) -> None:
    container_id = start_ours("frozen")
    pid = int((cri_runtime.state_dir / "containerd.pid").read_text())
    async with CRIExecHandler(RuntimeClient(socket_path(cri_endpoint))) as handler:
        with anyio.fail_after(30):
            assert await handler.run(sh("echo up"), target(container_id), time_limit=2.0) == (
                Outcome.succeeded("up", answer="up")
            )
            os.kill(pid, signal.SIGSTOP)  # containerd takes calls and answers none
            try:
                got = await handler.run(sh("echo hi"), target(container_id), time_limit=1.0)
            finally:
                os.kill(pid, signal.SIGCONT)
    assert got.result is Result.UNKNOWN
    assert "gave no verdict on ExecSync within 11s (1s timeout + 10s grace)" in got.message


@pytest.mark.parametrize(
    ("labels", "needle"),
    [
        pytest.param(
            kubelet_labels(uid="another-uid", container="app", namespace="default", pod="other"),
            "which the runtime says is container 'app' of pod default/other (uid another-uid), "
            f"not 'app' of this pod (uid {UID}); nothing is run in it",
            id="another-pod",
        ),
        pytest.param(
            kubelet_labels(uid=UID, container="sidecar", namespace="default", pod="gs-1"),
            "is container 'sidecar' of pod default/gs-1",
            id="another-container",
        ),
        pytest.param({}, "has no kubelet labels", id="not-the-kubelets"),
    ],
)
async def test_a_container_the_runtime_says_is_not_the_probes_runs_nothing(
    cri: CRIClient,
    cri_endpoint: str,
    start_container: StartContainer,
    labels: dict[str, str],
    needle: str,
) -> None:
    # The pod status names a container, but the runtime's labels say whose it is: a
    # forged, copied or stale status must not make the daemon run a command there.
    container_id = start_container("foreign", labels=labels)
    got = await run(cri_endpoint, container_id, sh("touch /tmp/ran"))
    assert got.result is Result.UNKNOWN
    assert needle in got.message
    answer = cri.exec_sync(container_id, ["ls", "/tmp/ran"], timeout=5)
    assert answer.exit_code != 0  # the probe's command never ran
