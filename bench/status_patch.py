"""Client CPU per JSON patch to pods/status: probemarker's `patch_pod_status` against
kubernetes_asyncio's `CoreV1Api.patch_namespaced_pod_status`, side by side in one run.

The sim runs in a child process (HTTPS with a bearer token by default, as a daemon in a
cluster talks to its API server), so its CPU is not counted; this process runs only the
clients. Both send the same json-patch (`application/json-patch+json`, one label
flipped, guarded by a `test` operation) to the same pod, one request at a time over a
keep-alive connection, in interleaved rounds (each client goes first in turn) after a
warm-up round. A third loop calls the stock method with `_preload_content=False` and
parses the answer with orjson: the stock transport without its model objects, to show
where the difference comes from. Client CPU is this process's user+sys time (`time.process_time`) over a
round, divided by its requests; latency is per request.

    python bench/status_patch.py                       # defaults: 8 rounds of 400 each
    python bench/status_patch.py --rounds 10 --requests 1000 --http --json

Prints the figures and the command that reproduces them.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import multiprocessing.connection
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

NAMESPACE = "bench"
POD = "gs-1"
TOKEN = "bench-token"
PatchFn = Callable[[int], Awaitable[None]]


# --- the sim, in a child process ---------------------------------------------------------


def _serve(conn: multiprocessing.connection.Connection, https: bool) -> None:
    asyncio.run(_serve_async(conn, https))


async def _serve_async(conn: multiprocessing.connection.Connection, https: bool) -> None:
    from probemarker.sim import SimCluster

    options: dict[str, Any] = {"https": True, "token": TOKEN} if https else {}
    async with SimCluster(node_names=("node-1",), kubelet_events=False, **options) as sim:
        conn.send(str(sim.kubeconfig_path))
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)


def _pod() -> dict[str, Any]:
    """A pod of a realistic size: two containers with ports, env, resources, probes."""

    def container(name: str, port: int) -> dict[str, Any]:
        return {
            "name": name,
            "image": f"registry.example.com/games/{name}:1.4.2",
            "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
            "env": [{"name": f"SETTING_{i}", "value": f"value-{i}"} for i in range(8)],
            "resources": {
                "requests": {"cpu": "250m", "memory": "256Mi"},
                "limits": {"cpu": "1", "memory": "512Mi"},
            },
            "readinessProbe": {"httpGet": {"path": "/ready", "port": port}, "periodSeconds": 5},
        }

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": POD,
            "labels": {"app": "game", "tier": "server", "flip": "a"},
            "annotations": {f"example.com/note-{i}": "x" * 40 for i in range(4)},
        },
        "spec": {
            "nodeName": "node-1",
            "containers": [container("server", 7777), container("sidecar", 9090)],
        },
    }


# --- the two clients -----------------------------------------------------------------------


def _ops(n: int) -> list[dict[str, Any]]:
    before, after = ("a", "b") if n % 2 == 0 else ("b", "a")
    return [
        {"op": "test", "path": "/metadata/labels/flip", "value": before},
        {"op": "replace", "path": "/metadata/labels/flip", "value": after},
    ]


@dataclass
class Figures:
    cpu_us: list[float] = field(default_factory=list)  # per request, one entry per round
    latency_ms: list[float] = field(default_factory=list)


async def _round(patch: PatchFn, start: int, requests: int, figures: Figures | None) -> int:
    cpu = time.process_time()
    latencies = []
    for n in range(start, start + requests):
        began = time.perf_counter()
        await patch(n)
        latencies.append((time.perf_counter() - began) * 1000)
    if figures is not None:
        figures.cpu_us.append((time.process_time() - cpu) / requests * 1e6)
        figures.latency_ms += latencies
    return start + requests


async def run(args: argparse.Namespace, kubeconfig: str) -> dict[str, Any]:
    from kubernetes_asyncio import client as k8s
    from kubernetes_asyncio import config as k8s_config

    from probemarker.kube.connect.client import KubeClient
    from probemarker.kube.connect.config import load_kubeconfig
    from probemarker.kube.connect.errors import RequestInfo
    from probemarker.kube.write.ratelimit import TokenBucket
    from probemarker.kube.write.statuswrite import patch_pod_status

    stock_config = k8s.Configuration()
    await k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=stock_config)
    limiter = TokenBucket(qps=1e9, burst=1_000_000)  # never waits; its cost is counted

    async with (
        KubeClient(await load_kubeconfig(kubeconfig)) as ours,
        k8s.ApiClient(stock_config) as api,
    ):
        core = k8s.CoreV1Api(api)
        for path, body in (
            ("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}}),
            (f"/api/v1/namespaces/{NAMESPACE}/pods", _pod()),
        ):
            await ours.request(
                "POST",
                path,
                info=RequestInfo("create", path.rsplit("/", 1)[-1]),
                body=orjson.dumps(body),
                content_type="application/json",
            )
        # One state of the flipping label is shared: each client's next patch expects it.
        state = {"n": 0}

        async def probemarker(_: int) -> None:
            await patch_pod_status(
                ours, namespace=NAMESPACE, name=POD, ops=_ops(state["n"]), limiter=limiter
            )
            state["n"] += 1

        async def stock(_: int) -> None:
            await core.patch_namespaced_pod_status(
                POD,
                NAMESPACE,
                _ops(state["n"]),
                _content_type="application/json-patch+json",
            )
            state["n"] += 1

        async def stock_raw(_: int) -> None:
            response = await core.patch_namespaced_pod_status(
                POD,
                NAMESPACE,
                _ops(state["n"]),
                _content_type="application/json-patch+json",
                _preload_content=False,
            )
            orjson.loads(await response.read())
            response.release()
            state["n"] += 1

        clients: dict[str, PatchFn] = {
            "stock": stock,
            "stock_raw": stock_raw,
            "probemarker": probemarker,
        }
        figures = {name: Figures() for name in clients}
        n = 0
        for patch in clients.values():  # warm-up: connections, caches, imports
            n = await _round(patch, n, max(50, args.requests // 4), None)
        for r in range(args.rounds):
            order = list(clients)[r % 3 :] + list(clients)[: r % 3]  # each goes first in turn
            for name in order:
                n = await _round(clients[name], n, args.requests, figures[name])
        answer = await ours.request(
            "GET",
            f"/api/v1/namespaces/{NAMESPACE}/pods/{POD}",
            info=RequestInfo("get", "pods", namespace=NAMESPACE, name=POD),
        )
    return _summary(args, figures, len(orjson.dumps(answer)))


def _summary(
    args: argparse.Namespace, figures: dict[str, Figures], pod_bytes: int
) -> dict[str, Any]:
    def pct(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {
        "client_cpu_us_per_patch": {k: statistics.median(f.cpu_us) for k, f in figures.items()},
        "client_cpu_us_per_patch_range": {
            k: [min(f.cpu_us), max(f.cpu_us)] for k, f in figures.items()
        },
        "latency_ms": {
            k: {"p50": pct(f.latency_ms, 0.5), "p99": pct(f.latency_ms, 0.99)}
            for k, f in figures.items()
        },
        "requests_per_client": args.rounds * args.requests,
        "rounds": args.rounds,
        "pod_json_bytes": pod_bytes,
        "transport": "http" if args.http else "https+token",
    }


def _print(result: dict[str, Any]) -> None:
    cpu, spread, lat = (
        result["client_cpu_us_per_patch"],
        result["client_cpu_us_per_patch_range"],
        result["latency_ms"],
    )
    labels = {
        "stock": "kubernetes_asyncio CoreV1Api.patch_namespaced_pod_status",
        "stock_raw": "  the same, _preload_content=False + orjson (no models)",
        "probemarker": "probemarker patch_pod_status",
    }
    print(
        f"{result['requests_per_client']} patches per client in {result['rounds']} interleaved "
        f"rounds over {result['transport']}; the pod answer is {result['pod_json_bytes']} bytes"
    )
    print(f"{'client':<58} {'CPU µs/patch':>13} {'(min-max)':>15} {'p50 ms':>8} {'p99 ms':>8}")
    for key, label in labels.items():
        low, high = spread[key]
        print(
            f"{label:<58} {cpu[key]:>13.0f} {f'({low:.0f}-{high:.0f})':>15} "
            f"{lat[key]['p50']:>8.2f} {lat[key]['p99']:>8.2f}"
        )
    print(
        f"probemarker / stock CPU: {cpu['probemarker'] / cpu['stock']:.2f}; "
        f"probemarker / stock without models: {cpu['probemarker'] / cpu['stock_raw']:.2f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--requests", type=int, default=400, help="patches per client per round")
    parser.add_argument("--http", action="store_true", help="plain HTTP without a token")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    ours, theirs = multiprocessing.Pipe()
    context = multiprocessing.get_context("spawn")
    child = context.Process(target=_serve, args=(theirs, not args.http), daemon=True)
    child.start()
    try:
        if not ours.poll(60):
            print("the sim did not start within 60 s", file=sys.stderr)
            return 1
        result = asyncio.run(run(args, ours.recv()))
    finally:
        ours.send("stop")
        child.join(timeout=30)
        if child.is_alive():
            child.terminate()
    if args.json:
        print(orjson.dumps(result).decode())
        return 0
    print("reproduce: python bench/status_patch.py " + " ".join(sys.argv[1:]))
    print(
        f"machine: {multiprocessing.cpu_count()} cores, Python {platform.python_version()}; "
        "sim in a child process (not counted)"
    )
    _print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
