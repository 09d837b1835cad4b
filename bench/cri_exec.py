"""Exec probes through the API server (`--exec-backend api`) beside the node's container
runtime (`--exec-backend cri`), side by side in one run: the cost of one exec on each
side of it, and an idle node of 110 pods x 3 exec probes on each backend.

    python bench/cri_exec.py                        # root: starts its own containerd, ~4 min
    python bench/cri_exec.py --quick                # a smoke run, about a minute
    python bench/cri_exec.py --cri-endpoint unix:///run/pmcri/containerd.sock   # a running one
    python bench/cri_exec.py --only exec            # or idle

Run it in the test environment (`pip install -e '.[test]'`: the sim, the cri extra, and
grpcio-tools for the CRI messages of tests/cri/). The runtime: a real containerd with
its CRI plugin and runc. By default the bench starts
its own with `hack/cri-runtime.sh start DIR` (root; containerd, runc and busybox-static
installed: `hack/cri-runtime.sh install`) into a fresh temporary directory and stops it
at the end (`stop DIR` leaves nothing behind); `--cri-endpoint` uses a running one
(e.g. the CRI tests' runtime), whose containerd is found as the process listening on
the socket. The bench makes its own containers there, from the harness's busybox image
(tests/cri/runtime.py): one pod sandbox per container, as a node has one per pod, each
with one container `sleep`ing, and removes them at the end.

Processes, so each figure is one process's own:
- the sim (HTTPS with a bearer token; bench/engine_idle.py's child) in a child process:
  the API server. Its pods on node-1 are run by its kubelet; each one's exec handler
  (Python, in the sim) forwards the command to the real container with CRI `ExecSync`
  (the test-side client, tests/cri/client.py), so an `api` exec reaches the same
  container through API server + kubelet stand-in + runtime, as a real `pods/exec`
  does (a real kubelet calls CRI `Exec` and streams through containerd's streaming
  server instead: the runtime's work, `runc exec`, is the same; the kubelet's own CPU
  is not modelled beyond the sim's one ExecSync call); the variant `api, sim answers` has the sim's handler answer `ok` itself (no
  runtime: the API path's own cost). Pods on node-cri, which the sim's kubelet does not
  run, carry a status written by the bench naming the real containers
  (`containerd://<id>`, `World.create_bound_pod` then `World.write_running_status`),
  for the `cri` daemon; each container is created for its pod, with the kubelet's
  labels (pod UID, container name), which the cri backend checks before its first exec;
- the runtime: containerd and the `containerd-shim-runc-v2` processes serving its pods
  (those whose command line names its socket), read through /proc/PID/stat:
  utime+stime of every thread, plus cutime+cstime, the CPU of the children each has
  waited for. `runc exec` and the exec'd command itself are children of the shim (the
  shim is their subreaper), so they are counted there; containerd's own children are
  the short-lived `shim start` processes. A child still running at the end of a window
  is not counted yet (at most one per exec in flight);
- per exec: one prober process per backend, the daemon's own handler in it, as the
  engine calls it (`handler.run(ExecAction, ProbeTarget, time_limit=10)`):
  `probemarker.probe.exec.ExecHandler` on a `KubeClient` with the daemon's client
  settings, connected in-cluster (token file + CA, TLS resumption on: the daemon's
  default) for `api`; `probemarker.probe.cri.CRIExecHandler` on a `RuntimeClient` (one
  gRPC channel over the socket) for `cri`. Its CPU is user+sys of the prober process
  (`resource.getrusage`, every thread, grpc's included); every run must be Succeeded;
- idle node: `probemarker run` itself, a process of its own (bench/
  daemonset_resources.py's `Daemon`), default settings, `--node node-1` for `api` and
  `--node node-cri --exec-backend cri --cri-endpoint ...` for `cri`, read through
  /proc/PID (utime+stime; VmRSS sampled each second; VmHWM), its /metrics scraped every
  15 s (and before and after the window: probe runs by result and the mean exec
  duration from probemarker_probe_duration_seconds).

Per exec: the variants (backend x execs in flight, 1 and --concurrency) run interleaved:
each round runs a batch of each, in an order rotated every round, so drifts in machine
load hit them alike. Per variant: the prober's CPU per exec, the sim's per exec (utime+
stime of its process over the batch), the runtime's per exec, and each exec's latency
(wall clock in the prober), p50 and p99. Every figure of a batch includes what the other
processes did meanwhile for nothing (the sim's own timers, containerd's
housekeeping): the sim's figure during `cri` batches and the runtime's during `api,
sim answers` batches show that background.

Idle node: --pods pods on each node, one marker (app=game) with 3 exec probes per pod,
each `sh -c 'echo ok'` (--command), period --period s, timeout 1 s, thresholds 1, each
setting the label p<j>=ok: 33 execs/s at the defaults, every probe an exec so both
backends do the same work. One daemon at a time (api, then cri; rotated with
--idle-rounds): started, every label written, then no write for 5 s (at least
--idle-warmup s), then a window of --seconds. The runtime does the same work in both
turns (the cri daemon's ExecSync calls, or the api daemon's execs forwarded by the
sim's handler); the sim's CPU is the API server's work (for api, with that ExecSync).

Targets (issue 17): cri daemon CPU <= 1.5 ms per exec and below api; cri latency no
worse than api at p50. Prints the figures and the command that reproduces them.
Issue 43 measures each backend at 20 and 100 execs/s (`--pods 20 --period 3`, `--pods
100 --period 3`) with `--idle-rounds 3`: each round runs every variant once, in an
order rotated by one each round, and a line per variant gives the daemon's µs/exec and
RSS by window as median (min-max). `--phase-steps 0,0.25` makes a variant of each
backend per phase step (the daemon's --probe-phase-step-seconds: 0 gives every probe a
moment of its own, 0.25 groups the runs due together, schedule/timing.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import logging
import math
import multiprocessing
import os
import platform
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.engine_idle import Child

REPO = Path(__file__).resolve().parent.parent
HARNESS = REPO / "hack" / "cri-runtime.sh"
MiB = 1 << 20
TICKS = os.sysconf("SC_CLK_TCK")
NS = "default"
API_NODE = "node-1"  # run by the sim's kubelet
CRI_NODE = "node-cri"  # not run by the sim: its pods name real containers
INSTANT_POD = "instant-0"  # on node-1; the sim's handler answers `ok` itself
TIME_LIMIT = 10.0  # per exec in the per-exec part (none comes near it)
COMMAND = ("sh", "-c", "echo ok")


# --- pure helpers (tests/unit/test_bench_cri_exec.py) ---------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank `q` quantile (0..1) of `values` (not empty)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def spread(values: Sequence[float]) -> str:
    """`median (min-max) over N`, or the one value: a figure over the windows it was
    measured in, so that a difference inside the range reads as none."""
    from bench.vs_stats import spread as median_range  # the benches' one median and range

    if len(values) == 1:
        return f"{values[0]:.0f} (one window)"
    figure = median_range(values)
    return f"{figure.median:.0f} ({figure.low:.0f}-{figure.high:.0f}) over {figure.runs}"


def stat_cpu(stat: str, *, children: bool) -> float:
    """utime+stime (and cutime+cstime with `children`) of a /proc/PID/stat text, in s."""
    fields = stat[stat.rindex(")") + 2 :].split()  # after the command, which may hold spaces
    used = int(fields[11]) + int(fields[12])
    if children:
        used += int(fields[13]) + int(fields[14])
    return used / TICKS


def is_shim_of(cmdline: bytes, socket: str) -> bool:
    """Whether a /proc/PID/cmdline (NUL-separated) is a runc shim serving `socket`."""
    argv = cmdline.rstrip(b"\0").split(b"\0")
    if not argv or not argv[0].endswith(b"containerd-shim-runc-v2"):
        return False
    return any(a == b"-address" and b == socket.encode() for a, b in itertools.pairwise(argv))


_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Prometheus text exposition: (name, labels) -> value; comments skipped."""
    out = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None or line.startswith("#"):
            continue
        labels = frozenset(_LABEL.findall(match["labels"] or ""))
        out[(match["name"], labels)] = float(match["value"])
    return out


def metric(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    """The sum of `name`'s samples whose labels include `labels` (0 when none)."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


# --- the runtime, from outside ----------------------------------------------------------------


def listener_pid(socket: str) -> int:
    """The process listening on the unix socket `socket` (its containerd)."""
    inodes = set()
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 8 and parts[7] == socket and parts[5] == "01":  # 01: listening
            inodes.add(f"socket:[{parts[6]}]")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                        return int(pid)
    raise RuntimeError(f"no process listens on {socket}: is the runtime running?")


def shim_pids(socket: str) -> list[int]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if is_shim_of(Path(f"/proc/{pid}/cmdline").read_bytes(), socket):
                out.append(int(pid))
    return sorted(out)


def proc_cpu(pid: int, *, children: bool = False) -> float:
    return stat_cpu(Path(f"/proc/{pid}/stat").read_text(), children=children)


def proc_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


@dataclass
class Runtime:
    """A containerd with its CRI plugin: its endpoint, and the processes to count."""

    endpoint: str
    state_dir: Path | None = None  # set when this bench started it (and stops it)
    containerd: int = 0
    shims: list[int] = field(default_factory=list)

    @property
    def socket(self) -> str:
        return self.endpoint.removeprefix("unix://")

    def find_processes(self) -> None:
        self.containerd = listener_pid(self.socket)
        self.shims = shim_pids(self.socket)

    def cpu(self) -> float:
        """containerd's and its shims' CPU so far, with their reaped children's, in s."""
        used = 0.0
        for pid in (self.containerd, *self.shims):
            with contextlib.suppress(OSError):  # a shim gone: its CPU is lost with it
                used += proc_cpu(pid, children=True)
        return used

    def rss(self) -> tuple[int, int]:
        """VmRSS of containerd, and of its shims together."""
        shims = 0
        for pid in self.shims:
            with contextlib.suppress(OSError):
                shims += proc_rss(pid)
        return proc_rss(self.containerd), shims


def _harness(command: str, state_dir: Path) -> str:
    env = {**os.environ, "PROBEMARKER_CRI_PYTHON": sys.executable}
    done = subprocess.run(
        [str(HARNESS), command, str(state_dir)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env=env,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"hack/cri-runtime.sh {command} {state_dir} exited {done.returncode}: "
            f"{done.stderr.strip()}"
        )
    return done.stdout


@contextlib.contextmanager
def runtime_for(endpoint: str | None) -> Iterator[Runtime]:
    """The runtime at `endpoint`, or one started here (and stopped at the end)."""
    if endpoint:
        if not endpoint.startswith("unix:///"):
            raise SystemExit(f"--cri-endpoint {endpoint!r}: expected unix:///path/to/socket")
        yield Runtime(endpoint)
        return
    if os.geteuid() != 0:
        raise SystemExit(
            "starting a containerd needs root (hack/cri-runtime.sh start); run as root, "
            "or give --cri-endpoint unix:///... of a running one"
        )
    state_dir = Path(tempfile.mkdtemp(prefix="pmbench-"))
    try:
        printed = _harness("start", state_dir)
        found = re.search(r"^PROBEMARKER_TEST_CRI_ENDPOINT=(\S+)$", printed, re.MULTILINE)
        if found is None:
            raise RuntimeError(f"hack/cri-runtime.sh start printed no endpoint: {printed!r}")
        yield Runtime(found[1], state_dir)
    finally:
        if state_dir.exists():
            _harness("stop", state_dir)


@contextlib.contextmanager
def containers(endpoint: str, owners: Sequence[tuple[str, str]]) -> Iterator[list[str]]:
    """A running busybox container per (pod name, pod UID) in `owners`, each in a pod
    sandbox of its own (as a node has one per pod) and labelled as the kubelet labels
    it (the cri backend checks whose container it is); their IDs. Removed, with their
    sandboxes, at the end."""
    from tests.cri.client import CRIClient, compile_messages
    from tests.cri.runtime import Containers, kubelet_labels, remove_sandbox, run_sandbox, unique

    with tempfile.TemporaryDirectory(prefix="probemarker-bench-pb-") as out:
        pb = compile_messages(Path(out))
    made: list[Containers] = []
    with CRIClient(endpoint, pb) as cri:

        def one(i: int) -> str:
            pod = Containers(cri, run_sandbox(cri, unique(f"bench-{i}")))
            made.append(pod)
            name, uid = owners[i]
            labels = kubelet_labels(uid=uid, container="app", namespace=NS, pod=name)
            return pod.start("app", labels=labels)

        try:
            with ThreadPoolExecutor(4) as pool:
                yield list(pool.map(one, range(len(owners))))
        finally:
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(lambda p: (p.remove_all(), remove_sandbox(cri, p.sandbox)), made))


# --- the sim's extra commands (run in the sim child) ------------------------------------------


async def _sim_forward(world: Any, *, endpoint: str, pods: dict[str, str]) -> int:
    """Each pod's container `app` answers exec by ExecSync on the real container named."""
    import grpc
    import grpc.aio

    from probemarker.sim.exec.runners import ContainerRuntimeError, ExecReply, ExecRequest
    from tests.cri.client import SERVICE, compile_messages

    with tempfile.TemporaryDirectory(prefix="probemarker-bench-pb-") as out:
        pb = compile_messages(Path(out))
    channel = grpc.aio.insecure_channel(endpoint)
    call = channel.unary_unary(
        SERVICE + "ExecSync",
        request_serializer=pb.ExecSyncRequest.SerializeToString,
        response_deserializer=pb.ExecSyncResponse.FromString,
    )

    def forwarding(container_id: str) -> Any:
        async def forward(request: ExecRequest) -> ExecReply:
            message = pb.ExecSyncRequest(
                container_id=container_id, cmd=list(request.command), timeout=int(TIME_LIMIT)
            )
            try:
                answer = await call(message, timeout=TIME_LIMIT + 5)
            except grpc.aio.AioRpcError as err:
                raise ContainerRuntimeError(err.details() or err.code().name) from None
            return ExecReply(answer.exit_code, answer.stdout, answer.stderr)

        return forward

    for pod, container_id in pods.items():
        world.sim.exec_handlers.register(NS, pod, "app", forwarding(container_id))
    return len(pods)


async def _sim_bound_pods(world: Any, *, node: str, names: list[str]) -> list[str]:
    """Pods on `node` (app=game), Pending until `_sim_running_status`; their UIDs."""
    # The sim's kubelet says once per pod that it does not run `node` (so the pod would
    # stay Pending): expected here, where the bench writes their status as their kubelet.
    logging.getLogger("probemarker.sim.kubelet.node").setLevel(logging.ERROR)
    uids: list[str] = []
    for start in range(0, len(names), 50):
        made = await asyncio.gather(
            *(
                world.create_bound_pod(name, node=node, labels={"app": "game"})
                for name in names[start : start + 50]
            )
        )
        uids.extend(str(pod["metadata"]["uid"]) for pod in made)
    return uids


async def _sim_running_status(world: Any, *, pods: dict[str, str]) -> int:
    """Each pod's status as its kubelet writes it: container `app` runs as the ID given."""
    names = list(pods)
    for start in range(0, len(names), 50):
        await asyncio.gather(
            *(
                world.write_running_status(name, {"app": f"containerd://{pods[name]}"})
                for name in names[start : start + 50]
            )
        )
    return len(names)


async def _sim_instant_pod(world: Any, *, name: str) -> str:
    """A pod on node-1 whose exec handler (the World's script) answers `ok` at once."""
    pod = await world.create_pod(name, labels={"app": "bench"})
    return str(pod["metadata"]["uid"])


async def _sim_uids(world: Any, *, names: list[str]) -> list[str]:
    return [str(world.pod(n)["metadata"]["uid"]) for n in names]


async def _sim_wait_labelled(world: Any, *, names: list[str], labels: dict[str, str]) -> float:
    """Seconds until every pod named shows `labels`."""
    began = time.monotonic()
    for name in names:
        await world.wait_pod(
            name,
            lambda p: labels.items() <= ((p["metadata"].get("labels") or {}).items()),
            within=120,
        )
    return time.monotonic() - began


SIM_COMMANDS = {
    "forward": _sim_forward,
    "bound_pods": _sim_bound_pods,
    "running_status": _sim_running_status,
    "instant_pod": _sim_instant_pod,
    "uids": _sim_uids,
    "wait_labelled": _sim_wait_labelled,
}


# --- a prober: the daemon's exec handler of one backend, in a process of its own ---------------


def serve_prober(conn: Any, backend: str, sim: dict[str, Any], endpoint: str) -> None:
    asyncio.run(_prober_main(conn, backend, sim, endpoint))


async def _prober_main(conn: Any, backend: str, sim: dict[str, Any], endpoint: str) -> None:
    async with contextlib.AsyncExitStack() as stack:
        handler: Any
        if backend == "api":
            from bench.engine_idle import connect
            from probemarker.daemon.assembly import client_settings
            from probemarker.daemon.settings import RunSettings
            from probemarker.kube.connect.client import KubeClient
            from probemarker.probe.exec import ExecHandler

            settings = client_settings(RunSettings(node=API_NODE))
            connection = await connect(sim, incluster=True)
            kube = await stack.enter_async_context(KubeClient(connection, settings=settings))
            handler = ExecHandler(kube)
        else:
            from probemarker.cri.client import RuntimeClient
            from probemarker.cri.endpoint import socket_path
            from probemarker.probe.cri import CRIExecHandler

            handler = CRIExecHandler(RuntimeClient(socket_path(endpoint)))
            await stack.enter_async_context(handler)
        conn.send("ready")
        loop = asyncio.get_running_loop()
        while True:
            command, params = await loop.run_in_executor(None, conn.recv)
            if command == "stop":
                return
            conn.send(await _prober_batch(handler, **params))


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _prober_batch(
    handler: Any,
    *,
    target: dict[str, str],
    argv: list[str],
    count: int,
    concurrency: int,
) -> dict[str, Any]:
    """`count` runs, `concurrency` at a time: CPU of this process, each run's latency,
    and the runs that were not Succeeded (by message)."""
    import anyio

    from probemarker.api.model import ExecAction
    from probemarker.probe.handler import ProbeTarget
    from probemarker.probe.outcome import Result
    from probemarker.watch.pods import PodUID

    action = ExecAction(tuple(argv))
    where = ProbeTarget(
        namespace=NS,
        pod=target["pod"],
        pod_uid=PodUID(target["uid"]),
        container="app",
        container_id=target.get("container_id", ""),
    )
    latencies: list[float] = []
    failures: Counter[str] = Counter()
    left = count

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            began = time.perf_counter()
            outcome = await handler.run(action, where, time_limit=TIME_LIMIT)
            latencies.append(time.perf_counter() - began)
            if outcome.result is not Result.SUCCEEDED:
                failures[f"{outcome.result}: {outcome.message}"[:200]] += 1

    gc.collect()  # garbage of the previous batch is not this one's cost
    cpu, wall = _cpu(), time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(max(1, min(concurrency, count))):
            group.start_soon(worker)
    return {
        "cpu": _cpu() - cpu,
        "wall": time.perf_counter() - wall,
        "latencies": latencies,
        "failures": dict(failures),
    }


# --- per exec ---------------------------------------------------------------------------------


@dataclass
class Variant:
    name: str  # "api", "api, sim answers", "cri"
    backend: str  # which prober
    target: dict[str, str]
    concurrency: int
    execs: int = 0
    daemon: float = 0.0  # CPU seconds of the prober
    sim: float = 0.0
    runtime: float = 0.0
    wall: float = 0.0
    latencies: list[float] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)

    @property
    def label(self) -> str:
        return f"{self.name} x{self.concurrency}"


def _run_batch(
    variant: Variant,
    probers: dict[str, Child],
    sim: Child,
    runtime: Runtime,
    count: int,
    argv: list[str],
) -> None:
    params = {
        "target": variant.target,
        "argv": argv,
        "count": count,
        "concurrency": variant.concurrency,
    }
    sim_cpu, runtime_cpu = proc_cpu(sim.process.pid or 0), runtime.cpu()
    answer = probers[variant.backend].call("batch", **params)
    variant.sim += proc_cpu(sim.process.pid or 0) - sim_cpu
    variant.runtime += runtime.cpu() - runtime_cpu
    variant.daemon += answer["cpu"]
    variant.wall += answer["wall"]
    variant.execs += count
    variant.latencies += answer["latencies"]
    variant.failures.update(answer["failures"])


def bench_exec(
    args: argparse.Namespace,
    sim: Child,
    info: dict[str, Any],
    runtime: Runtime,
    targets: dict[str, dict[str, str]],
) -> list[Variant]:
    from bench.engine_idle import Child

    probers = {b: Child(serve_prober, b, info, runtime.endpoint) for b in ("api", "cri")}
    try:
        for prober in probers.values():
            prober.receive(120)
        variants = [
            Variant(name, backend, targets[name], c)
            for c in sorted({1, args.concurrency})
            for name, backend in (("api", "api"), ("api, sim answers", "api"), ("cri", "cri"))
        ]
        command = list(args.command)
        for variant in variants:  # warm-up: connections, TLS sessions, the runtime's name
            probers[variant.backend].call(
                "batch",
                target=variant.target,
                argv=command,
                count=args.warmup,
                concurrency=variant.concurrency,
            )
        rounds = max(1, min(args.rounds, args.execs))
        for r in range(rounds):
            count = args.execs // rounds + (1 if r < args.execs % rounds else 0)
            shift = r % len(variants)
            for variant in variants[shift:] + variants[:shift]:
                _run_batch(variant, probers, sim, runtime, count, command)
    finally:
        for prober in probers.values():
            prober.close()
    return variants


def _ms(seconds: float, n: int) -> float:
    return seconds / max(1, n) * 1e3


def report_exec(args: argparse.Namespace, variants: list[Variant]) -> dict[str, Any]:
    print(
        f"\nper exec: `{shlex.join(args.command)}` into one busybox container, {args.execs} "
        f"execs per variant in {args.rounds} interleaved rounds (after {args.warmup} "
        "unmeasured); CPU in ms per exec, latency per exec"
    )
    print(
        f"{'variant':<24}{'daemon CPU':>11}{'sim CPU':>9}{'runtime':>9}{'all':>8}"
        f"{'p50 ms':>9}{'p99 ms':>9}{'execs/s':>9}"
    )
    out: dict[str, Any] = {}
    for v in variants:
        daemon, runtime = _ms(v.daemon, v.execs), _ms(v.runtime, v.execs)
        sim = 0.0 if v.backend == "cri" else _ms(v.sim, v.execs)
        p50, p99 = statistics.median(v.latencies) * 1e3, percentile(v.latencies, 0.99) * 1e3
        rate = v.execs / v.wall if v.wall else 0.0
        sim_text = f"{'0*':>9}" if v.backend == "cri" else f"{sim:>9.3f}"
        print(
            f"{v.label:<24}{daemon:>11.3f}{sim_text}{runtime:>9.2f}{daemon + sim + runtime:>8.2f}"
            f"{p50:>9.2f}{p99:>9.2f}{rate:>9.0f}"
        )
        out[v.label] = {"daemon": daemon, "sim": sim, "runtime": runtime, "p50": p50, "p99": p99}
        if v.failures:
            print(f"  NOT Succeeded: {dict(v.failures)}")
    cri = [v for v in variants if v.backend == "cri"]
    background = sum(v.sim for v in cri) / max(1, sum(v.execs for v in cri)) * 1e3
    instant = [v for v in variants if v.name == "api, sim answers"]
    quiet = sum(v.runtime for v in instant) / max(1, sum(v.execs for v in instant)) * 1e3
    print(
        "  * 0 by construction: a cri exec never reaches the API server (the sim's own CPU "
        f"during the cri batches, its background: {background:.3f} ms per exec)"
    )
    print(
        "  sim CPU: the sim's process (API server, kubelet stand-in and, for `api`, its "
        "ExecSync call to the runtime); runtime: containerd + its shims + their reaped "
        "children (runc exec, the command); background during `api, sim answers` batches, "
        f"which reach no runtime: {quiet:.3f} ms per exec"
    )
    checks = []
    for c in sorted({1, args.concurrency}):
        api, cri_ = out[f"api x{c}"], out[f"cri x{c}"]
        checks += [
            (f"x{c}: cri daemon CPU <= 1.5 ms", cri_["daemon"] <= 1.5),
            (f"x{c}: cri daemon CPU < api", cri_["daemon"] < api["daemon"]),
        ]
    checks.append(("x1: cri p50 <= api p50", out["cri x1"]["p50"] <= out["api x1"]["p50"]))
    print("targets: " + "; ".join(f"{k}: {'yes' if ok else 'NO'}" for k, ok in checks))
    if args.concurrency > 1:
        print(
            f"  (latency with {args.concurrency} in flight is mostly the runtime's queue, "
            "the same for both backends: shown, not a target)"
        )
    return out


# --- the idle node ----------------------------------------------------------------------------


def marker_body(*, period: int, command: Sequence[str]) -> Any:
    from tests.integration.world import marker, probe

    items = [
        probe(
            f"p{j}",
            period=period,
            timeout=1,
            succeeded={"labels": {f"p{j}": "ok"}},
            action={"exec": {"command": list(command)}},
        )
        for j in range(3)
    ]
    return marker("bench", probes=items)


def metrics_of(port: int | None) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    if port is None:
        return {}
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        return parse_metrics(answer.read().decode())


def _exec_figures(before: dict[Any, float], after: dict[Any, float]) -> dict[str, float]:
    def delta(name: str, **labels: str) -> float:
        return metric(after, name, **labels) - metric(before, name, **labels)

    runs = delta("probemarker_probe_runs_total", kind="exec")
    count = delta("probemarker_probe_duration_seconds_count", kind="exec")
    took = delta("probemarker_probe_duration_seconds_sum", kind="exec")
    return {
        "runs": runs,
        "succeeded": delta("probemarker_probe_runs_total", kind="exec", result="Succeeded"),
        "mean": took / count if count else math.nan,
        # issue 43's item 3: a run that times out and then ends costs no pod write, so the
        # pod writes are the transitions' (a flip to Failed and back), no more
        "transitions": delta("probemarker_transitions_total"),
        "pod_writes": delta("probemarker_pod_writes_total", outcome="written"),
        "holds_recorded": delta("probemarker_exec_holds_recorded_total"),
    }


def writes_line(figures: Sequence[dict[str, Any]]) -> str:
    """What the windows wrote: pod writes beside transitions (one each is the promise,
    timeouts under load included) and exec holds put on a pod's record."""
    writes = sum(f["execs"]["pod_writes"] for f in figures)
    transitions = sum(f["execs"]["transitions"] for f in figures)
    holds = sum(f["execs"]["holds_recorded"] for f in figures)
    failed = sum(f["execs"]["runs"] - f["execs"]["succeeded"] for f in figures)
    each = f" ({writes / transitions:.2f} a transition)" if transitions else ""
    return (
        f"pod writes {writes:.0f}{each}, transitions {transitions:.0f}, runs not Succeeded "
        f"{failed:.0f}, exec holds recorded {holds:.0f}"
    )


def idle_variants(backends: Sequence[str], steps: Sequence[float]) -> list[tuple[str, float]]:
    """The idle node's variants, (backend, phase step), in the table's order."""
    return [(backend, step) for backend in backends for step in steps]


def idle_order(variants: Sequence[tuple[str, float]], r: int) -> list[tuple[str, float]]:
    """Round `r`'s order: the variants rotated by `r` (bench/vs_stats.rotation)."""
    from bench.vs_stats import rotation

    return [variants[i] for i in rotation(len(variants), r)]


def variant_name(backend: str, step: float, steps: Sequence[float]) -> str:
    """A variant's row: the backend, and its phase step when several are measured."""
    return backend if len(steps) == 1 else f"{backend} step {step:g}"


def parse_steps(text: str) -> list[float]:
    """`--phase-steps`: comma-separated seconds, each 0 to 60, none twice."""
    try:
        steps = [float(part) for part in text.split(",") if part.strip()]
    except ValueError as err:
        raise SystemExit(
            f"--phase-steps: numbers of seconds, comma-separated, not {text!r}"
        ) from err
    if not steps or len(set(steps)) != len(steps) or not all(0 <= s <= 60 for s in steps):
        raise SystemExit(f"--phase-steps: distinct seconds from 0 to 60, not {text!r}")
    return steps


def idle_turn(
    args: argparse.Namespace,
    backend: str,
    step: float,
    sim: Child,
    info: dict[str, Any],
    runtime: Runtime,
    names: list[str],
    log: Path,
) -> dict[str, Any]:
    from bench.daemonset_resources import Daemon, window
    from bench.engine_idle import execs_in, settle

    node, extra = API_NODE, ("--probe-phase-step-seconds", f"{step:g}")
    if backend == "cri":
        extra += ("--exec-backend", "cri", "--cri-endpoint", runtime.endpoint)
        node = CRI_NODE
    daemon = Daemon(info["kubeconfig"], log, node=node, args=extra)
    try:
        ready = daemon.wait_ready()
        began = time.monotonic()
        labels = {f"p{j}": "ok" for j in range(3)}
        sim.call("wait_labelled", names=names, labels=labels)
        settle(sim, at_least=max(0.0, args.idle_warmup - (time.monotonic() - began)))
        port = daemon.metrics_port()
        metrics, requests = metrics_of(port), sim.call("counts")
        sim_cpu, runtime_cpu = proc_cpu(sim.process.pid or 0), runtime.cpu()
        figures = window(daemon, args.seconds)
        sim_cpu, runtime_cpu = proc_cpu(sim.process.pid or 0) - sim_cpu, runtime.cpu() - runtime_cpu
        after = sim.call("counts")
        figures["execs"] = _exec_figures(metrics, metrics_of(port))
        figures["api_execs"] = execs_in(after) - execs_in(requests)
        figures["sim_cpu"], figures["runtime_cpu"] = sim_cpu, runtime_cpu
        figures["ready"] = ready
        figures["stop"] = daemon.stop()
    finally:
        if daemon.process.poll() is None:
            daemon.process.kill()
            daemon.process.wait()
    return figures


def bench_idle(
    args: argparse.Namespace,
    sim: Child,
    info: dict[str, Any],
    runtime: Runtime,
    pods: dict[str, list[str]],
) -> dict[str, list[dict[str, Any]]]:
    sim.call("marker", body=marker_body(period=args.period, command=args.command))
    variants = idle_variants(("api", "cri"), args.phase_steps)
    out: dict[str, list[dict[str, Any]]] = {
        variant_name(b, s, args.phase_steps): [] for b, s in variants
    }
    with tempfile.TemporaryDirectory(prefix="probemarker-bench-") as scratch:
        log = Path(scratch) / "daemon.log"
        for r in range(args.idle_rounds):
            for backend, step in idle_order(variants, r):
                out[variant_name(backend, step, args.phase_steps)].append(
                    idle_turn(args, backend, step, sim, info, runtime, pods[backend], log)
                )
    return out


def report_idle(args: argparse.Namespace, turns: dict[str, list[dict[str, Any]]]) -> None:
    rate = args.pods * 3 / args.period
    print(
        f"\nidle node: {args.pods} pods x 3 exec probes (`{shlex.join(args.command)}`), period "
        f"{args.period} s ({rate:g} execs/s), `probemarker run` in its own process; "
        f"{args.idle_rounds} window(s) of {args.seconds:g} s per backend"
    )
    print(
        f"{'variant':<16}{'execs':>7}{'ok':>7}{'daemon mCPU':>12}{'µs/exec':>9}"
        f"{'RSS mean':>9}{'max':>7}{'VmHWM':>7}{'sim mCPU':>9}{'runtime mCPU':>13}"
        f"{'exec ms':>8}"
    )
    for backend, figures in turns.items():
        if not figures:
            continue
        wall = sum(f["wall"] for f in figures)
        cpu = sum(f["cpu"] for f in figures)
        runs = sum(f["execs"]["runs"] for f in figures)
        ok = sum(f["execs"]["succeeded"] for f in figures)
        means = [f["execs"]["mean"] for f in figures]
        print(
            f"{backend:<16}{runs:>7.0f}{ok:>7.0f}{cpu / wall * 1e3:>12.1f}"
            f"{cpu / max(1, runs) * 1e6:>9.0f}"
            f"{statistics.fmean(f['rss_mean'] for f in figures) / MiB:>9.1f}"
            f"{max(f['rss_max'] for f in figures) / MiB:>7.1f}"
            f"{max(f['hwm'] for f in figures) / MiB:>7.1f}"
            f"{sum(f['sim_cpu'] for f in figures) / wall * 1e3:>9.1f}"
            f"{sum(f['runtime_cpu'] for f in figures) / wall * 1e3:>13.1f}"
            f"{statistics.fmean(means) * 1e3:>8.1f}"
        )
        per_run = [f["cpu"] / max(1, f["execs"]["runs"]) * 1e6 for f in figures]
        rss = [f["rss_mean"] / MiB for f in figures]
        print(
            f"  {backend}: µs/exec by window {spread(per_run)}; RSS mean MiB by window "
            f"{spread(rss)}"
        )
        print(f"  {backend}: {writes_line(figures)}")
        api_execs = sum(f["api_execs"] for f in figures)
        ready = ", ".join(f"{f['ready']:.1f}" for f in figures)
        stops = ", ".join(f"exit {f['stop'][0]} in {f['stop'][1]:.2f} s" for f in figures)
        print(
            f"  {backend}: pods/exec sessions the sim served in the window(s): {api_execs}; "
            f"ready in {ready} s; SIGTERM: {stops}"
        )
    print(
        "  execs and ok: exec runs and Succeeded ones by the daemon's /metrics over the "
        "window; exec ms: their mean duration (probemarker_probe_duration_seconds); sim: "
        "the API server (for api, with its ExecSync to the runtime); runtime: containerd + "
        "shims + their reaped children (runc, the command), for either backend's execs"
    )


# --- the run ----------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", choices=("exec", "idle", "all"), default="all")
    parser.add_argument(
        "--cri-endpoint",
        help="unix:///... of a running containerd (default: start one, hack/cri-runtime.sh)",
    )
    parser.add_argument(
        "--command",
        nargs="+",
        default=list(COMMAND),
        help="argv of every exec (default: sh -c 'echo ok')",
    )
    parser.add_argument("--execs", type=int, default=300, help="per exec: measured per variant")
    parser.add_argument("--rounds", type=int, default=10, help="per exec: interleaved rounds")
    parser.add_argument("--warmup", type=int, default=5, help="per exec: unmeasured per variant")
    parser.add_argument("--concurrency", type=int, default=8, help="per exec: in flight")
    parser.add_argument("--pods", type=int, default=110, help="idle: pods on each node")
    parser.add_argument("--period", type=int, default=10, help="idle: the probes' period")
    parser.add_argument("--seconds", type=float, default=60.0, help="idle: each window")
    parser.add_argument("--idle-warmup", type=float, default=15.0, help="idle: before a window")
    parser.add_argument("--idle-rounds", type=int, default=1, help="idle: windows per variant")
    parser.add_argument(
        "--phase-steps",
        type=parse_steps,
        default=[0.25],
        help="idle: the daemons' --probe-phase-step-seconds, comma-separated: each a "
        "variant of each backend (default 0.25, the daemon's; `0,0.25` compares)",
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: small and short")
    args = parser.parse_args()
    for name in ("execs", "rounds", "concurrency", "pods", "period", "idle_rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.quick:
        args.execs, args.rounds, args.pods, args.seconds, args.idle_warmup = 40, 4, 10, 10.0, 5.0
    variants = 2 * len(args.phase_steps)
    if args.only != "exec" and args.idle_rounds % variants:
        print(
            f"note: {args.idle_rounds} idle rounds for {variants} variants: not every variant "
            "goes first equally often (a multiple of the variants' count balances the order)"
        )
    sys.path.insert(0, str(REPO))
    print("reproduce: python bench/cri_exec.py " + " ".join(sys.argv[1:]))
    print(
        f"machine: {multiprocessing.cpu_count()} cores, Python {platform.python_version()}; "
        "sim (HTTPS + token), probers and daemons each in a process of their own"
    )
    if not args.cri_endpoint and shutil.which("containerd") is None:
        raise SystemExit("containerd not found: hack/cri-runtime.sh install, or --cri-endpoint")
    began = time.monotonic()
    with runtime_for(args.cri_endpoint) as runtime:
        figures = run(args, runtime)
    print(f"\nwhole run: {time.monotonic() - began:.0f} s")
    return 0 if figures else 1


def run(args: argparse.Namespace, runtime: Runtime) -> dict[str, Any]:
    from bench.engine_idle import start_sim

    out: dict[str, Any] = {}
    count = args.pods if args.only != "exec" else 1
    sim, info = start_sim(commands=SIM_COMMANDS)
    try:
        # The cri pods first: each container is made for one of them, with its UID.
        cri_names = [f"cri-{i}" for i in range(count)]
        cri_uids = sim.call("bound_pods", node=CRI_NODE, names=cri_names)
        with containers(runtime.endpoint, list(zip(cri_names, cri_uids, strict=True))) as ids:
            runtime.find_processes()
            version = subprocess.run(  # its own binary: the version that runs
                [f"/proc/{runtime.containerd}/exe", "--version"],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.split()
            rss, shims = runtime.rss()
            print(
                f"runtime: {runtime.endpoint} "
                f"({'started by this bench' if runtime.state_dir else 'given'}), "
                f"containerd {version[2] if len(version) > 2 else '?'}, runc; {len(ids)} "
                f"busybox container(s), one pod sandbox each; containerd RSS "
                f"{rss / MiB:.0f} MiB, {len(runtime.shims)} shims {shims / MiB:.0f} MiB in all"
            )
            api_pods = {f"gs-{i}": ids[i] for i in range(count)}
            cri_pods = dict(zip(cri_names, ids, strict=True))
            sim.call("pods", count=count)
            sim.call("forward", endpoint=runtime.endpoint, pods=api_pods)
            sim.call("running_status", pods=cri_pods)
            if args.only in ("exec", "all"):
                instant = sim.call("instant_pod", name=INSTANT_POD)
                (uid,) = sim.call("uids", names=["gs-0"])
                targets = {
                    "api": {"pod": "gs-0", "uid": uid},
                    "api, sim answers": {"pod": INSTANT_POD, "uid": instant},
                    "cri": {
                        "pod": "cri-0",
                        "uid": cri_uids[0],
                        "container_id": f"containerd://{ids[0]}",
                    },
                }
                out["exec"] = report_exec(args, bench_exec(args, sim, info, runtime, targets))
            if args.only in ("idle", "all"):
                turns = bench_idle(
                    args, sim, info, runtime, {"api": list(api_pods), "cri": list(cri_pods)}
                )
                report_idle(args, turns)
                out["idle"] = turns
            if shim_pids(runtime.socket) != runtime.shims:
                print("note: the runtime's shims changed during the run; CPU of those gone is lost")
    finally:
        sim.close()
    return out


if __name__ == "__main__":
    sys.exit(main())
