"""Client CPU per exec: probemarker's exec stream beside the stock client and the floor.

    python bench/exec_cost.py                     # an HTTPS sim (with a token) in a child process
    python bench/exec_cost.py --execs 500 --json
    python bench/exec_cost.py --kubeconfig ~/.kube/config --pod default/web --container app

Four variants exec the same command into the same container, each with its own
long-lived client opened before anything is measured:

  stock                kubernetes_asyncio's `WsApiClient` + `connect_get_namespaced_pod_exec`
                       (what the stock helpers do: v4, output of both streams as one string)
  aiohttp_floor        aiohttp `ws_connect` over one shared session, reading every frame
                       and keeping the status channel: the least any Python client does
  probemarker          `run_exec` with full TLS handshakes (`tls_resumption=False`)
  probemarker_resumed  `run_exec` with TLS session resumption (the daemon's default)

Every exec is a WebSocket on a new TLS connection; only probemarker_resumed resumes a
TLS session. Client CPU is user+sys of this process only (`resource.getrusage`,
RUSAGE_SELF), which is why the default sim runs in a child process. The variants run
interleaved: each round runs a batch of each, in an order rotated every round, so
drifts in machine load hit them alike. Latency is per exec, wall clock.

Targets (docs/kube-exec.md): probemarker at or below stock; at most 1.25x the floor
without resumption; below the floor with it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import multiprocessing
import multiprocessing.connection
import resource
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from probemarker.kube.connect.client import ClientSettings, KubeClient
from probemarker.kube.connect.config import Connection, load_kubeconfig
from probemarker.probe.execresult import ExecExited
from probemarker.probe.execstream import V4, V5, run_exec

SIM_TOKEN = "bench-token"
SIM_POD = ("default", "exec-target", "main")
NAMES = ("stock", "aiohttp_floor", "probemarker", "probemarker_resumed")


# --- the sim, in a child process -------------------------------------------------------


def _serve(conn: multiprocessing.connection.Connection) -> None:
    asyncio.run(_serve_async(conn))


async def _serve_async(conn: multiprocessing.connection.Connection) -> None:
    import orjson

    from probemarker.sim import SimCluster
    from probemarker.sim.exec.runners import ExecReply, ExecRequest

    async def reply(_: ExecRequest) -> ExecReply:
        return ExecReply(exit_code=0, stdout=b"idle\n")

    namespace, pod, container = SIM_POD
    async with SimCluster(https=True, token=SIM_TOKEN) as sim:
        body = {
            "metadata": {"name": pod},
            "spec": {"nodeName": "node-1", "containers": [{"name": container, "image": "x"}]},
        }
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                f"{sim.url}/api/v1/namespaces/{namespace}/pods",
                data=orjson.dumps(body),
                headers={
                    "Authorization": f"Bearer {SIM_TOKEN}",
                    "Content-Type": "application/json",
                },
                ssl=False,
            ) as answer,
        ):
            answer.raise_for_status()
        await sim.kubelet.wait_running(namespace, pod)
        sim.exec_handlers.register(namespace, pod, container, reply)
        conn.send(str(sim.kubeconfig_path))
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)


# --- the variants ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    kubeconfig: str
    namespace: str
    pod: str
    container: str
    command: tuple[str, ...]

    @property
    def path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods/{self.pod}/exec"


@dataclass(slots=True)
class Variant:
    name: str
    run: Callable[[], Awaitable[None]]  # one exec; raises unless it exited 0
    cpu: float = 0.0
    latencies: list[float] = field(default_factory=list)


async def _stock(target: Target, stack: contextlib.AsyncExitStack) -> Variant:
    from kubernetes_asyncio import config as k8s_config
    from kubernetes_asyncio.client import Configuration, CoreV1Api
    from kubernetes_asyncio.stream import WsApiClient

    configuration = Configuration()
    await k8s_config.load_kube_config(
        config_file=target.kubeconfig, client_configuration=configuration
    )
    api = CoreV1Api(await stack.enter_async_context(WsApiClient(configuration=configuration)))

    async def run() -> None:
        output = await api.connect_get_namespaced_pod_exec(
            target.pod,
            target.namespace,
            command=list(target.command),
            container=target.container,
            stdout=True,
            stderr=True,
            stdin=False,
            tty=False,
        )
        if not isinstance(output, str):  # it says nothing about the exit code
            raise RuntimeError(f"stock exec: {output!r}")

    return Variant("stock", run)


async def _floor(
    target: Target, connection: Connection, stack: contextlib.AsyncExitStack
) -> Variant:
    tls = connection.tls
    ssl_context = tls.ssl_context(resume=False) if tls is not None else False
    extra = {"server_hostname": tls.server_name} if tls is not None and tls.server_name else {}
    auth = await connection.credentials.authorization()
    headers = {"Authorization": auth} if auth else {}
    session = await stack.enter_async_context(
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ssl_context))
    )
    url = connection.server + target.path
    params = [("command", c) for c in target.command]
    params += [("container", target.container), ("stdout", "true"), ("stderr", "true")]

    async def run() -> None:
        status = b""
        async with session.ws_connect(
            url, params=params, protocols=(V5, V4), headers=headers, **extra
        ) as ws:
            async for msg in ws:
                if msg.type is aiohttp.WSMsgType.BINARY and msg.data[:1] == b"\x03":
                    status += msg.data[1:]
        if b'"Success"' not in status:
            raise RuntimeError(f"floor exec: {status!r}")

    return Variant("aiohttp_floor", run)


async def _ours(
    name: str,
    target: Target,
    connection: Connection,
    stack: contextlib.AsyncExitStack,
    *,
    resume: bool,
) -> Variant:
    client = await stack.enter_async_context(
        KubeClient(connection, settings=ClientSettings(tls_resumption=resume))
    )

    async def run() -> None:
        result = await run_exec(
            client,
            namespace=target.namespace,
            pod=target.pod,
            container=target.container,
            command=target.command,
            time_limit=30,
            wait=40,
        )
        if not isinstance(result, ExecExited) or result.exit_code != 0:
            raise RuntimeError(f"{name} exec: {result}")

    return Variant(name, run)


# --- measuring ---------------------------------------------------------------------------


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _batch(variant: Variant, count: int) -> None:
    gc.collect()  # garbage of the previous batch is not this one's cost
    began = _cpu()
    for _ in range(count):
        start = time.perf_counter()
        await variant.run()
        variant.latencies.append(time.perf_counter() - start)
    variant.cpu += _cpu() - began


async def measure(variants: list[Variant], *, execs: int, rounds: int, warmup: int) -> None:
    for variant in variants:
        for _ in range(warmup):
            await variant.run()
    rounds = max(1, min(rounds, execs))
    for r in range(rounds):
        count = execs // rounds + (1 if r < execs % rounds else 0)
        shift = r % len(variants)
        for variant in variants[shift:] + variants[:shift]:
            await _batch(variant, count)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(variants: list[Variant], execs: int) -> dict[str, Any]:
    return {
        "client_cpu_ms_per_exec": {v.name: round(v.cpu / execs * 1e3, 3) for v in variants},
        "latency_ms": {
            v.name: {
                "p50": round(statistics.median(v.latencies) * 1e3, 3),
                "p99": round(_percentile(v.latencies, 0.99) * 1e3, 3),
            }
            for v in variants
        },
        "execs": execs,
    }


def report(figures: dict[str, Any], *, rounds: int, target: str) -> None:
    cpu, latency = figures["client_cpu_ms_per_exec"], figures["latency_ms"]
    floor = cpu["aiohttp_floor"]
    print(f"target: {target}; {figures['execs']} execs per variant in {rounds} rounds")
    print(f"{'variant':<22}{'client CPU/exec':>17}{'x floor':>9}{'p50':>10}{'p99':>10}")
    for name in NAMES:
        print(
            f"{name:<22}{cpu[name]:>14.3f} ms{cpu[name] / floor:>8.2f}x"
            f"{latency[name]['p50']:>7.2f} ms{latency[name]['p99']:>7.2f} ms"
        )
    checks = {
        "probemarker <= stock": cpu["probemarker"] <= cpu["stock"],
        "probemarker <= 1.25x floor": cpu["probemarker"] <= 1.25 * floor,
        "probemarker_resumed < floor": cpu["probemarker_resumed"] < floor,
    }
    print("targets: " + "; ".join(f"{k}: {'yes' if ok else 'NO'}" for k, ok in checks.items()))


async def run(args: argparse.Namespace, target: Target) -> dict[str, Any]:
    connection = await load_kubeconfig(target.kubeconfig)
    async with contextlib.AsyncExitStack() as stack:
        variants = [
            await _stock(target, stack),
            await _floor(target, connection, stack),
            await _ours("probemarker", target, connection, stack, resume=False),
            await _ours("probemarker_resumed", target, connection, stack, resume=True),
        ]
        await measure(variants, execs=args.execs, rounds=args.rounds, warmup=args.warmup)
    return summary(variants, args.execs)


def _target(args: argparse.Namespace, kubeconfig: str) -> Target:
    namespace, _, pod = args.pod.partition("/")
    if not pod:
        raise SystemExit("--pod is NAMESPACE/NAME")
    return Target(kubeconfig, namespace, pod, args.container, tuple(args.command))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--execs", type=int, default=300, help="measured execs per variant")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds")
    parser.add_argument("--warmup", type=int, default=5, help="unmeasured execs per variant")
    parser.add_argument("--kubeconfig", help="a cluster's kubeconfig (default: an HTTPS sim)")
    parser.add_argument("--pod", help="NAMESPACE/NAME of a running pod (with --kubeconfig)")
    parser.add_argument("--container", help="the container to exec into (with --kubeconfig)")
    parser.add_argument(
        "--command", nargs="+", default=["true"], help="argv to run (default: true)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as one object")
    args = parser.parse_args()
    if args.kubeconfig and not (args.pod and args.container):
        parser.error("--kubeconfig needs --pod NAMESPACE/NAME and --container NAME")
    reproduce = "reproduce: python bench/exec_cost.py " + " ".join(sys.argv[1:])
    if args.kubeconfig:
        target = _target(args, args.kubeconfig)
        figures = asyncio.run(run(args, target))
        where = f"{args.kubeconfig} {args.pod} -c {args.container}"
    else:
        ours, theirs = multiprocessing.Pipe()
        context = multiprocessing.get_context("spawn")
        child = context.Process(target=_serve, args=(theirs,), daemon=True)
        child.start()
        try:
            if not ours.poll(60):
                print("the sim did not start within 60 s", file=sys.stderr)
                return 1
            namespace, pod, container = SIM_POD
            args.pod, args.container = f"{namespace}/{pod}", container
            figures = asyncio.run(run(args, _target(args, ours.recv())))
        finally:
            ours.send("stop")
            child.join(timeout=30)
            if child.is_alive():
                child.terminate()
        where = "HTTPS sim with a token, in a child process (Python exec handler)"
    if args.json:
        print(json.dumps(figures))
        return 0
    print(reproduce)
    print(f"machine: {multiprocessing.cpu_count()} cores; Python {sys.version.split()[0]}")
    report(figures, rounds=args.rounds, target=where)
    return 0


if __name__ == "__main__":
    sys.exit(main())
