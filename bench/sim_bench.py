"""Benchmark the simulated API server: watch fan-out, LIST, patch and exec rates.

The sim runs in a child process (as it would beside the daemon in the daemon's own
benchmarks), the load comes from this process over real HTTP and WebSockets with
aiohttp, so the figures are the sim's, not the client library's.

    python bench/sim_bench.py                # defaults below
    python bench/sim_bench.py --pods 10000 --watchers 10 --events 3000 \
        --patches 3000 --execs 300 --concurrency 16

Prints one line per figure and the command that reproduces it.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import multiprocessing.connection
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson

NAMESPACE = "bench"
EXEC_PODS = {"exec-python": "python handler", "exec-subprocess": "subprocess"}


# --- the sim, in a child process ---------------------------------------------------


def _serve(conn: multiprocessing.connection.Connection) -> None:
    asyncio.run(_serve_async(conn))


async def _serve_async(conn: multiprocessing.connection.Connection) -> None:
    from probemarker.sim import SimCluster
    from probemarker.sim.exec.runners import ExecReply, ExecRequest

    async def reply(_: ExecRequest) -> ExecReply:
        return ExecReply(exit_code=0, stdout=b"idle\n")

    async with SimCluster(history_limit=100_000) as sim, aiohttp.ClientSession() as http:
        await _post(http, f"{sim.url}/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        for name in EXEC_PODS:
            await _post(http, _pods_url(sim.url), _pod(name, node="node-1"))
        sim.exec_handlers.register(NAMESPACE, "exec-python", "main", reply)
        await _wait_running(http, sim.url, tuple(EXEC_PODS))
        conn.send(sim.url)
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)


async def _wait_running(http: aiohttp.ClientSession, url: str, names: tuple[str, ...]) -> None:
    async with asyncio.timeout(30):
        while True:
            pods = [await _get(http, f"{_pods_url(url)}/{n}") for n in names]
            if all(p.get("status", {}).get("phase") == "Running" for p in pods):
                return
            await asyncio.sleep(0.05)  # polling a condition in another process


# --- helpers -------------------------------------------------------------------------


def _pods_url(url: str) -> str:
    return f"{url}/api/v1/namespaces/{NAMESPACE}/pods"


def _pod(
    name: str, *, node: str | None = None, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "bench"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec}


async def _post(http: aiohttp.ClientSession, url: str, body: Any) -> dict[str, Any]:
    async with http.post(
        url, data=orjson.dumps(body), headers={"Content-Type": "application/json"}
    ) as r:
        payload: dict[str, Any] = orjson.loads(await r.read())
        if r.status >= 300:
            raise RuntimeError(f"POST {url}: {r.status} {payload.get('message')}")
        return payload


async def _get(http: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with http.get(url) as r:
        payload: dict[str, Any] = orjson.loads(await r.read())
        return payload


async def _bounded(concurrency: int, jobs: list[Callable[[], Awaitable[None]]]) -> None:
    queue = list(reversed(jobs))

    async def worker() -> None:
        while queue:
            await queue.pop()()

    async with asyncio.TaskGroup() as group:
        for _ in range(concurrency):
            group.create_task(worker())


def _report(name: str, value: float, unit: str) -> None:
    print(f"{name:<48} {value:>12,.1f} {unit}")


# --- the figures ---------------------------------------------------------------------


async def bench_watch_fanout(
    http: aiohttp.ClientSession, url: str, args: argparse.Namespace
) -> None:
    """Create `events` pods while `watchers` watches stream them; events delivered per second."""
    start_rv = (await _get(http, f"{_pods_url(url)}?limit=1"))["metadata"]["resourceVersion"]
    total = args.events
    received = [0] * args.watchers
    done = asyncio.Event()

    async def watch(i: int) -> None:
        params = {"watch": "1", "resourceVersion": start_rv, "labelSelector": "bench=watch"}
        async with http.get(
            _pods_url(url), params=params, timeout=aiohttp.ClientTimeout(total=None)
        ) as r:
            async for _ in r.content:
                received[i] += 1
                if received[i] >= total and all(n >= total for n in received):
                    done.set()
                if received[i] >= total:
                    return

    async with asyncio.TaskGroup() as group:
        for i in range(args.watchers):
            group.create_task(watch(i))
        began = time.perf_counter()
        jobs = [
            (lambda n=n: _post(http, _pods_url(url), _pod(f"w-{n}", labels={"bench": "watch"})))
            for n in range(total)
        ]
        await _bounded(args.concurrency, jobs)  # type: ignore[arg-type]
        created = time.perf_counter()
        await asyncio.wait_for(done.wait(), timeout=120)
        delivered = time.perf_counter()
    _report(f"create pods ({args.concurrency} concurrent)", total / (created - began), "creates/s")
    _report(
        f"watch events delivered live ({args.watchers} watchers)",
        total * args.watchers / (delivered - began),
        "events/s",
    )
    await bench_watch_replay(http, url, args, start_rv)


async def bench_watch_replay(
    http: aiohttp.ClientSession, url: str, args: argparse.Namespace, start_rv: str
) -> None:
    """`watchers` watches resume from before the creates: pure delivery from history."""
    total = args.events

    async def watch() -> None:
        params = {"watch": "1", "resourceVersion": start_rv, "labelSelector": "bench=watch"}
        seen = 0
        async with http.get(
            _pods_url(url), params=params, timeout=aiohttp.ClientTimeout(total=None)
        ) as r:
            async for _ in r.content:
                seen += 1
                if seen >= total:
                    return

    began = time.perf_counter()
    async with asyncio.timeout(120), asyncio.TaskGroup() as group:
        for _ in range(args.watchers):
            group.create_task(watch())
    _report(
        f"watch events replayed from history ({args.watchers} watchers)",
        total * args.watchers / (time.perf_counter() - began),
        "events/s",
    )


async def bench_list(http: aiohttp.ClientSession, url: str, args: argparse.Namespace) -> None:
    """Seed up to `pods` pods, then time LIST of all of them and with a label selector."""
    have = args.events
    jobs = [
        (lambda n=n: _post(http, _pods_url(url), _pod(f"l-{n}", labels={"shard": str(n % 10)})))
        for n in range(max(0, args.pods - have))
    ]
    await _bounded(args.concurrency, jobs)  # type: ignore[arg-type]
    for label, query in (("all", ""), ("labelSelector 1/10", "?labelSelector=shard%3D3")):
        times = []
        count = 0
        for _ in range(args.list_runs):
            began = time.perf_counter()
            async with http.get(f"{_pods_url(url)}{query}") as r:
                body = orjson.loads(await r.read())
            times.append((time.perf_counter() - began) * 1000)
            count = len(body["items"])
        _report(
            f"LIST {label} of {args.pods} pods ({count} items) p50", statistics.median(times), "ms"
        )
        _report(f"LIST {label} of {args.pods} pods ({count} items) max", max(times), "ms")


async def bench_patch(http: aiohttp.ClientSession, url: str, args: argparse.Namespace) -> None:
    """JSON patches to pods/status (a condition flipping), `concurrency` at a time."""
    names = [f"w-{n}" for n in range(min(args.events, 100))]

    def job(n: int) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            status = "True" if n % 2 else "False"
            ops = [{"op": "add", "path": "/metadata/labels/flip", "value": status.lower()}]
            target = f"{_pods_url(url)}/{names[n % len(names)]}/status"
            headers = {"Content-Type": "application/json-patch+json"}
            async with http.patch(target, data=orjson.dumps(ops), headers=headers) as r:
                await r.read()
                if r.status != 200:
                    raise RuntimeError(f"PATCH {target}: {r.status}")

        return run

    began = time.perf_counter()
    await _bounded(args.concurrency, [job(n) for n in range(args.patches)])
    _report(
        f"JSON patches to pods/status ({args.concurrency} concurrent)",
        args.patches / (time.perf_counter() - began),
        "patches/s",
    )


async def bench_exec(http: aiohttp.ClientSession, url: str, args: argparse.Namespace) -> None:
    """exec sessions over WebSocket (v5.channel.k8s.io), to completion with the status read."""
    for pod, label in EXEC_PODS.items():
        command = "true" if pod == "exec-subprocess" else "idle"
        target = f"{_pods_url(url)}/{pod}/exec?command={command}&container=main&stdout=1&stderr=1"

        async def session(target: str = target, pod: str = pod) -> None:
            async with http.ws_connect(target, protocols=("v5.channel.k8s.io",)) as ws:
                status = b""
                async for message in ws:
                    if message.type == aiohttp.WSMsgType.BINARY and message.data[:1] == b"\x03":
                        status += message.data[1:]
                if b'"Success"' not in status:
                    raise RuntimeError(f"exec {pod}: {status!r}")

        began = time.perf_counter()
        await _bounded(min(args.concurrency, 8), [session] * args.execs)
        _report(
            f"exec sessions, {label} (8 concurrent)",
            args.execs / (time.perf_counter() - began),
            "sessions/s",
        )


async def run(args: argparse.Namespace, url: str) -> None:
    connector = aiohttp.TCPConnector(limit=args.concurrency + args.watchers + 8)
    async with aiohttp.ClientSession(connector=connector) as http:
        await bench_watch_fanout(http, url, args)
        await bench_patch(http, url, args)
        await bench_list(http, url, args)
        await bench_exec(http, url, args)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=10_000, help="pods in the LIST benchmark")
    parser.add_argument("--watchers", type=int, default=10)
    parser.add_argument("--events", type=int, default=3_000, help="pods created while watched")
    parser.add_argument("--patches", type=int, default=3_000)
    parser.add_argument("--execs", type=int, default=300, help="exec sessions per kind")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--list-runs", type=int, default=10)
    args = parser.parse_args()
    print("reproduce: python bench/sim_bench.py " + " ".join(sys.argv[1:]))
    print(
        f"machine: {multiprocessing.cpu_count()} cores; sim in a child process, load from this one"
    )
    ours, theirs = multiprocessing.Pipe()
    child = multiprocessing.get_context("spawn").Process(target=_serve, args=(theirs,), daemon=True)
    child.start()
    try:
        if not ours.poll(60):
            print("the sim did not start within 60 s", file=sys.stderr)
            return 1
        asyncio.run(run(args, ours.recv()))
    finally:
        ours.send("stop")
        child.join(timeout=30)
        if child.is_alive():
            child.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
