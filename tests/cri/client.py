"""The tests' own CRI client: runtime.v1 calls to a real containerd, for the fixtures.

Independent of the daemon's client (probemarker/cri/, never imported here): the messages
come from tests/cri/fixture.proto, compiled at test-session time with grpc_tools.protoc
into a temporary directory (`compile_messages`), and the calls go through a plain
synchronous grpc channel on the methods' full paths (`/runtime.v1.RuntimeService/<Method>`),
so what the daemon is tested against shares no code with the daemon.

Inputs: an endpoint (`unix:///path/containerd.sock`). Outputs: protobuf messages, and
`grpc.RpcError` as the runtime raised it (code and details untouched: the tests record
them). Every call has a deadline.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc

PROTO = Path(__file__).with_name("fixture.proto")
SERVICE = "/runtime.v1.RuntimeService/"
# Deadline of every call but ExecSync (whose deadline follows its own timeout).
CALL_TIMEOUT = 30.0
# ExecSync's gRPC deadline beyond the CRI timeout: the runtime answers a command that
# outlived its timeout with DEADLINE_EXCEEDED itself, after it has killed the process.
EXEC_GRACE = 15.0


def compile_messages(out_dir: Path) -> ModuleType:
    """Compile fixture.proto into out_dir and import the generated module.

    Imported under a private name from out_dir (no sys.path change); call it once per
    process, since the generated module registers its file in protobuf's default pool.
    """
    from grpc_tools import protoc  # the test extra; imported here, where it is needed

    args = [
        "grpc_tools.protoc",
        f"-I{PROTO.parent}",
        f"--python_out={out_dir}",
        str(PROTO),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"grpc_tools.protoc could not compile {PROTO} into {out_dir}")
    path = out_dir / "fixture_pb2.py"
    spec = importlib.util.spec_from_file_location("probemarker_tests_cri_fixture_pb2", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot import the compiled {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class CRIClient:
    """Blocking runtime.v1 calls on one channel; `pb` is the module compile_messages gave."""

    def __init__(
        self, endpoint: str, pb: ModuleType, *, options: Sequence[tuple[str, Any]] = ()
    ) -> None:
        """options: grpc channel arguments, e.g. ("grpc.max_receive_message_length", -1)."""
        self.endpoint = endpoint
        self.pb = pb
        self._channel = grpc.insecure_channel(endpoint, options=list(options))

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> CRIClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait_ready(self, *, timeout: float) -> None:
        """Until the runtime answers Version, for at most timeout seconds (after the runtime
        came back, the channel may still be in reconnect backoff): a Version call that
        waits for the channel (wait_for_ready) instead of failing fast."""
        pb = self.pb
        self.call(
            "Version", pb.VersionRequest(), pb.VersionResponse, timeout=timeout, wait_for_ready=True
        )

    def call(
        self,
        method: str,
        request: Any,
        response_type: Any,
        *,
        timeout: float,
        wait_for_ready: bool = False,
    ) -> Any:
        """One unary call to /runtime.v1.RuntimeService/<method>."""
        stub = self._channel.unary_unary(
            SERVICE + method,
            request_serializer=type(request).SerializeToString,
            response_deserializer=response_type.FromString,
        )
        return stub(request, timeout=timeout, wait_for_ready=wait_for_ready)

    def version(self) -> Any:
        pb = self.pb
        return self.call("Version", pb.VersionRequest(), pb.VersionResponse, timeout=CALL_TIMEOUT)

    def run_pod_sandbox(self, config: Any) -> str:
        pb = self.pb
        answer = self.call(
            "RunPodSandbox",
            pb.RunPodSandboxRequest(config=config),
            pb.RunPodSandboxResponse,
            timeout=CALL_TIMEOUT,
        )
        return str(answer.pod_sandbox_id)

    def stop_pod_sandbox(self, sandbox_id: str) -> None:
        pb = self.pb
        self.call(
            "StopPodSandbox",
            pb.StopPodSandboxRequest(pod_sandbox_id=sandbox_id),
            pb.StopPodSandboxResponse,
            timeout=CALL_TIMEOUT,
        )

    def remove_pod_sandbox(self, sandbox_id: str) -> None:
        pb = self.pb
        self.call(
            "RemovePodSandbox",
            pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id),
            pb.RemovePodSandboxResponse,
            timeout=CALL_TIMEOUT,
        )

    def create_container(self, sandbox_id: str, config: Any, sandbox_config: Any) -> str:
        pb = self.pb
        answer = self.call(
            "CreateContainer",
            pb.CreateContainerRequest(
                pod_sandbox_id=sandbox_id, config=config, sandbox_config=sandbox_config
            ),
            pb.CreateContainerResponse,
            timeout=CALL_TIMEOUT,
        )
        return str(answer.container_id)

    def start_container(self, container_id: str) -> None:
        pb = self.pb
        self.call(
            "StartContainer",
            pb.StartContainerRequest(container_id=container_id),
            pb.StartContainerResponse,
            timeout=CALL_TIMEOUT,
        )

    def stop_container(self, container_id: str, *, grace: int = 0) -> None:
        """Stop: SIGTERM, then SIGKILL after grace seconds (0: SIGKILL at once)."""
        pb = self.pb
        self.call(
            "StopContainer",
            pb.StopContainerRequest(container_id=container_id, timeout=grace),
            pb.StopContainerResponse,
            timeout=CALL_TIMEOUT + grace,
        )

    def remove_container(self, container_id: str) -> None:
        pb = self.pb
        self.call(
            "RemoveContainer",
            pb.RemoveContainerRequest(container_id=container_id),
            pb.RemoveContainerResponse,
            timeout=CALL_TIMEOUT,
        )

    def container_status(self, container_id: str) -> Any:
        """The ContainerStatus message (state, exit_code, reason, ...)."""
        pb = self.pb
        answer = self.call(
            "ContainerStatus",
            pb.ContainerStatusRequest(container_id=container_id),
            pb.ContainerStatusResponse,
            timeout=CALL_TIMEOUT,
        )
        return answer.status

    def exec_sync(
        self,
        container_id: str,
        cmd: Sequence[str],
        *,
        timeout: int,
        deadline: float | None = None,
    ) -> Any:
        """ExecSync with a CRI timeout in seconds (0: none); the ExecSyncResponse.

        deadline is the gRPC call's own (seconds); by default the CRI timeout plus
        EXEC_GRACE, so that the runtime's answer, not the client's deadline, ends the call.
        """
        pb = self.pb
        if deadline is None:
            deadline = timeout + EXEC_GRACE if timeout > 0 else CALL_TIMEOUT
        return self.call(
            "ExecSync",
            pb.ExecSyncRequest(container_id=container_id, cmd=list(cmd), timeout=timeout),
            pb.ExecSyncResponse,
            timeout=deadline,
        )
