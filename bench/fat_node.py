"""A fat node: the peak memory (VmHWM) of `probemarker run` where pods carry many
annotations, after its first writes and after forced re-lists (410 Gone after a watch
outage), the figures behind manifests/daemonset.yaml's memory limit (issue 22).

Processes, so each figure is the daemon's own:
- the sim (HTTPS with a bearer token; bench/engine_idle.py's child) in a child process,
  not counted: --pods pods gs-0.. on node-1 (app=game), each with --labels labels and
  --annotation-bytes bytes of annotations in --annotations keys of equal size (counted
  as the API server counts the 256 KiB total: len(key) + len(value)), every value
  different; its Python exec handler answers every exec with exit 0 and `ok`;
- the grpc targets in a child process, not counted: one grpc.aio server with the
  standard health service (SERVING) listening on port 9000 of every pod's IP;
- the daemon: `python -m probemarker run --kubeconfig <the sim's> --node node-1`
  (bench/daemonset_resources.py's `Daemon`: default settings, JSON logs to a file, its
  health and metrics server on a free port), read from outside through /proc/PID:
  VmHWM (the kernel's record of its peak resident set) and VmRSS.

Phases, one daemon through all:
1. ready: the pods listed, no marker;
2. first writes: three exec markers (one probe each: a label and a pod condition, an
   annotation, a label) and one grpc marker (a label), period --period s, timeout 5 s,
   failureThreshold 3 (so a run late on a busy machine does not flip a pod), applied at
   once; until every pod shows all four results, then no write for 5 s (at most 60 s);
3. --relists times: a watch outage the daemon cannot resume from. In the sim, in one
   step of its event loop (nothing of the daemon's is served in between): every watch
   is closed abruptly, a namespace is created (the store's resourceVersion moves past
   what the daemon saw) and the store's history is dropped. The daemon's watches come
   back from their last resourceVersion, get 410 Gone and LIST again; the phase ends at
   its next `informer.relisted` line of the pods informer, then no write for 2 s (at
   most 30 s).

VmHWM and VmRSS are read at the end of each phase. Same command before and after a
change: the bench drives the daemon only from outside, so `git stash` (or a worktree of
another commit) measures that commit's daemon.

    python bench/fat_node.py                                  # the issue's node, ~3 min
    python bench/fat_node.py --pods 110 --annotation-bytes 0 --labels 2
    python bench/fat_node.py --pods 250 --relists 2
    python bench/fat_node.py --markers e0,e1,e2                # no grpc probe

Prints the figures and the command that reproduces them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import multiprocessing.connection
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
MiB = 1 << 20
GRPC_PORT = 9000
Conn = multiprocessing.connection.Connection


# --- the sim's extra commands (module level: the sim child runs them) -----------------------


def annotation_set(index: int, *, count: int, total: int) -> dict[str, str]:
    """`count` annotations of pod `index`, `total` bytes in all as the API server counts
    them (len(key) + len(value)), each value its own."""
    if count <= 0 or total <= 0:
        return {}
    out = {}
    share = total // count
    for j in range(count):
        key = f"bench.example.com/note-{j:02d}"
        stem = f"pod {index} note {j} "
        size = max(0, share - len(key))
        out[key] = (stem * (size // len(stem) + 1))[:size]
    return out


async def _sim_fat_pods(
    world: Any, *, count: int, labels: int, annotations: int, annotation_bytes: int
) -> int:
    """`count` running pods gs-0.. on node-1, created 25 at a time. The sim's own log
    lines (an exec stream the daemon gave up on, on a loaded machine) are silenced."""
    import logging

    import structlog

    logging.disable(logging.CRITICAL)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    for start in range(0, count, 25):
        batch = range(start, min(count, start + 25))
        await asyncio.gather(
            *(
                world.create_pod(
                    f"gs-{i}",
                    labels={
                        "app": "game",
                        **{f"tier-{k:02d}": f"v{i % 7}" for k in range(labels - 1)},
                    },
                    annotations=annotation_set(i, count=annotations, total=annotation_bytes),
                )
                for i in batch
            )
        )
    return count


async def _sim_settled(world: Any, *, pods: int, names: list[str]) -> bool:
    """Whether every pod gs-0.. shows the results of the markers `names`."""
    for i in range(pods):
        pod = world.pod(f"gs-{i}")
        meta = pod["metadata"]
        labels, notes = meta.get("labels") or {}, meta.get("annotations") or {}
        types = {c.get("type") for c in (pod.get("status") or {}).get("conditions") or []}
        shown = {
            "e0": labels.get("e0") == "ok" and "bench.example.com/e0" in types,
            "e1": notes.get("bench.example.com/e1") == "ok",
            "e2": labels.get("e2") == "ok",
            "g0": labels.get("g0") == "ok",
        }
        if not all(shown[name] for name in names):
            return False
    return True


async def _sim_outage(world: Any, *, round: int) -> int:
    """Close every watch, move the store's resourceVersion on and drop its history, in
    one step of the sim's loop; the number of watches closed."""
    from probemarker.sim.store.resourcetype import NAMESPACES

    closed = world.sim.faults.close_watches(abrupt=True)
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"relist-{round}"}}
    world.sim.store.create(NAMESPACES, body, namespace=None)
    world.sim.faults.drop_history()
    return int(closed)


SIM_COMMANDS = {"fat_pods": _sim_fat_pods, "settled": _sim_settled, "outage": _sim_outage}


# --- the grpc targets -------------------------------------------------------------------------


def serve_grpc_targets(conn: Conn, ips: list[str]) -> None:
    asyncio.run(_grpc_main(conn, ips))


async def _grpc_main(conn: Conn, ips: list[str]) -> None:
    import grpc.aio
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    server = grpc.aio.server()
    servicer = health.aio.HealthServicer()
    await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    for ip in ips:
        server.add_insecure_port(f"{ip}:{GRPC_PORT}")
    await server.start()
    conn.send(len(ips))
    loop = asyncio.get_running_loop()
    try:
        while True:
            command, _ = await loop.run_in_executor(None, conn.recv)
            if command == "stop":
                return
            conn.send(None)
    finally:
        await server.stop(grace=None)


# --- the markers -------------------------------------------------------------------------------


def markers(*, period: int, names: tuple[str, ...] = ("e0", "e1", "e2", "g0")) -> list[Any]:
    """e0 (exec: label e0 and condition bench.example.com/e0), e1 (exec: annotation
    bench.example.com/e1), e2 (exec: label e2), g0 (grpc on 9000: label g0)."""
    from tests.integration.world import marker, probe

    ok = "ok"
    timing = {"period": period, "timeout": 5, "failure": 3}
    every = [
        marker(
            "e0",
            probes=[
                probe(
                    "p",
                    command="check",
                    **timing,
                    condition="bench.example.com/e0",
                    succeeded={"labels": {"e0": ok}},
                )
            ],
        ),
        marker(
            "e1",
            probes=[
                probe(
                    "p",
                    command="ready",
                    **timing,
                    succeeded={"annotations": {"bench.example.com/e1": ok}},
                )
            ],
        ),
        marker(
            "e2",
            probes=[probe("p", command="alive", **timing, succeeded={"labels": {"e2": ok}})],
        ),
        marker(
            "g0",
            probes=[
                probe(
                    "p",
                    **timing,
                    action={"grpc": {"port": GRPC_PORT}},
                    succeeded={"labels": {"g0": ok}},
                )
            ],
        ),
    ]
    return [body for body in every if body["metadata"]["name"] in names]


# --- the run --------------------------------------------------------------------------------------


def relisted(log: Path, offset: int) -> int:
    """`informer.relisted` lines of the pods informer in the daemon's log."""
    count = 0
    for line in log.read_bytes()[offset:].splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if entry.get("event") == "informer.relisted" and entry.get("informer") == "pods":
                count += 1
    return count


def figures(daemon: Any) -> dict[str, float]:
    from bench.daemonset_resources import proc_status

    status = proc_status(daemon.pid)
    return {"hwm": status["VmHWM"] / MiB, "rss": status["VmRSS"] / MiB}


def bench(args: argparse.Namespace) -> dict[str, Any]:
    from bench.daemonset_resources import Daemon
    from bench.engine_idle import Child, settle, start_sim

    out: dict[str, Any] = {"phases": []}
    sim, info = start_sim(commands=SIM_COMMANDS)
    targets: Child | None = None
    daemon: Daemon | None = None
    scratch = tempfile.TemporaryDirectory(prefix="probemarker-fat-")
    log = Path(scratch.name) / "daemon.log"
    try:
        began = time.monotonic()
        sim.call(
            "fat_pods",
            count=args.pods,
            labels=args.labels,
            annotations=args.annotations,
            annotation_bytes=args.annotation_bytes,
        )
        out["created"] = time.monotonic() - began
        targets = Child(serve_grpc_targets, sim.call("pod_ips", count=args.pods))
        targets.receive(120)

        daemon = Daemon(info["kubeconfig"], log)
        out["ready"] = daemon.wait_ready(within=300)
        time.sleep(2)
        out["phases"].append(("ready (pods listed, no marker)", figures(daemon)))

        began = time.monotonic()
        names = tuple(args.markers.split(","))
        for body in markers(period=args.period, names=names):
            sim.call("marker", body=body)
        while not sim.call("settled", pods=args.pods, names=list(names)):
            if time.monotonic() - began > 600:
                raise TimeoutError("the first results were not all written within 600 s")
            if daemon.process.poll() is not None:
                raise RuntimeError(f"the daemon exited {daemon.process.returncode}")
            time.sleep(1)
        out["written"] = time.monotonic() - began
        settle(sim, at_least=0, within=60)
        out["phases"].append((f"first writes ({len(names)} markers)", figures(daemon)))

        for n in range(1, args.relists + 1):
            before = relisted(log, daemon.offset)
            closed = sim.call("outage", round=n)
            began = time.monotonic()
            while relisted(log, daemon.offset) <= before:
                if daemon.process.poll() is not None:
                    raise RuntimeError(f"the daemon exited {daemon.process.returncode}")
                if time.monotonic() - began > 120:
                    raise TimeoutError(f"no re-list within 120 s after outage {n}")
                time.sleep(0.2)
            settle(sim, at_least=0.5, quiet=2.0, within=30)
            out["phases"].append((f"re-list {n} ({closed} watches closed)", figures(daemon)))
        out["stop"] = daemon.stop()
        daemon = None
    finally:
        if daemon is not None and daemon.process.poll() is None:
            daemon.process.kill()
            daemon.process.wait()
        for child in (targets, sim):
            if child is not None:
                child.close()
        scratch.cleanup()
    return out


def report(args: argparse.Namespace, out: dict[str, Any]) -> None:
    print(
        f"{args.pods} pods on node-1, each with {args.labels} labels and "
        f"{args.annotation_bytes} bytes of annotations in {args.annotations} keys (created "
        f"in {out['created']:.0f} s); markers {args.markers} (e: exec, g: grpc), one probe each, period "
        f"{args.period} s; the daemon ready in {out['ready']:.1f} s, every result written "
        f"in {out['written']:.1f} s"
    )
    print(f"{'phase':<40}{'VmHWM':>8}{'VmRSS':>8}   (MiB)")
    for name, f in out["phases"]:
        print(f"{name:<40}{f['hwm']:>8.1f}{f['rss']:>8.1f}")
    code, took = out["stop"]
    peak = max(f["hwm"] for _, f in out["phases"])
    print(f"peak (VmHWM): {peak:.1f} MiB; SIGTERM: exit {code} in {took:.2f} s")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--labels", type=int, default=20, help="per pod, app=game included")
    parser.add_argument("--annotations", type=int, default=16, help="keys per pod")
    parser.add_argument("--annotation-bytes", type=int, default=32 << 10, help="per pod")
    parser.add_argument("--period", type=int, default=10, help="the probes' periodSeconds")
    parser.add_argument("--relists", type=int, default=4)
    parser.add_argument(
        "--markers",
        default="e0,e1,e2,g0",
        help="which of the markers: e0 e1 e2 (exec), g0 (grpc); comma-separated",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    print("reproduce: python bench/fat_node.py " + " ".join(sys.argv[1:]))
    print(
        f"machine: {multiprocessing.cpu_count()} cores, Python {platform.python_version()}; "
        "the daemon: `python -m probemarker run --kubeconfig` in a process of its own, "
        "read through /proc; the sim (HTTPS + token) and the grpc targets each in a "
        "child process, not counted"
    )
    report(args, bench(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
