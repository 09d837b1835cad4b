"""The runtime down and back: what a client sees, and that containers live through it.

containerd stopped (SIGTERM) removes its socket; containerd killed (SIGKILL) leaves the
socket file with nobody listening. Both are gRPC UNAVAILABLE at once, told apart only by
the text. The containers keep running under their shims, and containerd started again
with the same configuration finds them: ExecSync works on the same container id.
"""

from __future__ import annotations

import grpc
import pytest

from tests.cri.client import CRIClient
from tests.cri.runtime import RuntimeControl, StartContainer, rpc_error

pytestmark = pytest.mark.cri


@pytest.mark.parametrize(
    ("kill", "reason"),
    [
        pytest.param(False, "No such file or directory", id="stopped-socket-gone"),
        pytest.param(True, "Connection refused", id="killed-socket-left"),
    ],
)
def test_unavailable_while_down_and_the_container_answers_after(
    cri: CRIClient,
    start_container: StartContainer,
    cri_runtime: RuntimeControl,
    kill: bool,
    reason: str,
) -> None:
    """While down, every call (Version, ExecSync) is gRPC UNAVAILABLE with details
    `failed to connect to all addresses; last error: FAILED_PRECONDITION:
    unix:<socket>: connect failed: addr: unix:<socket> error: <reason>`."""
    container_id = start_container("survivor")
    cri_runtime.down(kill=kill)
    socket = cri.endpoint.removeprefix("unix://")
    expected = (
        f"failed to connect to all addresses; last error: FAILED_PRECONDITION: unix:{socket}: "
        f"connect failed: addr: unix:{socket} error: {reason}"
    )
    for call in (cri.version, lambda: cri.exec_sync(container_id, ["true"], timeout=5)):
        error = rpc_error(call)
        assert error.code() == grpc.StatusCode.UNAVAILABLE
        assert error.details() == expected

    cri_runtime.up()
    # The client's channel reconnects after its backoff (about a second here).
    cri.wait_ready(timeout=30)
    answer = cri.exec_sync(container_id, ["echo", "back"], timeout=10)
    assert (answer.stdout, answer.exit_code) == (b"back\n", 0)
    status = cri.container_status(container_id)
    assert cri.pb.ContainerState.Name(status.state) == "CONTAINER_RUNNING"
