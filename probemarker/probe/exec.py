"""The exec probe handler: run the command through `pods/exec` and judge the result.

Stage: probe. Input: an `ExecAction`, the `ProbeTarget` and the run's time limit.
Output: an `Outcome`, never an exception but cancellation (and a `TypeError` for an
action that is not exec, which is a bug in the caller). The stream itself is
`probemarker.probe.execstream.run_exec`; this module only maps its result:

| exec result | outcome | message |
|---|---|---|
| exit 0 | Succeeded | stdout |
| exit N != 0 | Failed | stderr, or stdout when stderr is empty, or "command exited with code N" |
| no status within the time limit, counted from the server's "connection established" frame | Failed | "command timed out after Ns" |
| the client's deadline (time limit + `--exec-grace-seconds` from the call) passed first: a handshake or an established frame that came late | Unknown | why |
| not started, reported by the container runtime | Failed | the runtime's message |
| not started for any other reason | Unknown | the server's message |
| handshake refused, unreachable, lost, no status, protocol | Unknown | why |

Why "not started" is split: through a 1.30+ API server (v5), everything that goes
wrong between the API server and the kubelet comes back as an InternalError Status
on the stream, the same shape as a missing executable: a kubelet being restarted
(`error dialing backend: ...`) or a pod the kubelet no longer knows (`unable to
upgrade connection: ...`). A 1.28/1.29 server refuses the same cases at the
handshake with an HTTP status, which is Unknown. Only a message the CRI streaming
server wrote (`error executing command in container: ...`, used by containerd and
CRI-O alike) means the runtime tried and the container said no, so only that (and
the executable texts quoted in the issue) is Failed; the rest stays Unknown, so an
outage on the way to the kubelet never flips a pod to Failed (docs/engine.md). A container
that stopped is Failed all the same, from its pod status (decide.gate), without
an exec.

A command that outlives its run (a deadline passed without its status) keeps
running in the container whatever the client does (docs/kube-exec.md), so its stream
is held (`probe.holds.CommandHolds`, entered with the handler) until the command
ends, and `skips` tells the engine to skip the periods of every probe that runs it
meanwhile (`busy` says the same without asking for a run). The hold is the command's
(its argv's digest) in that container instance, whatever probe runs it: a renamed
probe, or two probes with one command, never start it twice at once (`turn` makes
their runs take turns); an edited command runs at the next period. `held` and `seed` carry it over a restart of the daemon, through the
pod's ownership record, once a run of it was skipped (probe/holds.py, issue 43). The
outcome is decided at the deadline all the same.

A completed exit status decides whatever the connection does afterwards (a 1.30+
server may drop TCP right after its close frame; the client sees 1006): the stream
layer already returns the status in that case.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Self

from probemarker.api.model import ExecAction, Handler
from probemarker.identity.commands import HeldCommand, command_digest, container_mark
from probemarker.identity.probes import ProbeKey
from probemarker.kube.connect.client import KubeClient
from probemarker.probe.execresult import (
    ExecExited,
    ExecNotStarted,
    ExecResult,
    ExecTransportError,
    TransportFailure,
)
from probemarker.probe.execstream import ExecSettings, run_exec
from probemarker.probe.handler import OwnsConnections, ProbeTarget
from probemarker.probe.holds import CommandHolds
from probemarker.probe.holdtable import CommandKey
from probemarker.probe.limits import EXEC_GRACE, client_wait
from probemarker.probe.outcome import Outcome
from probemarker.probe.output import choose_answer, choose_message, clean_message

__all__ = ["ExecHandler", "exec_outcome"]

# Texts that say the container runtime itself refused to start the command.
_RUNTIME_MARKERS = (
    "error executing command in container",  # cri-streaming remotecommand/exec.go
    "executable file not found",  # runc, through containerd
    "failed to start command",  # as the issue quotes a 1.30+ server
)


class ExecHandler(OwnsConnections):
    """`ProbeHandler` for exec actions over a `KubeClient`; `async with` it so that
    timed-out streams can be held (`holds`)."""

    def __init__(
        self,
        client: KubeClient,
        *,
        settings: ExecSettings | None = None,
        holds: CommandHolds | None = None,
        grace: float = EXEC_GRACE,
    ) -> None:
        if not grace >= 0:
            raise ValueError(f"grace must be >= 0, not {grace}")
        self._client = client
        self._settings = settings or ExecSettings()
        self._grace = grace
        self.holds = holds or CommandHolds()

    def __repr__(self) -> str:
        return (
            f"ExecHandler(settings={self._settings!r}, grace={self._grace:g}, holds={self.holds!r})"
        )

    @property
    def grace(self) -> float:
        """Seconds past the time limit a run may last (the client's wait, probe/limits.py)."""
        return self._grace

    def busy(self, action: Handler, probe: ProbeKey, container_id: str) -> bool:
        return isinstance(action, ExecAction) and self.holds.busy(
            _probe_command(probe, action.command), container_mark(container_id)
        )

    def skips(self, action: Handler, probe: ProbeKey, container_id: str) -> bool:
        return isinstance(action, ExecAction) and self.holds.skips(
            _probe_command(probe, action.command), container_mark(container_id)
        )

    def held(self, action: Handler, probe: ProbeKey, container_id: str) -> HeldCommand | None:
        if not isinstance(action, ExecAction):
            return None
        key = _probe_command(probe, action.command)
        return self.holds.held_command(key, container_mark(container_id))

    def seed(self, action: Handler, probe: ProbeKey, held: HeldCommand, container_id: str) -> bool:
        if not isinstance(action, ExecAction):
            return False
        key = _probe_command(probe, action.command)
        return self.holds.seed(key, held, container=container_mark(container_id))

    def turn(
        self, action: Handler, probe: ProbeKey, container_id: str
    ) -> contextlib.AbstractAsyncContextManager[None]:
        if not isinstance(action, ExecAction):
            return contextlib.nullcontext()
        return self.holds.turn(_probe_command(probe, action.command))

    async def __aenter__(self) -> Self:
        await self.holds.__aenter__()
        return self

    async def aclose(self) -> None:
        await self.holds.__aexit__(None, None, None)

    async def run(self, action: Handler, target: ProbeTarget, *, time_limit: float) -> Outcome:
        if not isinstance(action, ExecAction):
            raise TypeError(f"ExecHandler runs exec actions, not {type(action).__name__}")
        key = CommandKey(
            target.namespace, target.pod_uid, target.container, command_digest(action.command)
        )
        result = await run_exec(
            self._client,
            namespace=target.namespace,
            pod=target.pod,
            container=target.container,
            command=action.command,
            time_limit=time_limit,
            wait=client_wait(time_limit, self._grace),
            settings=self._settings,
            holder=self.holds.slot(key, container_mark(target.container_id)),
        )
        return exec_outcome(result, time_limit=time_limit)


def _probe_command(probe: ProbeKey, command: Sequence[str]) -> CommandKey:
    """The command `probe` runs, in its container (the marker is in the pod's namespace)."""
    return CommandKey(
        probe.marker.namespace, probe.pod_uid, probe.container, command_digest(command)
    )


def exec_outcome(result: ExecResult, *, time_limit: float) -> Outcome:
    """The outcome of one exec result (the table in the module docstring)."""
    match result:
        case ExecExited(exit_code=0, stdout=stdout, stderr=stderr):
            message = choose_message(succeeded=True, stdout=stdout, stderr=stderr)
            return Outcome.succeeded(message, answer=choose_answer(stdout=stdout, stderr=stderr))
        case ExecExited(exit_code=code, stdout=stdout, stderr=stderr):
            message = choose_message(succeeded=False, stdout=stdout, stderr=stderr)
            answer = choose_answer(stdout=stdout, stderr=stderr)
            return Outcome.failed(message or f"command exited with code {code}", answer=answer)
        case ExecNotStarted(message=message):
            if any(marker in message for marker in _RUNTIME_MARKERS):
                return Outcome.failed(clean_message(message))
            return Outcome.unknown(clean_message(f"exec not started: {message}"))
        case ExecTransportError(kind=TransportFailure.DEADLINE, timed_out=True):
            # The kubelet's exec prober fails a timeout too ("command ... timed out").
            return Outcome.failed(f"command timed out after {time_limit:g}s")
        case ExecTransportError():
            return Outcome.unknown(clean_message(str(result)))
