"""A scripted CRI runtime on a unix socket, for the tests of the cri exec backend.

A grpc.aio server serves `runtime.v1.RuntimeService` (Version, ExecSync); ContainerStatus answers
the kubelet's labels the test gives (`owners`, `labels`). With `containers` set, a
container ID in a request is looked up as containerd's CRI store does (a truncindex: any
unique prefix names a container, for ContainerStatus and ExecSync alike; NOT_FOUND
otherwise), and ContainerStatus answers the full ID. ExecSync is scripted by the
command: `echo WORDS`, `exit N` (stderr "bye"), `slowstart S` (S seconds to start,
then exit 0: its timeout counts from the start), `sleep S` (until the
call ends; a cancelled call is recorded), `flood N` (N bytes of stdout), `fail CODE
DETAILS` (the call ends with that grpc status), and `state` (prints `Runtime.state`,
exit 0, or exit 1 when it is empty: what a test flips).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from probemarker.cri import runtime_v1_pb2 as pb

__all__ = ["Runtime", "serve"]


@dataclass
class Runtime:
    """The scripted runtime: what it was asked, and the calls it saw cancelled."""

    name: str = "containerd"
    requests: list[pb.ExecSyncRequest] = field(default_factory=list)
    versions: int = 0
    cancelled: list[tuple[str, ...]] = field(default_factory=list)
    sleeping: int = 0
    state: str = "idle"
    hung: bool = False  # Version never answers (with `sleep`: a runtime that hangs)
    # ContainerStatus: the labels of each container ID (the kubelet's); others have
    # `labels`, the kubelet's for pod uid-1, container app (what tests target).
    owners: dict[str, dict[str, str]] = field(default_factory=dict)
    labels: dict[str, str] = field(
        default_factory=lambda: {
            "io.kubernetes.pod.uid": "uid-1",
            "io.kubernetes.container.name": "app",
        }
    )
    statuses: list[str] = field(default_factory=list)  # container IDs asked about
    # The runtime's containers, looked up by unique prefix as containerd's truncindex
    # does; None: every ID asked about is a container of that ID.
    containers: list[str] | None = None
    # ContainerStatus answers this ID for that one (a runtime resolving other spellings).
    answer_ids: dict[str, str] = field(default_factory=dict)
    ran_in: list[str] = field(default_factory=list)  # the container of each ExecSync
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def reaches(self, condition: Callable[[], bool]) -> None:
        """Wait (time-bounded by the caller) until `condition` holds."""
        async with self.changed:
            await self.changed.wait_for(condition)

    async def _note(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    async def version(self, request: pb.VersionRequest, context: Any) -> pb.VersionResponse:
        self.versions += 1
        if self.hung:
            await asyncio.sleep(3600)
        return pb.VersionResponse(
            version="0.1.0", runtime_name=self.name, runtime_version="9.9", runtime_api_version="v1"
        )

    async def _resolve(self, container_id: str, context: Any) -> str:
        """The container `container_id` names (containerd's `containerStore.Get`)."""
        if self.containers is None:
            return container_id
        found = [c for c in self.containers if container_id and c.startswith(container_id)]
        if len(found) != 1:
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"an error occurred when try to find container {container_id!r}: not found",
            )
        return found[0]

    async def container_status(
        self, request: pb.ContainerStatusRequest, context: Any
    ) -> pb.ContainerStatusResponse:
        self.statuses.append(request.container_id)
        resolved = await self._resolve(request.container_id, context)
        labels = self.owners.get(resolved, self.labels)
        answered = self.answer_ids.get(resolved, resolved)
        return pb.ContainerStatusResponse(status=pb.ContainerStatus(id=answered, labels=labels))

    async def exec_sync(self, request: pb.ExecSyncRequest, context: Any) -> pb.ExecSyncResponse:
        self.requests.append(request)
        self.ran_in.append(await self._resolve(request.container_id, context))
        verb, *args = request.cmd
        if verb == "state":
            return pb.ExecSyncResponse(stdout=self.state.encode(), exit_code=0 if self.state else 1)
        if verb == "echo":
            return pb.ExecSyncResponse(stdout=" ".join(args).encode() + b"\n")
        if verb == "exit":
            return pb.ExecSyncResponse(stderr=b"bye", exit_code=int(args[0]))
        if verb == "flood":
            return pb.ExecSyncResponse(stdout=b"x" * int(args[0]))
        if verb == "fail":
            await context.abort(getattr(grpc.StatusCode, args[0]), " ".join(args[1:]))
        if verb == "slowstart":
            # A runtime slow to start the command (a throttled shim): its own timeout
            # counts only from the start (containerd execInternal), so it answers.
            await asyncio.sleep(float(args[0]))
            return pb.ExecSyncResponse(stdout=b"started late")
        if verb == "sleep":
            self.sleeping += 1
            await self._note()
            try:
                await asyncio.sleep(float(args[0]))
            except asyncio.CancelledError:
                self.cancelled.append(tuple(request.cmd))
                raise
            finally:
                self.sleeping -= 1
                asyncio.get_running_loop().create_task(self._note())
            return pb.ExecSyncResponse(stdout=b"woke")
        raise AssertionError(f"unscripted command {list(request.cmd)}")


async def serve(runtime: Runtime, socket: Path) -> grpc.aio.Server:
    handlers = {
        "Version": grpc.unary_unary_rpc_method_handler(
            runtime.version,
            request_deserializer=pb.VersionRequest.FromString,
            response_serializer=pb.VersionResponse.SerializeToString,
        ),
        "ContainerStatus": grpc.unary_unary_rpc_method_handler(
            runtime.container_status,
            request_deserializer=pb.ContainerStatusRequest.FromString,
            response_serializer=pb.ContainerStatusResponse.SerializeToString,
        ),
        "ExecSync": grpc.unary_unary_rpc_method_handler(
            runtime.exec_sync,
            request_deserializer=pb.ExecSyncRequest.FromString,
            response_serializer=pb.ExecSyncResponse.SerializeToString,
        ),
    }
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("runtime.v1.RuntimeService", handlers),)
    )
    server.add_insecure_port(f"unix://{socket}")
    await server.start()
    return server
