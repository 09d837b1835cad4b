"""`probemarker demo`: the wiring and the clean-up.

Stage: demo edge (wiring only; the script is scenario.py, its player player.py, the
text view.py).
Order: a scratch directory; the daemon's log into it (or `--log-file`); the sim
in-process; the CRD, the examples' namespaces, the pods (their files and exec
handlers), the web containers' HTTP answers, the markers; watches of pods and events
feeding the board; the real daemon (`Daemon`, as `probemarker run` builds it) against
the sim over HTTP; then the steps, each waiting for what it expects within a bound.

Stopping: at the end of the scenario, on a step that is not seen within its bound, or
when `stop` is set (Ctrl-C, SIGTERM): the daemon is stopped gracefully, the sim, its
sockets and the scratch directory are removed, and the summary is printed. Exit codes:
0 the scenario played to the end, 1 a step was not seen in time, 130 stopped by a
signal (as a shell reports SIGINT), 2 the demo cannot run here (`DemoError`).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import anyio
from kubernetes_asyncio import client

from probemarker.daemon.app import Daemon, unless_stopped
from probemarker.daemon.assembly import client_settings
from probemarker.daemon.settings import RunSettings
from probemarker.demo import cluster
from probemarker.demo.containers import ContainerFiles, DemoError, free_port, serving_http
from probemarker.demo.examples import Example, columns_of, load_examples
from probemarker.demo.model import Board
from probemarker.demo.player import Played, Show, play
from probemarker.demo.scenario import PODS, STEPS
from probemarker.demo.screen import choose_screen
from probemarker.demo.stopping import StopSignals
from probemarker.demo.view import Totals, build_layout, stamp, summary_lines
from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.config import load_kubeconfig
from probemarker.sim import SimCluster
from probemarker.sim.server.discovery.catalog import EVENTS
from probemarker.sim.server.discovery.catalog import PODS as POD_RESOURCE
from probemarker.sim.store.resourcetype import ResourceType
from probemarker.sim.store.watchcache import WatchEvent

EXIT_OK, EXIT_NOT_SEEN, EXIT_UNUSABLE, EXIT_STOPPED = 0, 1, 2, 130
NODE = "node-1"
READY_WITHIN = 30.0  # the daemon lists pods and markers from a local sim: well within


@dataclass(frozen=True, slots=True)
class DemoOptions:
    fast: bool = False  # the examples' copies with every period 1 s, no initial delay
    plain: bool = False  # plain lines even on a terminal
    log_file: str | None = None  # keep the daemon's log there (else it goes with the scratch)


async def _follow(show: Show, sim: SimCluster) -> None:
    """Feed the board from the sim's store: every pod, every event (until cancelled)."""

    async def watch(resource: ResourceType, see: Callable[[WatchEvent], None]) -> None:
        stream = sim.store.watch(resource)
        try:
            async for event in stream:
                if isinstance(event, WatchEvent):
                    see(event)
                    show.update()
        finally:
            stream.close()

    async def tick() -> None:
        while True:
            await anyio.sleep(0.5)
            show.redraw()

    async with anyio.create_task_group() as group:
        group.start_soon(
            watch, POD_RESOURCE, lambda e: show.board.see_pod(e.object, deleted=e.type == "DELETED")
        )
        group.start_soon(watch, EVENTS, lambda e: show.board.see_event(e.object))
        group.start_soon(tick)


# -- the run -------------------------------------------------------------------------


def daemon_settings(sim: SimCluster) -> RunSettings:
    return RunSettings(
        kubeconfig=str(sim.kubeconfig_path),
        node=NODE,
        shutdown_grace_seconds=2.0,
        log_format="json",
        metrics_address="0",  # a demo must not take :9808 from a daemon on this host
    )


async def _set_up(
    sim: SimCluster, files: ContainerFiles, examples: Sequence[Example]
) -> tuple[dict[str, str], int]:
    port = free_port()
    async with client.ApiClient(sim.configuration()) as api:
        await cluster.install_crd(api)
        await cluster.create_namespaces(api, (e.namespace for e in examples))
        ips = await cluster.create_pods(api, sim, files, PODS, node=NODE, http_port=port)
        await cluster.apply_markers(api, examples)
    return ips, port


async def _session(
    sim: SimCluster,
    show: Show,
    files: ContainerFiles,
    examples: Sequence[Example],
    stop: anyio.Event,
    played: Played,
    ran: _Ran,
) -> None:
    """Everything between the sim's start and its stop; the daemon goes into `ran` as
    soon as it exists, so its figures can be summed whatever ends the session."""
    set_up = await unless_stopped(stop, lambda: _set_up(sim, files, examples))
    if set_up is None:
        return
    ips, port = set_up
    show.note(
        f"{stamp(show.elapsed())} {len(PODS)} pods running; applied "
        + ", ".join(f"{e.namespace}/{e.name} ({e.file})" for e in examples)
    )
    web = [(pod, ips[pod.key]) for pod in PODS if pod.serves_http]
    run = daemon_settings(sim)
    connection = await load_kubeconfig(sim.kubeconfig_path)
    async with (
        serving_http(files, web, port),
        KubeClient(connection, settings=client_settings(run)) as kube,
        anyio.create_task_group() as watching,
    ):
        watching.start_soon(_follow, show, sim)
        daemon = Daemon(kube, run)
        ran.daemon = daemon
        daemon_stop = anyio.Event()
        async with anyio.create_task_group() as running:
            running.start_soon(lambda: daemon.run(stop=daemon_stop))
            try:
                await _play_when_ready(show, daemon, files, examples, stop, played)
            finally:
                daemon_stop.set()  # the daemon's graceful stop; `running` waits for it
                if stop.is_set():
                    show.headline = "stopped"
                    show.note(
                        f"{stamp(show.elapsed())} stopping the daemon (a second Ctrl-C "
                        "skips its graceful stop)"
                    )
                show.footer = "stopping the daemon and the simulated cluster, cleaning up"
                show.redraw()
        watching.cancel_scope.cancel()


async def _play_when_ready(
    show: Show,
    daemon: Daemon,
    files: ContainerFiles,
    examples: Sequence[Example],
    stop: anyio.Event,
    played: Played,
) -> None:
    with anyio.move_on_after(READY_WITHIN) as waiting:
        await unless_stopped(stop, daemon.ready.wait)
    if waiting.cancelled_caught:
        raise DemoError(
            f"the daemon was not ready within {READY_WITHIN:.0f} s; "
            "run again with --log-file FILE and read its log"
        )
    if stop.is_set():
        return
    show.note(f"{stamp(show.elapsed())} daemon running on {NODE}")
    await unless_stopped(stop, lambda: play(show, files, examples, STEPS, played))


@dataclass(slots=True)
class _Ran:
    """What ran, for the summary: the daemon once it exists."""

    daemon: Daemon | None = None


def _totals(show: Show, ran: _Ran, played: Played, stop: anyio.Event) -> Totals:
    daemon = ran.daemon
    if daemon is None:
        outcome = "stopped before the daemon started"
    elif stop.is_set():
        outcome = f"stopped during step {played.step} of {len(STEPS)}"
    elif played.missed is not None:
        outcome = f"step {played.step} of {len(STEPS)} was not seen in time"
    else:
        outcome = "the scenario played to the end"
    if daemon is None:
        return Totals(show.elapsed(), outcome, runs=0, transitions={}, writes=0, events=0)
    engine, events = daemon.engine.stats, daemon.events.stats
    return Totals(
        elapsed=show.elapsed(),
        outcome=outcome,
        runs=sum(engine.runs.values()),
        transitions={str(state): n for state, n in engine.transitions.items()},
        writes=daemon.writer.stats.writes,
        events=events.created + events.patched,
    )


async def run_demo(
    options: DemoOptions,
    *,
    out: TextIO,
    err: TextIO,
    environ: Mapping[str, str],
    stop: anyio.Event,
) -> int:
    """The whole demo; returns the exit code. `stop` ends it early (Ctrl-C)."""
    examples = load_examples(fast=options.fast)
    columns = {e.namespace: columns_of(examples, e.namespace) for e in examples}
    layout = build_layout(examples, PODS, columns)
    screen = choose_screen(out, environ, layout, plain=options.plain)
    show = Show(Board(columns, [pod.key for pod in PODS]), screen)
    played, ran = Played(), _Ran()
    scratch = Path(tempfile.mkdtemp(prefix="probemarker-demo-"))
    sim_dir: Path | None = None
    failure: DemoError | None = None
    try:
        log = Path(options.log_file) if options.log_file else scratch / "daemon.log"
        with cluster.daemon_logs(log):
            async with SimCluster(node_names=(NODE,)) as sim:
                sim_dir = sim.directory
                show.note(
                    f"{stamp(show.elapsed())} simulated cluster at {sim.url}; "
                    f"container files in {scratch}"
                    + (" (--fast: every period 1 s, no initial delay)" if options.fast else "")
                )
                files = ContainerFiles(scratch)
                await _session(sim, show, files, examples, stop, played, ran)
    except* DemoError as failed:
        found = failed.exceptions[0]
        assert isinstance(found, DemoError)
        failure = found
    finally:
        # Also when a second Ctrl-C cancelled the clean-up's waits: only plain calls
        # here, so the summary so far is printed whatever ended the demo.
        screen.close()
        shutil.rmtree(scratch, ignore_errors=True)
        if failure is None:
            for line in summary_lines(_totals(show, ran, played, stop), STEPS, played.seen):
                screen.write(line)
        screen.write(_left_behind(scratch, sim_dir))
    if failure is not None:
        err.write(f"probemarker demo: {failure}\n")
        return EXIT_UNUSABLE
    if stop.is_set():
        return EXIT_STOPPED
    return EXIT_NOT_SEEN if played.missed is not None else EXIT_OK


async def main(
    options: DemoOptions,
    *,
    out: TextIO,
    err: TextIO,
    environ: Mapping[str, str],
    signals: StopSignals,
) -> int:
    """`probemarker demo`: `run_demo` with Ctrl-C (SIGINT) and SIGTERM received through
    `signals` (installed by the caller before the imports, stopping.py), including
    those that came before. The first one ends the scenario, stops the daemon
    gracefully and cleans up (exit 130); a second one cancels what is left of that (the
    scratch directory is still removed, the summary so far still printed)."""
    stop = anyio.Event()
    codes: list[int] = []
    async with anyio.create_task_group() as group:

        def received(_signum: int) -> None:
            if stop.is_set():
                group.cancel_scope.cancel()
            stop.set()

        with signals.delivering(received):
            codes.append(await run_demo(options, out=out, err=err, environ=environ, stop=stop))
    return codes[0] if codes else EXIT_STOPPED


def _left_behind(scratch: Path, sim_dir: Path | None) -> str:
    left = [str(p) for p in (scratch, sim_dir) if p is not None and p.exists()]
    if left:
        return "  left behind: " + ", ".join(left)
    return f"  left behind: nothing ({scratch} and the simulated cluster are gone)"
