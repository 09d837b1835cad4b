"""The whole daemon's CPU per probe run, by kind: httpGet and tcpSocket against exec.

`bench/probe_cost.py` measures the probe stage alone; this measures the real
`probemarker.daemon.app.Daemon` (the `probemarker run` wiring: informers, engine, timer wheel,
dispatcher, decide, writer) running one kind of probe at a time on a node, the kinds
side by side in one run, so the figure per run includes scheduling and deciding.

Three kinds of process, so each figure is one process's own:
- the sim (HTTPS with a bearer token; `bench/engine_idle.py`'s child) in a child
  process, not counted: --pods pods gs-0.. on node-1, container `app` declaring the
  named ports `http` (8080) and `tcp` (9090), each pod with its own IP 127.0.1.N from
  the sim's kubelet; its Python exec handler answers every exec with exit 0 at once;
- the targets in a child process, not counted: on every pod's IP, a raw asyncio
  HTTP/1.1 server on 8080 (keep-alive, 200 with a 3-byte body) and a TCP listener on
  9090 that accepts and closes (`bench/probe_cost.py`'s servers);
- the daemon (engine_idle's `serve_daemon`: default settings, in-cluster connection,
  JSON logs at info to /dev/null) in a child process of its own, a fresh one per turn.

One marker `bench` selects every pod with 3 probes p0..p2 of one kind (httpGet on port
`http`, path /healthz; tcpSocket on port `tcp`; exec `check p<j>`), period --period s,
timeout 1 s, thresholds 1, each setting label p<j>=ok on success. A turn replaces the
marker's probes with the turn's kind (no daemon running), starts a daemon, waits
--warmup s and then until the sim saw no write for 5 s (a restart with the labels in
place writes nothing: a daemon with unthrottled writes, not measured, set them and made
the first events before the first turn), then measures a window: CPU is user+sys of the daemon (`time.process_time()`, every thread); probe runs
are what the targets (HTTP requests, TCP connections) and the sim (execs) served. The
kinds take turns in --rounds rounds, the order rotated each round (the machine's noise
falls on every kind alike). Late: runs the dispatcher started more than 1 s after their
slot; missed: slots the engine skipped because a run overran or started late; both
over the window, so an overloaded daemon shows.

    python bench/daemon_kinds.py                      # 100 pods x 3, period 2 s, ~3 min
    python bench/daemon_kinds.py --seconds 120 --rounds 4
    python bench/daemon_kinds.py --period 1           # 300 runs/s
    python bench/daemon_kinds.py --kinds httpGet tcpSocket exec idle

`idle` (not by default) is a turn whose probes are tracked but not due (period
3600 s): the daemon's own CPU per second, which the report then takes off each kind's
CPU for a per-run figure without it.

Prints the figures and the command that reproduces them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import multiprocessing.connection
import platform
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.engine_idle import Child

# bench/engine_idle.py's and bench/probe_cost.py's pieces are imported where used, once
# main() has put the repository on sys.path (children inherit it).
KINDS = ("httpGet", "tcpSocket", "exec")
IDLE = "idle"  # not by default: the daemon's own CPU with the probes tracked, none due
PORTS = {"http": 8080, "tcp": 9090}
MiB = 1 << 20
Conn = multiprocessing.connection.Connection


# --- the targets: one HTTP server and one TCP listener on every pod's IP --------------


def serve_pod_targets(conn: Conn, ips: list[str]) -> None:
    asyncio.run(_targets_main(conn, ips))


async def _targets_main(conn: Conn, ips: list[str]) -> None:
    from bench.probe_cost import _HTTP, _Accept

    loop = asyncio.get_running_loop()
    counts: Counter[str] = Counter()
    async with contextlib.AsyncExitStack() as stack:
        for ip in ips:
            http = await loop.create_server(
                lambda: _HTTP(counts, "http", close=False), ip, PORTS["http"], backlog=1024
            )
            tcp = await loop.create_server(lambda: _Accept(counts), ip, PORTS["tcp"], backlog=1024)
            for server in (http, tcp):
                await stack.enter_async_context(server)
        conn.send(len(ips))
        while True:
            command, _ = await loop.run_in_executor(None, conn.recv)
            if command == "stop":
                return
            conn.send(dict(counts))


# --- the bench -------------------------------------------------------------------------


def marker_for(kind: str, *, probes: int, period: int) -> Any:
    """Marker `bench` over app=game: `probes` probes p<j> of `kind`, thresholds 1,
    timeout 1 s, each setting label p<j>=ok on success (the same labels for every kind,
    so a turn after the first finds them in place and writes nothing). `idle`: tcpSocket
    probes at period 3600 s (first runs spread over the hour: about none in a window)."""
    from tests.integration.world import marker, probe

    actions: dict[str, Callable[[int], dict[str, Any]]] = {
        "httpGet": lambda j: {"httpGet": {"port": "http", "path": "/healthz"}},
        "tcpSocket": lambda j: {"tcpSocket": {"port": "tcp"}},
        "exec": lambda j: {"exec": {"command": ["check", f"p{j}"]}},
    }
    if kind == IDLE:
        kind, period = "tcpSocket", 3600
    items = [
        probe(
            f"p{j}",
            period=period,
            timeout=1,
            succeeded={"labels": {f"p{j}": "ok"}},
            action=actions[kind](j),
        )
        for j in range(probes)
    ]
    return marker("bench", probes=items)


def _turn(
    kind: str, sim: Child, targets: Child, info: dict[str, Any], args: argparse.Namespace
) -> dict[str, Any]:
    """One daemon running `kind`: warm-up, then one window of --seconds/--rounds s."""
    from bench.engine_idle import Child, _delta, execs_in, serve_daemon, settle, writes_in

    sim.call("marker", body=marker_for(kind, probes=args.probes, period=args.period))
    daemon = Child(serve_daemon, info, True, {})
    try:
        daemon.receive(120)
        warmed = settle(sim, at_least=args.warmup)
        before, counted, served = daemon.call("sample"), sim.call("counts"), targets.call("counts")
        time.sleep(args.seconds / args.rounds)
        after = daemon.call("sample")
        requests = _delta(sim.call("counts"), counted)
        served = _delta(targets.call("counts"), served)
    finally:
        daemon.close()
    probes = {
        "httpGet": served.get("http requests", 0),
        "tcpSocket": served.get("tcp connections", 0),
        IDLE: served.get("tcp connections", 0),
        "exec": execs_in(requests),
    }[kind]
    return {
        "cpu": after["cpu"] - before["cpu"],
        "probes": probes,
        "results": _delta(after["by_result"], before["by_result"]),
        "late": after["late"] - before["late"],
        "missed": after["missed"] - before["missed"],
        "writes": writes_in(requests),
        "connections": served.get("http connections", 0),
        "rss": after["rss"],
        "warmed": warmed,
    }


def _prime(kind: str, sim: Child, info: dict[str, Any], args: argparse.Namespace) -> float:
    """A daemon not measured, its writes unthrottled, sets the labels and makes the first
    events (100 patches and 300 events; at the old write_qps of 10 they took 40 s); the
    measured daemons, at default settings, find them in place. Returns how long."""
    from bench.engine_idle import Child, serve_daemon, settle

    began = time.monotonic()
    sim.call("marker", body=marker_for(kind, probes=args.probes, period=args.period))
    daemon = Child(serve_daemon, info, True, {"write_qps": 1000.0, "write_burst": 1000})
    try:
        daemon.receive(120)
        settle(sim, at_least=1.0, quiet=3.0)
    finally:
        daemon.close()
    return time.monotonic() - began


def bench(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    from bench.engine_idle import Child, start_sim

    sim, info = start_sim()
    targets: Child | None = None
    try:
        sim.call("pods", count=args.pods, ports={"app": PORTS})
        targets = Child(serve_pod_targets, sim.call("pod_ips", count=args.pods))
        targets.receive(60)
        kinds: list[str] = args.kinds
        print(f"primed in {_prime(kinds[0], sim, info, args):.1f} s (labels and first events)")
        turns: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
        for r in range(args.rounds):
            shift = r % len(kinds)
            for kind in kinds[shift:] + kinds[:shift]:
                turns[kind].append(_turn(kind, sim, targets, info, args))
    finally:
        for child in (targets, sim):
            if child is not None:
                child.close()
    return turns


def _row(turns: list[dict[str, Any]], window: float) -> dict[str, Any]:
    probes, cpu = sum(t["probes"] for t in turns), sum(t["cpu"] for t in turns)
    results: Counter[tuple[str, str]] = Counter()
    for t in turns:
        results.update(t["results"])
    per = [t["cpu"] / max(1, t["probes"]) * 1e6 for t in turns]
    return {
        "probes": probes,
        "cpu": cpu,
        "wall": window * len(turns),
        "us": cpu / max(1, probes) * 1e6,
        "spread": (min(per), max(per)),
        "runs": sum(results.values()),
        "other": {k: n for k, n in results.items() if k[1] != "Succeeded"},
        **{k: sum(t[k] for t in turns) for k in ("late", "missed", "writes", "connections")},
        "rss": max(t["rss"] for t in turns),
        "warmed": max(t["warmed"] for t in turns),
    }


def report(args: argparse.Namespace, turns: dict[str, list[dict[str, Any]]]) -> None:
    window = args.seconds / args.rounds
    rows = {kind: _row(t, window) for kind, t in turns.items()}
    exec_us = rows["exec"]["us"] if "exec" in rows else None
    idle = rows.pop(IDLE, None)
    rate = args.pods * args.probes / args.period
    print(
        f"{args.pods} pods x {args.probes} probes of one kind, period {args.period} s "
        f"({rate:g} runs/s), timeout 1 s, thresholds 1; {len(turns)} kinds x {args.rounds} "
        f"rounds of {window:g} s, a fresh daemon each turn"
    )
    print(
        f"{'kind':<10}{'runs':>7}{'runs/s':>7}{'CPU s':>7}{'CPU %':>6}{'runs/CPU-s':>11}"
        f"{'µs CPU/run':>11}{'(rounds)':>11}{'x exec':>7}{'late':>5}{'missed':>7}"
        f"{'writes':>7}{'RSS MB':>7}{'warm-up s':>10}"
    )
    for kind, r in rows.items():
        low, high = r["spread"]
        times = f"{exec_us / r['us']:.1f}" if exec_us else "-"
        print(
            f"{kind:<10}{r['probes']:>7}{r['probes'] / r['wall']:>7.0f}{r['cpu']:>7.2f}"
            f"{r['cpu'] / r['wall'] * 100:>6.1f}{r['probes'] / max(r['cpu'], 1e-9):>11.0f}"
            f"{r['us']:>11.0f}{f'{low:.0f}-{high:.0f}':>11}{times:>7}{r['late']:>5}"
            f"{r['missed']:>7}{r['writes']:>7}{r['rss'] / MiB:>7.1f}{r['warmed']:>10.1f}"
        )
    for kind, r in rows.items():
        if r["other"]:
            print(f"NOT SUCCEEDED {kind}: {r['other']}")
        if abs(r["runs"] - r["probes"]) > args.pods * args.probes * args.rounds // 10:
            print(f"{kind}: the daemon counted {r['runs']} runs, the targets {r['probes']}")
    if "httpGet" in rows:
        conns = rows["httpGet"]["connections"]
        print(f"httpGet: {conns} new connections in the windows (keep-alive reuses the rest)")
    if idle is not None:
        base = idle["cpu"] / idle["wall"]
        print(
            f"idle (the probes tracked, {idle['probes']} runs): {idle['cpu']:.3f} CPU s, "
            f"{base * 100:.2f} % of a core; "
            "less that, µs CPU per run: "
            + ", ".join(
                f"{k} {(r['cpu'] - base * r['wall']) / r['probes'] * 1e6:.0f}"
                for k, r in rows.items()
                if r["probes"]
            )
        )
    if exec_us:
        said = [f"{exec_us / r['us']:.1f} {k}" for k, r in rows.items() if k != "exec"]
        print("one exec run costs the daemon the CPU of " + ", ".join(said) + " runs")
    print(
        "runs: what the targets (HTTP requests, TCP connections) and the sim (execs) served "
        "in the windows; runs/CPU-s: runs per second per core of the whole daemon; "
        "(rounds): µs CPU/run, least and most of the rounds; CPU %: of one core; late: "
        "runs started > 1 s after their slot; missed: slots skipped; writes: in the "
        "windows (0 expected); warm-up s: the longest"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=30.0, help="measured, per kind")
    parser.add_argument("--rounds", type=int, default=2, help="turns per kind, interleaved")
    parser.add_argument("--warmup", type=float, default=5.0, help="per turn, at least")
    parser.add_argument("--pods", type=int, default=100, help="at most 254 (127.0.1.N)")
    parser.add_argument("--probes", type=int, default=3, help="per pod")
    parser.add_argument("--period", type=int, default=2, help="the probes' periodSeconds")
    parser.add_argument(
        "--kinds",
        nargs="+",
        choices=(*KINDS, IDLE),
        default=list(KINDS),
        help="default: %(default)s; idle: the daemon tracking the probes, none due",
    )
    args = parser.parse_args()
    args.kinds = [k for k in (*KINDS, IDLE) if k in args.kinds]
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    print("reproduce: python bench/daemon_kinds.py " + " ".join(sys.argv[1:]))
    print(
        f"machine: {multiprocessing.cpu_count()} cores, Python {platform.python_version()}; "
        "sim (HTTPS + token) and targets (on the pods' IPs) each in a child process (not "
        "counted); the daemon (app.Daemon, in-cluster) in a child process of its own"
    )
    report(args, bench(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
