"""A probe's time limit, and the graces past it, in one place.

Stage: probe (pure). The words, as the daemon's modules use them:
- `time_limit`: the probe's limit in seconds, the spec's `timeoutSeconds`. The runner
  reads it once and passes it by this one name to each handler, and a handler to its
  transport (ExecSync carries it as its `timeout`; the kubelet's prober computes its
  `timeout` once and passes it the same way).
- `wait`: how long a client waits for an answer, a duration too (`client_wait`, and a
  request's bound in the API client).
- an absolute time is named for the moment it is (`verdict_at`, `gives_up_at`, a run's
  `due`), never by a duration's name.

The graces past the time limit, all of them:
- `EXEC_GRACE` (`--exec-grace-seconds`, 10 s by default): an exec run waits this long
  past its time limit for the runtime's verdict, through `pods/exec` (probe/exec.py:
  the handshake and the server's first frame may come late, probe/execstream.py)
  or the CRI (probe/cri.py: ExecSync's call). The kubelet waits for the runtime the
  same way: the command's limit is the runtime's to enforce.
- `RUNNER_GRACE` (0.5 s): the runner's safety net past a handler's own bound
  (`runner_wait`: the time limit, the handler's grace, then this); a handler that
  overruns it is Failed as timed out (probe/runner.py).
"""

from __future__ import annotations

from typing import Final

__all__ = ["EXEC_GRACE", "RUNNER_GRACE", "client_wait", "runner_wait"]

EXEC_GRACE: Final = 10.0
RUNNER_GRACE: Final = 0.5


def client_wait(time_limit: float, grace: float) -> float:
    """Seconds an exec client waits for the verdict of a run limited to `time_limit`."""
    return time_limit + grace


def runner_wait(time_limit: float, grace: float, runner_grace: float = RUNNER_GRACE) -> float:
    """Seconds the runner gives a handler whose runs may last `grace` past `time_limit`."""
    return time_limit + grace + runner_grace
