"""The daemon on an idle node: its CPU against the client layer's floor loop doing the
same execs, side by side in one run; and its RSS with 1,000 pods and 3,000 probes.

Three kinds of process, so each figure is one process's own:
- the sim (`SimCluster(https=True, token=...)`, HTTPS with a bearer token, as a daemon
  in a cluster talks to its API server) in a child process, its CPU not counted; its
  kubelet runs the pods of node-1, a Python exec handler answers every exec (exit 0);
- the daemon (`probemarker.daemon.app.Daemon`, the `probemarker run` wiring, default settings,
  JSON logs at info to /dev/null) in a child process of its own;
- the floor: `run_exec` on a `KubeClient` (probemarker.kube, the layer the daemon's exec
  handler calls) in a child process of its own, the same probes at the same period,
  their first runs spread by the same hash and phase step (`schedule.timing.first_due`,
  the daemon's default --probe-phase-step-seconds) and kept on
  their grid by one loop over a heap: the execs without scheduling, deciding or writing.

`idle`: 110 pods x 3 exec probes (period 10 s, timeout 1 s, thresholds 1, each probe
setting its own label on success) = 33 execs/s. The floor runs first, then the daemon,
each for a warm-up (at least --warmup s, then until the sim saw no write for 5 s: the
daemon writes each pod's labels and an event per probe there) and then
the window; CPU is user+sys of that process over the window (`time.process_time`, every
thread); RSS is VmRSS at the end of the window. The sim's request accounting over each
window says how many execs were served and how many writes were made.

`rss`: 1,000 pods x 3 probes (one marker, period 3600 s, so about 0.8 execs/s): the
daemon's RSS once it is ready and has settled, beside its RSS after its imports;
connected in-cluster (as the DaemonSet) and through the kubeconfig (`probemarker run
--kubeconfig`; our own loader since it stopped importing kubernetes_asyncio's models,
see bench/kubeconfig_rss.py).

    python bench/engine_idle.py                      # idle, 60 s windows
    python bench/engine_idle.py --seconds 300        # the issue's 5 minutes
    python bench/engine_idle.py --only rss           # 1,000 pods, 3,000 probes
    python bench/engine_idle.py --only all
    python bench/engine_idle.py --status-socket      # the daemon serves its status socket
                                                     # (as the DaemonSet), nobody asks

`bench/engine_latency.py` and `bench/daemon_kinds.py` drive the same children (`Child`,
`serve_sim`, `serve_daemon`). Prints the figures and the command that reproduces them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import heapq
import multiprocessing
import multiprocessing.connection
import os
import platform
import random
import resource
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

NS = "default"
NODE = "node-1"
TOKEN = "bench-token"
MiB = 1 << 20
Conn = multiprocessing.connection.Connection


def rss_bytes() -> int:
    """This process's resident set now (VmRSS), not its peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# --- a child process driven over a pipe ----------------------------------------------------


class Child:
    """`target(conn, *args)` in a fresh (spawned) process; `call` sends one command."""

    def __init__(self, target: Callable[..., None], *args: Any) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, theirs = context.Pipe()
        self.process = context.Process(target=target, args=(theirs, *args), daemon=True)
        self.process.start()

    def receive(self, within: float = 600) -> Any:
        if not self.conn.poll(within):
            raise TimeoutError(f"no answer from {self.process.name} within {within:g} s")
        return self.conn.recv()

    def call(self, command: str, *, within: float = 600, **args: Any) -> Any:
        self.conn.send((command, args))
        return self.receive(within)

    def close(self) -> None:
        if self.process.is_alive():
            with contextlib.suppress(BrokenPipeError, OSError):
                self.conn.send(("stop", {}))
            self.process.join(timeout=30)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(timeout=10)


# --- the sim -------------------------------------------------------------------------------


def serve_sim(
    conn: Conn, https: bool, commands: dict[str, Callable[..., Any]] | None = None
) -> None:
    """The sim child; `commands` adds to (or replaces) _SIM_COMMANDS: module-level
    async functions `(world, **args)`, as bench/cri_exec.py gives."""
    _SIM_COMMANDS.update(commands or {})
    asyncio.run(_sim_main(conn, https))


async def _sim_main(conn: Conn, https: bool) -> None:
    from kubernetes_asyncio import client

    from probemarker.sim import SimCluster
    from tests.integration.world import Script, World

    options: dict[str, Any] = {"https": True, "token": TOKEN} if https else {}
    async with SimCluster(node_names=(NODE,), kubelet_events=False, **options) as sim:
        sim.kubelet.auto_finish_deletion = True
        async with client.ApiClient(sim.configuration()) as api:
            world = World(sim, api, Script())
            await world.install_crd()
            conn.send(
                {"kubeconfig": str(sim.kubeconfig_path), "ca": str(sim.ca_path), "port": sim.port}
            )
            loop = asyncio.get_running_loop()
            while True:
                command, args = await loop.run_in_executor(None, conn.recv)
                if command == "stop":
                    return
                conn.send(await _SIM_COMMANDS[command](world, **args))


async def _sim_pods(
    world: Any,
    *,
    count: int,
    containers: tuple[str, ...] = ("app",),
    ports: dict[str, dict[str, int]] | None = None,
) -> int:
    """`count` pods gs-0.. on node-1 (app=game), created 50 at a time, all running;
    `ports`: the declared ports by container (name -> number)."""
    for start in range(0, count, 50):
        names = [f"gs-{i}" for i in range(start, min(count, start + 50))]
        await asyncio.gather(
            *(
                world.create_pod(n, labels={"app": "game"}, containers=containers, ports=ports)
                for n in names
            )
        )
    return count


async def _sim_pod_ips(world: Any, *, count: int) -> list[str]:
    """The pod IPs the kubelet gave gs-0.. (127.0.1.N, in the order the pods ran)."""
    return [str(world.pod(f"gs-{i}")["status"]["podIP"]) for i in range(count)]


async def _sim_marker(world: Any, *, body: dict[str, Any]) -> str:
    await world.apply_marker(body)
    return str(body["metadata"]["name"])


async def _sim_counts(world: Any) -> dict[tuple[str, str, str], int]:
    """Requests answered so far, by (verb, resource, subresource), any status code."""
    out: Counter[tuple[str, str, str]] = Counter()
    for (verb, res, sub, _code), n in world.sim.accounting.counts().items():
        out[(verb, res, sub)] += n
    world.script.calls.clear()  # the script's call log would only grow
    return dict(out)


async def _sim_wait_labels(world: Any, *, pods: int, label: str, value: str) -> float:
    """Seconds until every pod gs-0.. shows `label=value`."""
    began = time.monotonic()
    for i in range(pods):
        await world.wait_pod(
            f"gs-{i}", lambda p: (p["metadata"].get("labels") or {}).get(label) == value, within=60
        )
    return time.monotonic() - began


async def _sim_flip(
    world: Any, *, pods: int, flips: int, low: float, high: float, seed: int
) -> dict[str, list[tuple[str, float, str]]]:
    """Each pod's answer flips `flips` times, `uniform(low, high)` s apart, independently.

    Returns "flips": (pod, t0, label value the pod should show), t0 the `time.monotonic()`
    of the flip (CLOCK_MONOTONIC: the same clock in every process of this machine); and
    "execs": (pod, time the handler was called, its answer) for every exec meanwhile.
    """
    from probemarker.sim.exec.runners import ExecReply, ExecRequest

    flipped: list[tuple[str, float, str]] = []
    execs: list[tuple[str, float, str]] = []
    ok, bad = ExecReply(0, b"ready\n"), ExecReply(1, b"", b"not ready\n")

    async def recording(request: ExecRequest) -> ExecReply:
        reply: ExecReply = await world.script.answer(request)
        answer = "true" if reply.exit_code == 0 else "false"
        execs.append((request.target.pod, time.monotonic(), answer))
        return reply

    async def one(name: str, rng: random.Random) -> None:
        healthy = True
        for _ in range(flips):
            await asyncio.sleep(rng.uniform(low, high))
            healthy = not healthy
            world.script.set(name, "app", "check", ok if healthy else bad)
            flipped.append((name, time.monotonic(), "true" if healthy else "false"))

    seeds = random.Random(seed)
    for i in range(pods):
        world.sim.exec_handlers.register(NS, f"gs-{i}", "app", recording)
    async with asyncio.TaskGroup() as group:
        for i in range(pods):
            group.create_task(one(f"gs-{i}", random.Random(seeds.random())))
    await asyncio.sleep(2.0)  # the runs that see the last flips
    for i in range(pods):
        world.sim.exec_handlers.register(NS, f"gs-{i}", "app", world.script.answer)
    world.script.calls.clear()
    return {"flips": flipped, "execs": execs}


_SIM_COMMANDS: dict[str, Callable[..., Any]] = {
    "pods": _sim_pods,
    "pod_ips": _sim_pod_ips,
    "marker": _sim_marker,
    "counts": _sim_counts,
    "wait_labels": _sim_wait_labels,
    "flip": _sim_flip,
}


def marker_body(*, probes: int, period: int, policies: Callable[[int], dict[str, Any]]) -> Any:
    """One marker over app=game: `probes` exec probes `check p<j>` on container app, each
    with thresholds 1, timeout 1 s and `probe(..., **policies(j))`'s marker policies."""
    from tests.integration.world import marker, probe

    items = []
    for j in range(probes):
        item = probe(f"p{j}", period=period, **policies(j))
        item["probe"]["exec"]["command"] = ["check", f"p{j}"]
        items.append(item)
    return marker("bench", probes=items)


async def connect(sim: dict[str, Any], *, incluster: bool) -> Any:
    """A `Connection` to the sim: as a pod's service account (`load_incluster`, what the
    DaemonSet uses: a token file and the CA beside it), or through the kubeconfig
    (`load_kubeconfig`, our own loader; the column kubernetes_asyncio says whether its
    client package was imported anyway)."""
    from probemarker.kube.connect.config import load_incluster, load_kubeconfig

    if not incluster:
        return await load_kubeconfig(sim["kubeconfig"])
    account = Path(sim["kubeconfig"]).parent / f"serviceaccount-{os.getpid()}"
    account.mkdir(exist_ok=True)
    (account / "token").write_text(TOKEN)
    ca = Path(sim["ca"]).read_bytes()  # noqa: ASYNC240 - once, before anything runs
    (account / "ca.crt").write_bytes(ca)
    environ = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(sim["port"])}
    return load_incluster(environ=environ, account_dir=account)


# --- the daemon ----------------------------------------------------------------------------


def serve_daemon(conn: Conn, sim: dict[str, Any], incluster: bool, over: dict[str, Any]) -> None:
    asyncio.run(_daemon_main(conn, sim, incluster, over))


async def _daemon_main(
    conn: Conn, sim: dict[str, Any], incluster: bool, overrides: dict[str, Any]
) -> None:
    import anyio

    from probemarker.daemon.app import Daemon
    from probemarker.daemon.assembly import client_settings
    from probemarker.daemon.settings import RunSettings
    from probemarker.kube.connect.client import KubeClient
    from probemarker.observe.logging import configure_logging

    imported = rss_bytes()
    sink = open(os.devnull, "w")  # noqa: SIM115, ASYNC230 - /dev/null, for the whole run
    configure_logging(format="json", level="info", stream=sink)
    # The wiring before issue 15, for bench/engine_budget.py: events took their tokens
    # from the status writes' bucket.
    shared_budget = overrides.pop("events_share_write_budget", False)
    # The health and metrics server runs, as in a cluster (its memory counts), on a free
    # port: benches may run side by side.
    overrides.setdefault("metrics_address", "127.0.0.1:0")
    settings = RunSettings(node=NODE, **overrides)  # the connection is made here
    connection = await connect(sim, incluster=incluster)
    async with KubeClient(connection, settings=client_settings(settings)) as kube:
        daemon = Daemon(kube, settings)
        if shared_budget:
            daemon.events._limiter = daemon.limiter
        stop = anyio.Event()
        loop = asyncio.get_running_loop()

        def sample() -> dict[str, Any]:
            stats, writer = daemon.engine.dispatcher.stats, daemon.writer.stats
            return {
                "cpu": time.process_time(),
                "rss": rss_bytes(),
                "rss_imports": imported,
                "probes": daemon.engine.probe_count,
                "runs": stats.runs_finished,
                "late": stats.late,
                "lateness_max": stats.lateness_max,
                "slot_waits": stats.slot_waits,
                "slot_wait_max": stats.slot_wait_max,
                "missed": daemon.engine.stats.missed_slots,
                "by_result": dict(daemon.engine.stats.runs),  # (handler kind, result)
                "writes": writer.writes,
                "events": daemon.events.stats.created + daemon.events.stats.patched,
                "events_queued": daemon.events.queued,
                "events_queued_max": daemon.events.stats.queued_max,
                "events_dropped": daemon.events.stats.dropped,
                "events_failed": daemon.events.stats.failed,
                "write_tokens_waited": daemon.limiter.waited,
                "kubernetes_asyncio": "kubernetes_asyncio.client" in sys.modules,
            }

        def answer() -> None:  # a thread: samples never wait for the event loop
            while True:
                command, _ = conn.recv()
                if command == "stop":
                    loop.call_soon_threadsafe(stop.set)
                    return
                conn.send(sample())

        async with anyio.create_task_group() as group:
            group.start_soon(lambda: daemon.run(stop=stop))
            await daemon.ready.wait()
            conn.send(sample())
            threading.Thread(target=answer, daemon=True).start()
    sink.close()


# --- the floor -----------------------------------------------------------------------------


def serve_floor(
    conn: Conn, sim: dict[str, Any], incluster: bool, pods: int, probes: int, period: float
) -> None:
    asyncio.run(_floor_main(conn, sim, incluster, pods, probes, period))


async def _floor_main(
    conn: Conn, sim: dict[str, Any], incluster: bool, pods: int, probes: int, period: float
) -> None:
    import anyio

    from probemarker.daemon.settings import RunSettings
    from probemarker.kube.connect.client import KubeClient
    from probemarker.probe.execresult import ExecExited
    from probemarker.probe.execstream import run_exec
    from probemarker.schedule.timing import first_due

    step = RunSettings().probe_phase_step_seconds  # the daemon's phases, the same groups
    counts = Counter[str]()
    stop = anyio.Event()
    loop = asyncio.get_running_loop()

    def sample() -> dict[str, Any]:
        return {"cpu": time.process_time(), "rss": rss_bytes(), "runs": counts["runs"]}

    def answer() -> None:
        while True:
            command, _ = conn.recv()
            if command == "stop":
                loop.call_soon_threadsafe(stop.set)
                return
            conn.send(sample())

    async with KubeClient(await connect(sim, incluster=incluster)) as kube:

        async def one(pod: str, j: int) -> None:
            result = await run_exec(
                kube,
                namespace=NS,
                pod=pod,
                container="app",
                command=("check", f"p{j}"),
                time_limit=1.0,
                wait=11.0,
            )
            counts["runs" if isinstance(result, ExecExited) else "errors"] += 1

        async def fire() -> None:
            now = time.monotonic()
            heap = [
                (first_due(f"gs-{i}#p{j}", period, now, step), i, j)
                for i in range(pods)
                for j in range(probes)
            ]
            heapq.heapify(heap)
            async with anyio.create_task_group() as runs:
                while True:
                    due, i, j = heap[0]
                    if due > time.monotonic():
                        await anyio.sleep(due - time.monotonic())
                        continue
                    heapq.heapreplace(heap, (due + period, i, j))
                    runs.start_soon(one, f"gs-{i}", j)

        async with anyio.create_task_group() as group:
            group.start_soon(fire)
            conn.send(sample())
            threading.Thread(target=answer, daemon=True).start()
            await stop.wait()
            group.cancel_scope.cancel()


# --- the benches ---------------------------------------------------------------------------


def start_sim(
    *, https: bool = True, commands: dict[str, Callable[..., Any]] | None = None
) -> tuple[Child, dict[str, Any]]:
    """The sim child and what connecting to it needs (kubeconfig, ca, port)."""
    sim = Child(serve_sim, https, commands)
    return sim, sim.receive(120)


def _delta(after: dict[Any, int], before: dict[Any, int]) -> dict[Any, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def writes_in(requests: dict[tuple[str, str, str], int]) -> int:
    """Requests that change something (anything but get/list/watch), execs excepted."""
    return sum(
        n
        for (verb, _res, sub), n in requests.items()
        if verb not in ("get", "list", "watch") and sub != "exec"
    )


def execs_in(requests: dict[tuple[str, str, str], int]) -> int:
    return sum(n for (_verb, res, sub), n in requests.items() if res == "pods" and sub == "exec")


def settle(sim: Child, *, at_least: float, quiet: float = 5.0, within: float = 300) -> float:
    """Wait `at_least` s, then until the sim has seen no write for `quiet` s; how long."""
    began = time.monotonic()
    time.sleep(at_least)
    writes, since = writes_in(sim.call("counts")), time.monotonic()
    while time.monotonic() - since < quiet and time.monotonic() - began < within:
        time.sleep(0.5)
        now = writes_in(sim.call("counts"))
        if now != writes:
            writes, since = now, time.monotonic()
    return time.monotonic() - began


def _measure(child: Child, sim: Child, *, warmup: float, seconds: float) -> dict[str, Any]:
    ready = child.receive(120)
    warmed = settle(sim, at_least=warmup)
    before, counted = child.call("sample"), sim.call("counts")
    time.sleep(seconds)
    after, requests = child.call("sample"), _delta(sim.call("counts"), counted)
    return {
        "cpu": after["cpu"] - before["cpu"],
        "rss": after["rss"],
        "runs": after["runs"] - before["runs"],
        "execs": execs_in(requests),
        "writes": writes_in(requests),
        "ready": ready,
        "end": after,
        "warmed": warmed,
    }


def bench_idle(args: argparse.Namespace) -> dict[str, Any]:
    sim, info = start_sim()
    incluster = not args.kubeconfig_load
    daemon_settings: dict[str, Any] = {}
    if args.status_socket:  # served, as the DaemonSet does; never asked here
        socket = Path(info["kubeconfig"]).parent / f"status-{os.getpid()}.sock"
        daemon_settings["status_socket"] = str(socket)
    try:
        sim.call("pods", count=args.idle_pods)
        sim.call("marker", body=marker_body(probes=3, period=args.period, policies=_label))
        figures = {}
        starts: dict[str, Callable[[], Child]] = {
            "floor": lambda: Child(serve_floor, info, incluster, args.idle_pods, 3, args.period),
            "daemon": lambda: Child(serve_daemon, info, incluster, daemon_settings),
        }
        for name, start in starts.items():
            process = start()
            try:
                figures[name] = _measure(process, sim, warmup=args.warmup, seconds=args.seconds)
            finally:
                process.close()
    finally:
        sim.close()
    return figures


def _label(j: int) -> dict[str, Any]:
    return {"succeeded": {"labels": {f"p{j}": "ok"}}}


def bench_rss(args: argparse.Namespace) -> dict[str, Any]:
    sim, info = start_sim()
    out: dict[str, Any] = {}
    try:
        began = time.monotonic()
        sim.call("pods", count=args.pods)
        out["created"] = time.monotonic() - began
        sim.call("marker", body=marker_body(probes=3, period=3600, policies=_label))
        for name, incluster in (("in-cluster", True), ("kubeconfig", False)):
            daemon = Child(serve_daemon, info, incluster, {})
            try:
                began = time.monotonic()
                ready = daemon.receive(300)
                to_ready = time.monotonic() - began
                time.sleep(args.settle)
                out[name] = {"ready": ready, "settled": daemon.call("sample"), "to_ready": to_ready}
            finally:
                daemon.close()
    finally:
        sim.close()
    return out


def _print_idle(args: argparse.Namespace, figures: dict[str, Any]) -> None:
    rate = args.idle_pods * 3 / args.period
    length = (
        "the issue's 5 minutes"
        if args.seconds >= 300
        else "default length; --seconds 300 for the issue's 5 minutes"
    )
    how = "through the kubeconfig" if args.kubeconfig_load else "in-cluster (token file + CA)"
    serving = "; status socket served, never asked" if args.status_socket else ""
    print(
        f"idle node: {args.idle_pods} pods x 3 exec probes, period {args.period:g} s "
        f"({rate:g} execs/s), connected {how}; window {args.seconds:g} s ({length}){serving}"
    )
    print(
        f"{'process':<38} {'warm-up s':>9} {'CPU s':>7} {'CPU %':>6} {'execs':>6} "
        f"{'µs/exec':>8} {'RSS MB':>7} {'writes':>6}"
    )
    labels = {"floor": "floor: run_exec loop (client layer)", "daemon": "daemon (app.Daemon)"}
    for name, label in labels.items():
        f = figures[name]
        per = f["cpu"] / max(1, f["execs"]) * 1e6
        print(
            f"{label:<38} {f['warmed']:>9.1f} {f['cpu']:>7.2f} {f['cpu'] / args.seconds * 100:>6.1f} "
            f"{f['execs']:>6} {per:>8.0f} {f['rss'] / MiB:>7.1f} {f['writes']:>6}"
        )
    d, fl = figures["daemon"], figures["floor"]
    ratio = (d["cpu"] / max(1, d["execs"])) / (fl["cpu"] / max(1, fl["execs"]))
    end = d["end"]
    print(
        f"daemon / floor CPU per exec: {ratio:.2f} (target <= 1.25); daemon RSS "
        f"{d['rss'] / MiB:.1f} MB (target < 80 MB); daemon runs started late "
        f"{end['late']}, the latest {end['lateness_max'] * 1000:.0f} ms after its due"
    )
    print(
        "warm-up: until the sim saw no write for 5 s (the daemon's first labels and events "
        f"go out then), at least {args.warmup:g} s"
    )


def _print_rss(args: argparse.Namespace, result: dict[str, Any]) -> None:
    print(
        f"tracked: {args.pods} pods x 3 probes, one marker, period 3600 s (pods created in "
        f"{result['created']:.1f} s); RSS of the daemon process (VmRSS), MB"
    )
    print(
        f"{'connected':<12} {'probes':>7} {'ready in s':>10} {'imports':>8} {'ready':>7} "
        f"{f'+{args.settle:g} s':>7} {'runs':>5} {'k8s_asyncio loaded':>19}"
    )
    for name in ("in-cluster", "kubeconfig"):
        r = result[name]
        ready, settled = r["ready"], r["settled"]
        print(
            f"{name:<12} {ready['probes']:>7} {r['to_ready']:>10.1f} "
            f"{ready['rss_imports'] / MiB:>8.1f} {ready['rss'] / MiB:>7.1f} "
            f"{settled['rss'] / MiB:>7.1f} {settled['runs']:>5} {settled['kubernetes_asyncio']!s:>19}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--only",
        choices=("idle", "rss", "all"),
        default="idle",
        help="which bench (default idle, about 3 minutes; rss about 40 s)",
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="idle: window per process")
    parser.add_argument("--warmup", type=float, default=15.0, help="idle: before the window")
    parser.add_argument("--idle-pods", type=int, default=110)
    parser.add_argument("--period", type=int, default=10, help="idle: probe period")
    parser.add_argument("--pods", type=int, default=1000, help="rss: pods (3 probes each)")
    parser.add_argument("--settle", type=float, default=10.0, help="rss: after ready")
    parser.add_argument(
        "--status-socket",
        action="store_true",
        help="idle: the daemon serves its status socket (as the DaemonSet), nobody asks",
    )
    parser.add_argument(
        "--kubeconfig-load",
        action="store_true",
        help="idle: daemon and floor connect through the kubeconfig, not in-cluster",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    print("reproduce: python bench/engine_idle.py " + " ".join(sys.argv[1:]))
    print(
        f"machine: {multiprocessing.cpu_count()} cores, Python {platform.python_version()}; "
        "sim (HTTPS + token) in a child process (not counted); daemon and floor each in "
        "a child process of their own"
    )
    if args.only in ("idle", "all"):
        _print_idle(args, bench_idle(args))
    if args.only in ("rss", "all"):
        _print_rss(args, bench_rss(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
