"""The probe stage's cost per probe: HTTP and TCP probes against exec probes, in one run.

Each kind of probe runs through `ProbeRunner` with the daemon's real handlers, called
exactly as the engine calls them (`await runner.run(spec, target)`), in one prober
process that holds one handler per action type, as the daemon does:

  http        httpGet to a server that keeps connections alive (`HTTPGetHandler`)
  http-close  httpGet to a server that answers `Connection: close` and closes each
              connection: every probe opens a new one (the cost without reuse)
  tcp         tcpSocket to a listener that accepts and closes (`TCPSocketHandler`)
  exec        exec through `pods/exec` on a `KubeClient` (`ExecHandler`), TLS
              resumption on (the daemon's default), to one running pod of the sim

Three kinds of process, so each figure is one process's own:
- the targets: raw asyncio servers (HTTP/1.1 answering 200 with a 3-byte body, with
  and without keep-alive; a TCP listener) bound to 127.0.1.200 (all of 127/8 is lo on
  Linux), in a child process, its CPU not counted;
- the sim (HTTPS with a bearer token, its Python exec handler answering exit 0 at
  once; `bench/engine_idle.py`'s child) in a child process, its CPU not counted;
- the prober in a child process of its own, connected in-cluster (token file + CA).

Each kind first runs --warmup s unmeasured (pools filled, TLS session cached); then
the kinds take turns in --rounds rounds, the order rotated each round, each turn a
window of --seconds/--rounds s with --concurrency probes in flight (every worker
starts its next probe when its last one ends). CPU is user+sys of the prober over the
window (`time.process_time()`: every thread of it), ending when the last probe started
in the window has finished, so it covers exactly the probes counted. "probes/CPU-s"
is probes per second per core of the probe stage alone (no scheduling, deciding or
writing); "x exec" is how many probes of that kind cost the CPU of one exec probe.
The targets' and the sim's own counts over each window say how many connections the
HTTP probes opened and how many execs were served (an idle pooled connection is
dropped after 20 s, `probe.http.KEEPALIVE`: when more kinds make the gap between two
http turns longer, a turn reopens them). Connections are on loopback: the
kernel's work for the target's end of a connect may be charged to the prober (softirq
time in its context), so the kinds that connect are, if anything, overstated.

Two floors, not run by default (`--kinds ... http-floor tcp-floor`): the least the
same libraries do for the same answer, without handler or runner: a GET and read on a
pooled `aiohttp.ClientSession` (what HTTPGetHandler builds on) and asyncio's
`open_connection` + close.

    python bench/probe_cost.py                        # 10 s per kind, 5 rounds
    python bench/probe_cost.py --seconds 30 --concurrency 64
    python bench/probe_cost.py --kinds http tcp http-floor tcp-floor

Prints the figures and the command that reproduces them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gc
import multiprocessing
import multiprocessing.connection
import platform
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.engine_idle import Child
    from probemarker.probe.outcome import Outcome

    Probe = Callable[[], Awaitable[Outcome]]

# bench/engine_idle.py's pieces (Child, start_sim, connect, execs_in) are imported where
# used, once main() has put the repository on sys.path (children inherit it).
NS = "default"
HOST = "127.0.1.200"  # above the sim's pod IPs (127.0.1.1 upward)
KINDS = ("http", "http-close", "tcp", "exec")  # the default
FLOORS = ("http-floor", "tcp-floor")
POD, CONTAINER = "gs-0", "app"
REPLY = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nok\n"
CLOSING = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n"
    b"Connection: close\r\n\r\nok\n"
)
Conn = multiprocessing.connection.Connection


# --- the targets: servers in a child process -------------------------------------------


class _HTTP(asyncio.Protocol):
    """HTTP/1.1 without a body in requests: answer every header block with `reply`."""

    def __init__(self, counts: Counter[str], name: str, *, close: bool) -> None:
        self._counts, self._name, self._close = counts, name, close
        self._buffer = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._counts[f"{self._name} connections"] += 1

    def data_received(self, data: bytes) -> None:
        assert self._transport is not None
        self._buffer += data
        while (end := self._buffer.find(b"\r\n\r\n")) >= 0:
            self._buffer = self._buffer[end + 4 :]
            self._counts[f"{self._name} requests"] += 1
            if self._close:
                self._transport.write(CLOSING)
                self._transport.close()
                return
            self._transport.write(REPLY)


class _Accept(asyncio.Protocol):
    """Accept and close: a connect is all a tcpSocket probe asks."""

    def __init__(self, counts: Counter[str]) -> None:
        self._counts = counts

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._counts["tcp connections"] += 1
        transport.close()


def serve_targets(conn: Conn, host: str) -> None:
    asyncio.run(_targets_main(conn, host))


async def _targets_main(conn: Conn, host: str) -> None:
    loop = asyncio.get_running_loop()
    counts: Counter[str] = Counter()
    factories: dict[str, Any] = {
        "http": lambda: _HTTP(counts, "http", close=False),
        "http-close": lambda: _HTTP(counts, "http-close", close=True),
        "tcp": lambda: _Accept(counts),
    }
    ports: dict[str, int] = {}
    async with contextlib.AsyncExitStack() as stack:
        for name, factory in factories.items():
            server = await loop.create_server(factory, host, 0, backlog=1024)
            await stack.enter_async_context(server)
            ports[name] = server.sockets[0].getsockname()[1]
        conn.send(ports)
        while True:
            command, _ = await loop.run_in_executor(None, conn.recv)
            if command == "stop":
                return
            conn.send(dict(counts))


# --- the prober ------------------------------------------------------------------------


def serve_prober(
    conn: Conn,
    sim: dict[str, Any] | None,
    ports: dict[str, int],
    kinds: list[str],
    time_limit: int,
) -> None:
    import anyio

    anyio.run(_prober_main, conn, sim, ports, kinds, time_limit)  # as `probemarker run` does


def _work(ports: dict[str, int], time_limit: int) -> dict[str, Any]:
    """The spec and target of each kind: what the engine would pass for it."""
    from probemarker.api.model import ExecAction, HTTPGetAction, ProbeSpec, TCPSocketAction
    from probemarker.api.model import Timing as ProbeTiming
    from probemarker.probe.handler import ProbeTarget
    from probemarker.watch.pods import PodUID

    actions: dict[str, Any] = {
        "http": HTTPGetAction(port=ports["http"], path="/healthz"),
        "http-close": HTTPGetAction(port=ports["http-close"], path="/healthz"),
        "tcp": TCPSocketAction(port=ports["tcp"]),
        "exec": ExecAction(command=("check",)),
    }
    target = ProbeTarget(NS, POD, PodUID("bench-uid"), CONTAINER, pod_ip=HOST)
    timing = ProbeTiming(timeout_seconds=time_limit, period_seconds=10)
    return {
        kind: (ProbeSpec(kind, CONTAINER, action, timing), target)
        for kind, action in actions.items()
    }


async def _floors(ports: dict[str, int], stack: contextlib.AsyncExitStack) -> dict[str, Probe]:
    """The least the same libraries do for the same answer, without a handler or runner:
    aiohttp's GET with a pooled session, and asyncio's connect and close."""
    import aiohttp

    from probemarker.probe.outcome import Outcome

    session = await stack.enter_async_context(aiohttp.ClientSession())
    url = f"http://{HOST}:{ports['http']}/healthz"

    async def http() -> Outcome:
        async with session.get(url) as response:
            body = await response.read()
        return Outcome.succeeded(body.decode()) if response.status == 200 else Outcome.failed("")

    async def tcp() -> Outcome:
        _, writer = await asyncio.open_connection(HOST, ports["tcp"])
        writer.close()
        await writer.wait_closed()
        return Outcome.succeeded()

    return {"http-floor": http, "tcp-floor": tcp}


async def _prober_main(
    conn: Conn,
    sim: dict[str, Any] | None,
    ports: dict[str, int],
    kinds: list[str],
    time_limit: int,
) -> None:
    """Only the handlers `kinds` need (the HTTP and TCP modules may be absent)."""
    import anyio

    from probemarker.api.model import ExecAction, HTTPGetAction, TCPSocketAction
    from probemarker.probe.runner import ProbeRunner

    handlers: dict[type, Any] = {}
    async with contextlib.AsyncExitStack() as stack:
        if sim is not None and "exec" in kinds:
            from bench.engine_idle import connect
            from probemarker.kube.connect.client import KubeClient
            from probemarker.probe.exec import ExecHandler

            kube = await stack.enter_async_context(KubeClient(await connect(sim, incluster=True)))
            handlers[ExecAction] = ExecHandler(kube)
        if "http" in kinds or "http-close" in kinds:
            from probemarker.probe.http import HTTPGetHandler

            handlers[HTTPGetAction] = await stack.enter_async_context(HTTPGetHandler())
        if "tcp" in kinds:
            from probemarker.probe.tcp import TCPSocketHandler

            handlers[TCPSocketAction] = await stack.enter_async_context(TCPSocketHandler())
        runner = ProbeRunner(handlers)
        probes = await _floors(ports, stack)
        for kind, (spec, target) in _work(ports, time_limit).items():
            probes[kind] = functools.partial(runner.run, spec, target)
        conn.send(repr(runner))
        while True:
            command, args = await anyio.to_thread.run_sync(conn.recv)
            if command == "stop":
                return
            conn.send(await _window(probes[args["kind"]], **args["window"]))


async def _window(probe: Probe, *, seconds: float, concurrency: int) -> dict[str, Any]:
    """`concurrency` workers running probes back to back for `seconds`; CPU and counts."""
    import anyio

    results: Counter[str] = Counter()
    messages: dict[str, str] = {}
    gc.collect()  # the previous window's garbage is not this one's cost
    cpu, began = time.process_time(), time.monotonic()
    end = began + seconds

    async def worker() -> None:
        while time.monotonic() < end:
            outcome = await probe()
            results[str(outcome.result)] += 1
            messages.setdefault(str(outcome.result), outcome.message)

    async with anyio.create_task_group() as group:
        for _ in range(concurrency):
            group.start_soon(worker)
    return {
        "cpu": time.process_time() - cpu,
        "wall": time.monotonic() - began,
        "results": dict(results),
        "messages": messages,
    }


# --- the bench -------------------------------------------------------------------------


def _delta(after: dict[Any, int], before: dict[Any, int]) -> dict[Any, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def _turn(
    prober: Child, targets: Child, sim: Child | None, kind: str, window: dict[str, Any]
) -> dict[str, Any]:
    """One window of `kind`, with what the targets and the sim saw meanwhile."""
    from bench.engine_idle import execs_in

    served = targets.call("counts")
    requests = sim.call("counts") if sim is not None and kind == "exec" else {}
    figures: dict[str, Any] = prober.call("window", kind=kind, window=window)
    figures["served"] = _delta(targets.call("counts"), served)
    if sim is not None and kind == "exec":
        figures["execs"] = execs_in(_delta(sim.call("counts"), requests))
    return figures


def bench(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    from bench.engine_idle import Child, start_sim

    kinds: list[str] = args.kinds
    sim, info = start_sim() if "exec" in kinds else (None, None)
    targets = Child(serve_targets, HOST)
    prober: Child | None = None
    try:
        ports = targets.receive(60)
        if sim is not None:
            sim.call("pods", count=1)
        prober = Child(serve_prober, info, ports, kinds, args.timeout)
        print(f"prober: {prober.receive(120)}")
        window = {"seconds": args.warmup, "concurrency": args.concurrency}
        for kind in kinds:
            _turn(prober, targets, sim, kind, window)
        window["seconds"] = args.seconds / args.rounds
        turns: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
        for r in range(args.rounds):
            shift = r % len(kinds)
            for kind in kinds[shift:] + kinds[:shift]:
                turns[kind].append(_turn(prober, targets, sim, kind, window))
    finally:
        for child in (prober, targets, sim):
            if child is not None:
                child.close()
    return turns


# The server each kind talks to (the floors share the handlers' servers).
SERVER = {"http": "http", "http-close": "http-close", "tcp": "tcp"}
SERVER |= {"http-floor": "http", "tcp-floor": "tcp"}


def _row(kind: str, turns: list[dict[str, Any]]) -> dict[str, Any]:
    probes = sum(sum(t["results"].values()) for t in turns)
    cpu, wall = sum(t["cpu"] for t in turns), sum(t["wall"] for t in turns)
    per = [t["cpu"] / max(1, sum(t["results"].values())) * 1e6 for t in turns]
    results: Counter[str] = Counter()
    for t in turns:
        results.update(t["results"])
    server = SERVER.get(kind)
    opened = sum(t["served"].get(f"{server} connections", 0) for t in turns)
    asked = sum(t["served"].get(f"{server} requests", 0) for t in turns)
    served = {"exec": sum(t.get("execs", 0) for t in turns), "tcp": opened}.get(server or kind)
    return {
        "probes": probes,
        "cpu": cpu,
        "wall": wall,
        "us": cpu / max(1, probes) * 1e6,
        "spread": (min(per), max(per)),
        "other": {k: n for k, n in results.items() if k != "Succeeded"},
        "messages": {k: m for t in turns for k, m in t["messages"].items() if k != "Succeeded"},
        "served": asked if server in ("http", "http-close") else served,
        "connections": opened if server in ("http", "http-close") else None,
    }


def report(args: argparse.Namespace, turns: dict[str, list[dict[str, Any]]]) -> None:
    rows = {kind: _row(kind, t) for kind, t in turns.items()}
    exec_us = rows["exec"]["us"] if "exec" in rows else None
    print(
        f"{len(args.kinds)} kinds x {args.rounds} rounds of {args.seconds / args.rounds:g} s, "
        f"{args.concurrency} in flight, timeout {args.timeout} s, warm-up {args.warmup:g} s each"
    )
    print(
        f"{'kind':<11}{'probes':>8}{'probes/s':>9}{'CPU s':>7}{'CPU %':>6}{'probes/CPU-s':>13}"
        f"{'µs CPU/probe':>13}{'(rounds)':>11}{'x exec':>7}{'served':>8}{'new conns':>10}"
    )
    for kind, r in rows.items():
        low, high = r["spread"]
        times = f"{exec_us / r['us']:.1f}" if exec_us else "-"
        conns = "-" if r["connections"] is None else r["connections"]
        print(
            f"{kind:<11}{r['probes']:>8}{r['probes'] / r['wall']:>9.0f}{r['cpu']:>7.2f}"
            f"{r['cpu'] / r['wall'] * 100:>6.0f}{r['probes'] / r['cpu']:>13.0f}{r['us']:>13.0f}"
            f"{f'{low:.0f}-{high:.0f}':>11}{times:>7}{r['served']:>8}{conns!s:>10}"
        )
    for kind, r in rows.items():
        if r["other"]:
            print(f"NOT SUCCEEDED {kind}: {r['other']}, e.g. {r['messages']}")
        if r["served"] != r["probes"]:
            print(f"{kind}: {r['served']} served for {r['probes']} probes")
    if exec_us:
        said = [
            f"{exec_us / r['us']:.1f} {k}" for k, r in rows.items() if k in KINDS and k != "exec"
        ]
        print("one exec probe costs the prober the CPU of " + ", ".join(said) + " probes")
    print(
        "probes/CPU-s: probes per second per core of the prober; (rounds): µs CPU/probe, "
        "least and most of the rounds; CPU %: the prober's share of one core over the "
        "windows (near 100: probes/s is CPU-bound); served: HTTP requests, TCP "
        "connections, execs the targets and the sim counted; new conns: TCP connections "
        "the HTTP server accepted"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="measured, per kind")
    parser.add_argument("--rounds", type=int, default=5, help="turns per kind, interleaved")
    parser.add_argument("--warmup", type=float, default=2.0, help="per kind, unmeasured")
    parser.add_argument("--concurrency", type=int, default=16, help="probes in flight")
    parser.add_argument("--timeout", type=int, default=5, help="the probes' timeoutSeconds")
    parser.add_argument(
        "--kinds",
        nargs="+",
        choices=KINDS + FLOORS,
        default=list(KINDS),
        help="which kinds (default: %(default)s); the floors are bare aiohttp and asyncio",
    )
    args = parser.parse_args()
    args.kinds = [k for k in KINDS + FLOORS if k in args.kinds]
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    print("reproduce: python bench/probe_cost.py " + " ".join(sys.argv[1:]))
    print(
        f"machine: {multiprocessing.cpu_count()} cores, Python {platform.python_version()}; "
        f"targets on {HOST} and the sim (HTTPS + token) each in a child process (not "
        "counted); the prober in a child process of its own"
    )
    report(args, bench(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
