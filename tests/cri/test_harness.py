"""The runtime harness itself: what a real containerd answers, through the tests' client.

These pin down the answers the daemon's CRI backend maps to outcomes (docs/engine.md, issue 17),
as containerd 1.6.20 (Debian 12) with runc 1.1.5 gives them. The exact texts are in the
docstrings and asserted, so a runtime that answers differently fails here first, with
the new text in the failure.
"""

from __future__ import annotations

import re

import grpc
import pytest

from tests.cri.client import CRIClient
from tests.cri.runtime import (
    Containers,
    StartContainer,
    processes,
    rpc_error,
    wait_for_state,
)

pytestmark = pytest.mark.cri


def test_version_names_containerd_and_runtime_v1(cri: CRIClient) -> None:
    version = cri.version()
    assert version.runtime_name == "containerd"
    assert version.runtime_api_version == "v1"
    assert version.runtime_version  # e.g. "1.6.20~ds1"


def test_a_started_container_is_running(cri: CRIClient, start_container: StartContainer) -> None:
    container_id = start_container("running")
    assert re.fullmatch(r"[0-9a-f]{64}", container_id)
    status = cri.container_status(container_id)
    assert cri.pb.ContainerState.Name(status.state) == "CONTAINER_RUNNING"
    assert status.metadata.name == "running"
    assert status.id == container_id


@pytest.mark.parametrize(
    ("script", "stdout", "stderr", "exit_code"),
    [
        pytest.param("echo out; echo err >&2; exit 3", b"out\n", b"err\n", 3, id="exit-3"),
        pytest.param("printf 'ok'", b"ok", b"", 0, id="exit-0"),
        pytest.param("echo only-err >&2; false", b"", b"only-err\n", 1, id="stderr-only"),
    ],
)
def test_exec_sync_gives_both_streams_and_the_exit_code(
    cri: CRIClient,
    start_container: StartContainer,
    script: str,
    stdout: bytes,
    stderr: bytes,
    exit_code: int,
) -> None:
    container_id = start_container("streams")
    answer = cri.exec_sync(container_id, ["sh", "-c", script], timeout=10)
    assert (answer.stdout, answer.stderr, answer.exit_code) == (stdout, stderr, exit_code)


@pytest.mark.parametrize(
    ("command", "tail"),
    [
        pytest.param(
            "/no/such/exe",
            'exec: "/no/such/exe": stat /no/such/exe: no such file or directory: unknown',
            id="path",
        ),
        pytest.param(
            "no-such-exe",
            'exec: "no-such-exe": executable file not found in $PATH: unknown',
            id="name-not-on-PATH",
        ),
    ],
)
def test_a_missing_executable_is_unknown_with_the_runtimes_message(
    cri: CRIClient, start_container: StartContainer, command: str, tail: str
) -> None:
    """gRPC UNKNOWN, details (the exec id is a fresh 64-hex id each time):

    failed to exec in container: failed to start exec "<exec id>": OCI runtime exec
    failed: exec failed: unable to start container process: exec: "/no/such/exe": stat
    /no/such/exe: no such file or directory: unknown

    and for a bare name not on PATH: ... exec: "no-such-exe": executable file not found
    in $PATH: unknown
    """
    container_id = start_container("missing")
    error = rpc_error(lambda: cri.exec_sync(container_id, [command], timeout=10))
    assert error.code() == grpc.StatusCode.UNKNOWN
    prefix = (
        r'failed to exec in container: failed to start exec "[0-9a-f]{64}": OCI runtime exec '
        r"failed: exec failed: unable to start container process: "
    )
    assert re.fullmatch(prefix + re.escape(tail), error.details() or "")


def test_exec_in_a_stopped_container_is_unknown_not_running(
    cri: CRIClient, cri_containers: Containers
) -> None:
    """StopContainer (SIGKILL at once) leaves CONTAINER_EXITED, exit code 137, reason
    "Error"; ExecSync then answers gRPC UNKNOWN with details
    `failed to exec in container: container is in CONTAINER_EXITED state`
    (the same code as a missing executable: only the text tells them apart)."""
    container_id = cri_containers.start("stopped")
    cri_containers.stop(container_id)
    status = cri.container_status(container_id)
    assert cri.pb.ContainerState.Name(status.state) == "CONTAINER_EXITED"
    assert (status.exit_code, status.reason) == (137, "Error")
    error = rpc_error(lambda: cri.exec_sync(container_id, ["true"], timeout=10))
    assert error.code() == grpc.StatusCode.UNKNOWN
    assert error.details() == "failed to exec in container: container is in CONTAINER_EXITED state"


def test_exec_in_a_container_that_exited_by_itself(
    cri: CRIClient, start_container: StartContainer
) -> None:
    """The container's own exit (code 4, reason "Error") gives the same answer as a stop."""
    container_id = start_container("exits", ["sh", "-c", "exit 4"])
    exited = cri.pb.CONTAINER_EXITED
    status = wait_for_state(cri, container_id, exited, within=20)
    assert (status.state, status.exit_code, status.reason) == (exited, 4, "Error")
    error = rpc_error(lambda: cri.exec_sync(container_id, ["true"], timeout=10))
    assert error.code() == grpc.StatusCode.UNKNOWN
    assert error.details() == "failed to exec in container: container is in CONTAINER_EXITED state"


def test_exec_in_a_removed_container_is_not_found(
    cri: CRIClient, cri_containers: Containers
) -> None:
    """gRPC NOT_FOUND, details
    `failed to exec in container: failed to find container "<id>" in store: not found`;
    an id with the pod status's `containerd://` prefix left on gets the same answer."""
    container_id = cri_containers.start("removed")
    cri_containers.remove(container_id)
    for wrong in (container_id, f"containerd://{container_id}"):
        error = rpc_error(lambda wrong=wrong: cri.exec_sync(wrong, ["true"], timeout=10))
        assert error.code() == grpc.StatusCode.NOT_FOUND
        assert error.details() == (
            f'failed to exec in container: failed to find container "{wrong}" in store: not found'
        )


def test_a_timeout_is_deadline_exceeded_and_the_process_is_killed(
    cri: CRIClient, start_container: StartContainer
) -> None:
    """`sleep 37` with timeout 1: gRPC DEADLINE_EXCEEDED, details
    `failed to exec in container: timeout 1s exceeded: context deadline exceeded`;
    containerd has SIGKILLed the process before it answers."""
    container_id = start_container("timeout")
    error = rpc_error(lambda: cri.exec_sync(container_id, ["sleep", "37"], timeout=1))
    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert error.details() == (
        "failed to exec in container: timeout 1s exceeded: context deadline exceeded"
    )
    assert "sleep 37" not in processes(cri, container_id)


def test_a_timed_out_commands_child_survives_and_holds_the_answer_back(
    cri: CRIClient, start_container: StartContainer
) -> None:
    """containerd kills only the process it started, then waits for the output pipes to
    close: a child still holding them (here `sleep 6` under `sh -c`) is not killed, and
    the runtime's DEADLINE_EXCEEDED comes only when that child exits. A caller must keep
    its own gRPC deadline: here 3 s ends the call first, with grpc's own
    DEADLINE_EXCEEDED, details `Deadline Exceeded`, while the child is still running."""
    container_id = start_container("orphan")
    error = rpc_error(
        lambda: cri.exec_sync(
            container_id, ["sh", "-c", "sleep 6; echo late"], timeout=1, deadline=3.0
        )
    )
    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert error.details() == "Deadline Exceeded"
    assert "sleep 6" in processes(cri, container_id)


@pytest.mark.parametrize(
    ("size", "receive_limit", "details"),
    [
        pytest.param(
            5_000_000,
            None,
            "Stream removed (CLIENT: Received message larger than max (5000005 vs. 4194304))",
            id="over-grpc-python-default-4MiB",
        ),
        pytest.param(
            16 * 1024 * 1024,
            -1,
            "grpc: trying to send message larger than max (16777221 vs. 16777216)",
            id="over-containerd-16MiB",
        ),
    ],
)
def test_output_beyond_a_message_limit_is_resource_exhausted(
    cri: CRIClient,
    start_container: StartContainer,
    size: int,
    receive_limit: int | None,
    details: str,
) -> None:
    """ExecSync brings the whole output in one message: above the client's receive limit
    (grpc's default, 4 MiB) or containerd's send limit (16 MiB) the call fails with gRPC
    RESOURCE_EXHAUSTED, and none of the output arrives."""
    container_id = start_container("big")
    options = [] if receive_limit is None else [("grpc.max_receive_message_length", receive_limit)]
    with CRIClient(cri.endpoint, cri.pb, options=options) as client:
        error = rpc_error(
            lambda: client.exec_sync(
                container_id, ["head", "-c", str(size), "/dev/zero"], timeout=30
            )
        )
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error.details() == details
