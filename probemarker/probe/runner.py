"""Run one probe: pick the handler for its action, bound it, and never let it crash.

Stage: probe (called by the scheduler's dispatcher, one call per due run). Input: a
`ProbeSpec` and the `ProbeTarget`. Output: an `Outcome` whose message is cleaned
(`output.clean_message`), as the last line of defence before a pod or an event.

Invariants:
- The handler is chosen by the type of the action. An action with no handler, or
  whose handler lacks its library (grpc without the optional `grpc` extra), is
  Unknown, so it changes nothing on the pod, and the message says why
  (`unavailable`: the engine checks it before a run and reports it on the pod once).
- The handler gets `time_limit = timeoutSeconds` and is expected to honour it;
  an outer bound of `timeoutSeconds + grace` is a safety net. A handler that
  overruns it is Failed ("timed out"), as a timeout is (docs/engine.md). An exec handler
  waits past the limit by design (`WaitsPastTheLimit.grace`: the runtime's verdict
  on the cri backend, the server's established frame on the api backend): its
  bound is `timeoutSeconds + its grace + grace`.
- `busy(action, probe, container_id)`: whether a previous run of the same command, by
  this probe or another, may still run in that container (`handler.HoldsCommands`);
  `skips`, asked when a run is due, says the same, and the engine skips the period.
  `held` and `seed` carry a hold found so over a restart of the daemon through the
  pod's ownership record (probe/holds.py); `turn` makes the runs of one command in
  one container take turns (the engine enters it before a run).
- An unexpected exception from a handler is a bug, not a probe result: it is logged
  (event `probe.handler_error`, the traceback once per action kind and exception
  type, so a bug hit on every run does not flood the log with tracebacks) and the
  run is Unknown, which is thrown away. The daemon never crashes on it.
- Cancellation always propagates: only `Exception` is caught, and a cancellation
  pending after a handler's exception is raised before returning.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from types import MappingProxyType
from typing import Protocol, runtime_checkable

import anyio
import anyio.lowlevel
import structlog

from probemarker.api.model import Handler, ProbeSpec
from probemarker.identity.commands import HeldCommand
from probemarker.identity.probes import ProbeKey
from probemarker.probe.handler import HoldsCommands, ProbeHandler, ProbeTarget
from probemarker.probe.limits import RUNNER_GRACE, runner_wait
from probemarker.probe.outcome import Outcome
from probemarker.probe.output import clean_message

__all__ = ["MayBeUnavailable", "ProbeRunner", "action_kind"]

log = structlog.get_logger(__name__)


@runtime_checkable
class MayBeUnavailable(Protocol):
    """A handler that depends on an optional library (grpc): says when it is missing."""

    async def unavailable(self) -> str | None: ...


@runtime_checkable
class WaitsPastTheLimit(Protocol):
    """A handler whose runs may last `grace` seconds past their time limit."""

    @property
    def grace(self) -> float: ...


def action_kind(action: Handler) -> str:
    """The probe field that holds `action` (its model's `kind`: exec, httpGet, tcpSocket,
    grpc)."""
    return _kind_of(type(action))


def _kind_of(action_type: type) -> str:
    kind = getattr(action_type, "kind", None)
    return kind if isinstance(kind, str) else action_type.__name__


def _unsupported(kind: str) -> str:
    return f"{kind} probes are not supported by this build"


class ProbeRunner:
    """Runs probes through the handler registered for each type of action."""

    def __init__(
        self, handlers: Mapping[type, ProbeHandler], *, grace: float = RUNNER_GRACE
    ) -> None:
        if grace < 0:
            raise ValueError(f"grace must be >= 0, not {grace}")
        self._handlers = MappingProxyType(dict(handlers))
        # Checked before every run: sorted out once here, not per run.
        self._optional = {t: h for t, h in handlers.items() if isinstance(h, MayBeUnavailable)}
        self._holding = {t: h for t, h in handlers.items() if isinstance(h, HoldsCommands)}
        self._waiting = {
            t: h.grace for t, h in handlers.items() if isinstance(h, WaitsPastTheLimit)
        }
        self._grace = grace
        self._traced: set[tuple[str, type[BaseException]]] = set()

    def __repr__(self) -> str:
        kinds = sorted(_kind_of(t) for t in self._handlers)
        return f"ProbeRunner(handlers={kinds}, grace={self._grace:g})"

    async def unavailable(self, action: Handler) -> str | None:
        """Why `action` cannot be run here (no handler, or a handler whose library is
        missing, `MayBeUnavailable`), or None."""
        if type(action) not in self._handlers:
            return _unsupported(action_kind(action))
        optional = self._optional.get(type(action))
        return None if optional is None else await optional.unavailable()

    def busy(self, action: Handler, probe: ProbeKey, container_id: str) -> bool:
        """Whether a previous run of `action`'s command (by `probe` or another probe)
        may still run in the container `container_id` (see the module docstring)."""
        handler = self._holding.get(type(action))
        return handler is not None and handler.busy(action, probe, container_id)

    def skips(self, action: Handler, probe: ProbeKey, container_id: str) -> bool:
        """A run of `probe` is due: whether it is skipped, as `busy`; a command held so
        goes on the pod's record (`held`) from now on (probe/holds.py)."""
        handler = self._holding.get(type(action))
        return handler is not None and handler.skips(action, probe, container_id)

    def held(self, action: Handler, probe: ProbeKey, container_id: str) -> HeldCommand | None:
        """What the pod's record is to say of `probe`'s command that may still run."""
        handler = self._holding.get(type(action))
        return None if handler is None else handler.held(action, probe, container_id)

    def seed(self, action: Handler, probe: ProbeKey, held: HeldCommand, container_id: str) -> bool:
        """Take over what the pod's record says of a command that may still run (`held`),
        if it is `probe`'s command in that container instance."""
        handler = self._holding.get(type(action))
        return handler is not None and handler.seed(action, probe, held, container_id)

    def turn(
        self, action: Handler, probe: ProbeKey, container_id: str
    ) -> AbstractAsyncContextManager[None]:
        """Entered around a run of `probe`: another probe's run of the same command in the
        same container waits for it (nothing to wait for with other handlers)."""
        handler = self._holding.get(type(action))
        if handler is None:
            return contextlib.nullcontext()
        return handler.turn(action, probe, container_id)

    async def run(self, spec: ProbeSpec, target: ProbeTarget) -> Outcome:
        """One run of `spec` against `target`; see the module docstring."""
        action, kind = spec.handler, action_kind(spec.handler)
        handler = self._handlers.get(type(action))
        if handler is None:
            return Outcome.unknown(_unsupported(kind))
        time_limit = spec.timing.timeout_seconds
        extra = self._waiting.get(type(action), 0.0)
        with anyio.move_on_after(runner_wait(time_limit, extra, self._grace)):
            try:
                outcome = await handler.run(action, target, time_limit=float(time_limit))
            except Exception as err:
                # A handler that failed while being cancelled must not hide it.
                await anyio.lowlevel.checkpoint_if_cancelled()
                self._report(kind, target, err)
                return Outcome.unknown(clean_message(f"{kind} probe handler error: {err!r}"))
            return replace(
                outcome,
                message=clean_message(outcome.message),
                answer=None if outcome.answer is None else clean_message(outcome.answer),
            )
        log.warning("probe.handler_overran", kind=kind, target=str(target), timeout=time_limit)
        return Outcome.failed(f"{kind} probe timed out after {time_limit}s")

    def _report(self, kind: str, target: ProbeTarget, err: Exception) -> None:
        key = (kind, type(err))
        first = key not in self._traced
        self._traced.add(key)
        log.error(
            "probe.handler_error",
            kind=kind,
            target=str(target),
            error=repr(err),
            exc_info=err if first else None,
        )
