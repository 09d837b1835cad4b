"""The cri exec handler: run the command through the node's container runtime (CRI).

Stage: probe. Input: an `ExecAction`, the `ProbeTarget` (its `container_id` from the
pod status) and the run's time limit. Output: an `Outcome`, never an exception but
cancellation (and a `TypeError` for an action that is not exec, a bug in the caller).
The calls are `probemarker.cri.client.RuntimeClient`'s; this module picks the
container and maps the runtime's answer (`cri_outcome`, pure), as the api exec
handler maps the API server's, so both backends judge a command alike:

| the runtime's answer | outcome | message |
|---|---|---|
| exit 0 | Succeeded | stdout |
| exit N != 0 | Failed | stderr, or stdout when stderr is empty, or "command exited with code N" |
| DEADLINE_EXCEEDED from the runtime (it killed the command at the limit) | Failed | "command timed out after Ns" |
| the call's own deadline passed, and the runtime answers Version (the command overran: a child holding its output open) | Failed | "command timed out after Ns" |
| the call's own deadline passed, and the runtime does not answer Version either (hung) | Unknown | so |
| UNKNOWN from the runtime starting the command (missing executable, no permission) | Failed | the runtime's message |
| UNKNOWN "container is in CONTAINER_EXITED state" (not running) | Failed | so |
| an answer over the receive cap (RESOURCE_EXHAUSTED from grpc) | Failed | "output larger than N bytes" |
| NOT_FOUND (the runtime no longer has that container: the pod status is behind) | Unknown | why |
| UNAVAILABLE (socket absent or refusing), any other code | Unknown | the endpoint and the status |
| a containerID of another runtime, or none | Unknown | which runtime, and the fix (logged once per pod) |
| a containerID that is not a full ID (a prefix, upper case, padding, ...) | Unknown | so; no call at all (logged once per pod) |
| a container the runtime labels as another pod's (or not the kubelet's), or an answer for another ID than asked | Unknown | whose it is; nothing runs in it (logged once per pod) |
| grpcio missing (the `cri` extra) | Unknown | which extra to install |

The container: the kubelet writes `<runtime name>://<id>` into the pod status, with
the name the runtime gives in its Version answer ("containerd", "cri-o"). The ID is
used only when its scheme is the connected runtime's, so an exec never reaches a
container of another runtime that happened to share an ID, and only when it is a full
ID (`probemarker.probe.criid`: the runtime would take a prefix for another pod's
container). The runtime's name is asked once (and again after a failure), bounded by
the run's time limit.

The pod status is only a claim about the container; the runtime knows whose it is.
Before the first exec in a container, ContainerStatus is asked, and its answer must
give the ID asked for and the kubelet's labels for the probe's pod UID and container
(`criid.confirmation_problem`). ExecSync gets only the ID so confirmed, and a
confirmed ID is remembered under itself (IDs are never reused), so the check costs one
call per container, not per run.

Timing: ExecSync carries the probe's timeout in whole seconds (the CRI's unit), so
the runtime stops the command itself at the limit, as the kubelet's own exec probe
does; the call's deadline is `_DEADLINE_MARGIN` later, so the runtime's own
DEADLINE_EXCEEDED arrives first unless something holds the answer back. That is
either the command (containerd kills the process it started, then waits for its
output pipes to close: a child still holding them keeps the answer back) or the
runtime itself (hung). A Version question of `_ALIVE_LIMIT` tells them apart: a
runtime that answers it is alive, so the command overran (Failed, timed out, as the
kubelet judges it); one that does not is not the container's fault (Unknown, SPEC
§2). The margin and the question fit in the runner's grace (0.5 s).

Output: 1 KiB kept per stream, the rest counted, as the api backend keeps it
(`kube.execresult.CappedOutput`); the runtime sends at most the receive cap.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import structlog

from probemarker.api.model import ExecAction, Handler
from probemarker.cri.client import (
    CallFailed,
    NotConnected,
    Ran,
    RuntimeClient,
    RuntimeInfo,
)
from probemarker.identity import PodUID
from probemarker.kube.execresult import CappedOutput, ExecExited
from probemarker.probe.criid import confirmation_problem, container_ref
from probemarker.probe.exec import exec_outcome
from probemarker.probe.handler import OwnsConnections, ProbeTarget
from probemarker.probe.outcome import Outcome
from probemarker.probe.output import clean_message

__all__ = ["CRIExecHandler", "cri_outcome", "exited"]

log = structlog.get_logger(__name__)

KEEP_BYTES = 1024  # kept per output stream (SPEC §2: 1 KiB), as the api backend
_DEADLINE_MARGIN = 0.2  # seconds after the runtime's own timeout
_ALIVE_LIMIT = 0.2  # seconds for Version after a call deadline; with the margin < grace
_CALL_DEADLINE = "Deadline Exceeded"  # grpc's own text when the call's deadline passes
_VERSION_LIMIT = 2.0  # seconds for the Version question, at most
_WARNED_PODS = 4096  # pods remembered for the once-per-pod warning
_CHECKED = 8192  # container IDs remembered as checked (a node runs far fewer)

# Texts of an UNKNOWN status that say the runtime tried to start the command and the
# container said no (containerd: "failed to exec in container: failed to start exec
# ...: OCI runtime exec failed: exec failed: unable to start container process: exec:
# \"nope\": executable file not found in $PATH: unknown").
_START_FAILURES = ("OCI runtime exec failed", "executable file not found", "permission denied")
# containerd's ExecSync on a container that is not running: "container is in
# CONTAINER_EXITED state" (also CONTAINER_CREATED, CONTAINER_UNKNOWN).
_NOT_RUNNING = "container is in CONTAINER_"


def exited(ran: Ran, *, keep: int = KEEP_BYTES) -> ExecExited:
    """`ran` as the api backend's exit value: `keep` bytes per stream, the rest counted."""
    stdout, stderr = CappedOutput(keep=keep), CappedOutput(keep=keep)
    stdout.feed(ran.stdout)
    stderr.feed(ran.stderr)
    out, out_dropped = stdout.decode()
    err, err_dropped = stderr.decode()
    return ExecExited(ran.exit_code, out, err, out_dropped, err_dropped)


def cri_outcome(
    answer: Ran | CallFailed | NotConnected,
    *,
    time_limit: float,
    endpoint: str,
    container: str,
    max_receive: int,
    keep: int = KEEP_BYTES,
    runtime_alive: bool = True,
) -> Outcome:
    """The outcome of one ExecSync answer (the table in the module docstring; pure).
    `runtime_alive`: after the call's own deadline, whether the runtime answered
    Version (a runtime that did not is hung, not the container)."""
    match answer:
        case Ran():
            return exec_outcome(exited(answer, keep=keep), time_limit=time_limit)
        case NotConnected(reason=reason):
            return Outcome.unknown(reason)
        case CallFailed(code="DEADLINE_EXCEEDED") if not runtime_alive:
            return Outcome.unknown(
                f"container runtime at {endpoint} did not answer: ExecSync past its "
                f"{time_limit:g}s timeout, and Version"
            )
        case CallFailed(code="DEADLINE_EXCEEDED"):
            return Outcome.failed(f"command timed out after {time_limit:g}s")
        case CallFailed(code="UNKNOWN", details=details) if _NOT_RUNNING in details:
            return Outcome.failed(clean_message(f"container {container} is not running: {details}"))
        case CallFailed(code="UNKNOWN", details=details) if any(
            text in details for text in _START_FAILURES
        ):
            return Outcome.failed(clean_message(details))
        case CallFailed(code="RESOURCE_EXHAUSTED", details=details) if "larger than max" in details:
            return Outcome.failed(
                f"the command's output is larger than {max_receive} bytes, more than a "
                "probe may answer with over the container runtime socket"
            )
        case CallFailed(code="NOT_FOUND", details=details):
            return Outcome.unknown(
                clean_message(
                    f"the container runtime at {endpoint} has no container {container} "
                    f"(the pod status may be behind): {details}"
                )
            )
        case CallFailed():
            return Outcome.unknown(clean_message(f"container runtime at {endpoint}: {answer}"))


class CRIExecHandler(OwnsConnections):
    """`ProbeHandler` for exec actions through a `RuntimeClient`; closes it on exit."""

    def __init__(self, client: RuntimeClient, *, keep_bytes: int = KEEP_BYTES) -> None:
        self._client = client
        self._keep = keep_bytes
        self._runtime: RuntimeInfo | None = None
        self._warned: OrderedDict[PodUID, None] = OrderedDict()
        self._checked: OrderedDict[tuple[str, PodUID, str], None] = OrderedDict()

    def __repr__(self) -> str:
        return f"CRIExecHandler(client={self._client!r})"

    async def unavailable(self) -> str | None:
        return await self._client.unavailable()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def runtime(self, *, deadline: float) -> RuntimeInfo | CallFailed | NotConnected:
        """The connected runtime (asked once, and again after a failed answer)."""
        if self._runtime is not None:
            return self._runtime
        answer = await self._client.version(deadline=deadline)
        if isinstance(answer, RuntimeInfo):
            self._runtime = answer
        return answer

    async def run(self, action: Handler, target: ProbeTarget, *, time_limit: float) -> Outcome:
        if not isinstance(action, ExecAction):
            raise TypeError(f"CRIExecHandler runs exec actions, not {type(action).__name__}")
        endpoint = self._client.endpoint
        runtime = await self.runtime(deadline=min(time_limit, _VERSION_LIMIT))
        if isinstance(runtime, NotConnected):
            return Outcome.unknown(runtime.reason)
        if isinstance(runtime, CallFailed):
            return Outcome.unknown(clean_message(f"container runtime at {endpoint}: {runtime}"))
        ref = container_ref(target.container_id, runtime, endpoint=endpoint)
        if ref.problem:
            self._warn_once(target, ref.problem)
            where = f"container {target.container} of pod {target.namespace}/{target.pod}"
            return Outcome.unknown(clean_message(f"{where}: {ref.problem}"))
        confirmed = await self._confirmed(ref.id, target, deadline=min(time_limit, _VERSION_LIMIT))
        if isinstance(confirmed, Outcome):
            return confirmed
        answer = await self._client.exec_sync(
            confirmed,
            action.command,
            timeout_seconds=max(1, math.ceil(time_limit)),
            deadline=time_limit + _DEADLINE_MARGIN,
        )
        alive = True
        if isinstance(answer, CallFailed) and answer.details == _CALL_DEADLINE:
            alive = isinstance(await self._client.version(deadline=_ALIVE_LIMIT), RuntimeInfo)
        return cri_outcome(
            answer,
            time_limit=time_limit,
            endpoint=endpoint,
            container=target.container,
            max_receive=self._client.max_receive,
            keep=self._keep,
            runtime_alive=alive,
        )

    async def _confirmed(
        self, full_id: str, target: ProbeTarget, *, deadline: float
    ) -> str | Outcome:
        """The container ID the runtime confirmed as `target`'s container (asked once
        per container), else the run's outcome: Unknown, nothing run."""
        if (full_id, target.pod_uid, target.container) in self._checked:
            return full_id
        info = await self._client.container(full_id, deadline=deadline)
        endpoint = self._client.endpoint
        if isinstance(info, NotConnected):
            return Outcome.unknown(info.reason)
        if isinstance(info, CallFailed) and info.code == "NOT_FOUND":
            return cri_outcome(
                info,
                time_limit=deadline,
                endpoint=endpoint,
                container=target.container,
                max_receive=self._client.max_receive,
            )
        if isinstance(info, CallFailed):
            return Outcome.unknown(
                clean_message(f"container runtime at {endpoint}: ContainerStatus: {info}")
            )
        problem = confirmation_problem(full_id, info, target)
        if problem:
            self._warn_once(target, problem)
            return Outcome.unknown(clean_message(problem))
        # Remembered under the ID the runtime answered (the one asked for, confirmed).
        self._checked[(info.id, target.pod_uid, target.container)] = None
        if len(self._checked) > _CHECKED:
            self._checked.popitem(last=False)
        return info.id

    def _warn_once(self, target: ProbeTarget, problem: str) -> None:
        if target.pod_uid in self._warned:
            return
        self._warned[target.pod_uid] = None
        if len(self._warned) > _WARNED_PODS:
            self._warned.popitem(last=False)
        log.warning(
            "probe.cri_container_unusable",
            pod=f"{target.namespace}/{target.pod}",
            container=target.container,
            problem=problem,
        )
