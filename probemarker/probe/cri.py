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
| DEADLINE_EXCEEDED from the runtime (the command ran past its timeout, counted from its start; the runtime killed it) | Failed | "command timed out after Ns" |
| the call's own deadline (the timeout + `grace`) passed without the runtime's verdict | Unknown | so |
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

Timing (issue 23): ExecSync carries the probe's timeout in whole seconds (the CRI's
unit), and the timeout is the runtime's to enforce, as for the kubelet's own exec
probes: containerd starts its clock only once the process has started
(`execInternal`: `context.WithTimeout` after `process.Start`), kills the command
when it runs out and answers DEADLINE_EXCEEDED, which is the verdict "timed out"
(Failed). The client only bounds its wait: the call's deadline is the timeout plus
`grace` (`--exec-grace-seconds`, 10 s by default), and running out of it without the
runtime's verdict is Unknown (docs/engine.md: a slow or hung runtime is not the
container's fault; the pod keeps its state). Under a slow runtime (a throttled
shim) the command may start seconds after the call: the kubelet then still gets
the runtime's verdict, and so do we, within the grace. The kubelet waits its
runtime request timeout, 2 minutes, past the timeout (`remote_runtime.go`
ExecSync); here a run waiting that long would hold one of `--max-concurrent-probes`
slots and skip its probe's periods for 2 minutes, to end as Unknown (no change on
the pod) in the case that matters, a runtime that does not answer. 10 s covers a
runtime slowed by load many times over; the setting goes up to 120 s. A run lasts
until the verdict or the client's deadline, and the probe's periods that come due
meanwhile are skipped (the dispatcher runs one run per probe at a time, and the
next slot is booked on the grid when the run ends): never a second command in the
container while the call is outstanding.

Output: 1 KiB kept per stream, the rest counted, as the api backend keeps it
(`probe.execresult.CappedOutput`); the runtime sends at most the receive cap.
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
from probemarker.probe.criid import confirmation_problem, container_ref
from probemarker.probe.exec import exec_outcome
from probemarker.probe.execresult import CappedOutput, ExecExited
from probemarker.probe.handler import OwnsConnections, ProbeTarget
from probemarker.probe.limits import EXEC_GRACE, client_wait
from probemarker.probe.outcome import Outcome
from probemarker.probe.output import clean_message
from probemarker.watch.pods import PodUID

__all__ = ["CRIExecHandler", "cri_outcome", "exited", "sent_timeout"]

log = structlog.get_logger(__name__)

KEEP_BYTES = 1024  # kept per output stream (docs/engine.md: 1 KiB), as the api backend
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


def sent_timeout(time_limit: float) -> int:
    """ExecSync's timeout for `time_limit`: whole seconds (the CRI's unit), at least 1
    (0 would mean none)."""
    return max(1, math.ceil(time_limit))


def cri_outcome(
    answer: Ran | CallFailed | NotConnected,
    *,
    time_limit: float,
    endpoint: str,
    container: str,
    max_receive: int,
    keep: int = KEEP_BYTES,
    grace: float = EXEC_GRACE,
) -> Outcome:
    """The outcome of one ExecSync answer (the table in the module docstring; pure).
    `grace`: how long past `time_limit` the call waited (for the message)."""
    match answer:
        case Ran():
            return exec_outcome(exited(answer, keep=keep), time_limit=time_limit)
        case NotConnected(reason=reason):
            return Outcome.unknown(reason)
        case CallFailed(code="DEADLINE_EXCEEDED", details=details) if details == _CALL_DEADLINE:
            sent = sent_timeout(time_limit)
            return Outcome.unknown(
                f"container runtime at {endpoint} gave no verdict on ExecSync within "
                f"{client_wait(sent, grace):g}s ({sent}s timeout + {grace:g}s grace)"
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

    def __init__(
        self, client: RuntimeClient, *, keep_bytes: int = KEEP_BYTES, grace: float = EXEC_GRACE
    ) -> None:
        if not grace >= 0:
            raise ValueError(f"grace must be >= 0, not {grace}")
        self._client = client
        self._keep = keep_bytes
        self.grace = grace  # seconds past the timeout a run may wait (runner.WaitsPastTheLimit)
        self._runtime: RuntimeInfo | None = None
        self._warned: OrderedDict[PodUID, None] = OrderedDict()
        self._checked: OrderedDict[tuple[str, PodUID, str], None] = OrderedDict()

    def __repr__(self) -> str:
        return f"CRIExecHandler(client={self._client!r})"

    async def unavailable(self) -> str | None:
        return await self._client.unavailable()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def runtime(self, *, wait: float) -> RuntimeInfo | CallFailed | NotConnected:
        """The connected runtime (asked once, and again after a failed answer)."""
        if self._runtime is not None:
            return self._runtime
        answer = await self._client.version(wait=wait)
        if isinstance(answer, RuntimeInfo):
            self._runtime = answer
        return answer

    async def run(self, action: Handler, target: ProbeTarget, *, time_limit: float) -> Outcome:
        if not isinstance(action, ExecAction):
            raise TypeError(f"CRIExecHandler runs exec actions, not {type(action).__name__}")
        endpoint = self._client.endpoint
        runtime = await self.runtime(wait=min(time_limit, _VERSION_LIMIT))
        if isinstance(runtime, NotConnected):
            return Outcome.unknown(runtime.reason)
        if isinstance(runtime, CallFailed):
            return Outcome.unknown(clean_message(f"container runtime at {endpoint}: {runtime}"))
        ref = container_ref(target.container_id, runtime, endpoint=endpoint)
        if ref.problem:
            self._warn_once(target, ref.problem)
            where = f"container {target.container} of pod {target.namespace}/{target.pod}"
            return Outcome.unknown(clean_message(f"{where}: {ref.problem}"))
        confirmed = await self._confirmed(ref.id, target, wait=min(time_limit, _VERSION_LIMIT))
        if isinstance(confirmed, Outcome):
            return confirmed
        sent = sent_timeout(time_limit)
        answer = await self._client.exec_sync(
            confirmed, action.command, time_limit=sent, wait=client_wait(sent, self.grace)
        )
        return cri_outcome(
            answer,
            time_limit=time_limit,
            endpoint=endpoint,
            container=target.container,
            max_receive=self._client.max_receive,
            keep=self._keep,
            grace=self.grace,
        )

    async def _confirmed(self, full_id: str, target: ProbeTarget, *, wait: float) -> str | Outcome:
        """The container ID the runtime confirmed as `target`'s container (asked once
        per container), else the run's outcome: Unknown, nothing run."""
        if (full_id, target.pod_uid, target.container) in self._checked:
            return full_id
        info = await self._client.container(full_id, wait=wait)
        endpoint = self._client.endpoint
        if isinstance(info, NotConnected):
            return Outcome.unknown(info.reason)
        if isinstance(info, CallFailed) and info.code == "NOT_FOUND":
            return cri_outcome(
                info,
                time_limit=wait,
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
