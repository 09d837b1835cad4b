"""`probemarker run` as a process: the open-files limit, the event loop's reports, the
signals and the connection; then the daemon (daemon/app.py) until it stops.

Stage: wiring (the process around the daemon). Input: `RunSettings`. Output: the
exit code, 0 after a clean shutdown; what keeps the daemon from running (a
`ConfigError`, a metrics port or status socket it cannot take) is raised to cli.py,
which says so. In order: the soft open-files limit is raised to the hard
one (observe/descriptors.py), the event loop's own reports go through structlog, at
most one line a minute per kind (observe/looperrors.py), SIGTERM and SIGINT are
received, the connection is made (an exec credential plugin may wait for a login)
and the `Daemon` runs on a client built for the settings.

Signals, from the first moment, so they stop the daemon at every stage: the first
SIGTERM/SIGINT stops it gracefully (daemon/app.py, `Daemon.run`: nothing to finish
before the first LISTs; else `shutdown_grace_seconds` for running probes, pending
writes and queued events); a second one exits at once with 128 + the signal's number.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator

import anyio
import structlog

from probemarker.daemon.app import Daemon, unless_stopped
from probemarker.daemon.assembly import client_settings
from probemarker.daemon.settings import RunSettings
from probemarker.kit.clock import MONOTONIC
from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.config import connect
from probemarker.observe.descriptors import raise_open_files_limit
from probemarker.observe.looperrors import LoopErrors

__all__ = ["run_daemon"]

log = structlog.get_logger("probemarker.app")  # the daemon's lines, as daemon/app.py's


async def run_daemon(settings: RunSettings) -> int:
    """`probemarker run`: until SIGTERM or SIGINT; 0 after a clean shutdown.

    The signals are received from the first moment, so they stop the daemon at every
    stage: reading the kubeconfig, getting credentials, listing from a dead server,
    waiting for the CRD, running. A second signal ends the process at once (see
    `_receive_signals`).
    """
    _take_open_files_limit()
    LoopErrors(clock=MONOTONIC).install()
    stop = anyio.Event()
    failed: list[Exception] = []
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
        async with anyio.create_task_group() as group:
            group.start_soon(_receive_signals, received, stop, settings.shutdown_grace_seconds)
            try:
                await _serve(settings, stop)
            except Exception as err:  # a ConfigError: re-raised below, not in a group
                failed.append(err)
            group.cancel_scope.cancel()
    if failed:
        raise failed[0]
    log.info("daemon.stopped")
    return 0


def _take_open_files_limit() -> None:
    """The soft open-files limit up to the hard one, once, before any descriptor is
    needed (observe/descriptors.py says why); one line when it changed or could not."""
    limit = raise_open_files_limit()
    if limit.error is not None:
        log.warning("daemon.open_files_limit", soft=limit.soft, hard=limit.hard, error=limit.error)
    elif limit.raised:
        log.info("daemon.open_files_limit", soft=limit.soft, hard=limit.hard, was=limit.before)


async def _serve(settings: RunSettings, stop: anyio.Event) -> None:
    # Connecting may run an exec credential plugin, which may wait for a login.
    connection = await unless_stopped(stop, lambda: connect(settings.connection))
    if connection is None:
        log.info("daemon.stopping", stage="connecting")
        return
    log.info("daemon.starting", node=settings.node, server=connection.server)
    async with KubeClient(connection, settings=client_settings(settings)) as client:
        await Daemon(client, settings).run(stop=stop)


async def _receive_signals(received: AsyncIterator[int], stop: anyio.Event, grace: float) -> None:
    """The first SIGTERM/SIGINT sets `stop` (a graceful stop within `grace` seconds);
    a second one exits at once with 128 + its number, as a shell reports a process
    killed by it (143 for SIGTERM, 130 for SIGINT): whoever sends it has given up
    waiting, so pending writes are dropped and nothing else is waited for."""
    async for signum in received:
        name = signal.Signals(signum).name
        if not stop.is_set():
            log.info("daemon.signal", signal=name, grace_seconds=grace)
            stop.set()
            continue
        code = 128 + signum
        log.warning("daemon.stopped_at_once", signal=name, exit_code=code)
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(code)
