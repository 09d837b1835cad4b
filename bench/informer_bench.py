"""Benchmark the informer: watch events parsed per second, CPU per event, store memory.

Three parts, each side by side with kubernetes_asyncio's stock `watch.Watch`:

1. recorded: a stream of pod watch lines (realistic ~6 KB pods, MODIFIED events)
   parsed and applied in this process: ours (`parse_watch_line` + projection +
   store) against `Watch.unmarshal_event(line, "V1Pod")` (json, then json again
   into generated models) and plain `orjson.loads` (the floor);
2. live: the sim runs in a child process (its CPU is not counted), this process
   watches all pods while the child rewrites them; client CPU (user+sys of this
   process only) per event for our `Informer` and for a stock `Watch.stream` loop;
3. memory: a store of N pods, each kind in a fresh child process: our projections,
   whole pods as parsed dicts, V1Pod models; RSS growth and bytes still allocated
   (tracemalloc).

    python bench/informer_bench.py                 # defaults below
    python bench/informer_bench.py --events 20000 --pods 1000 --live-events 10000

Prints one line per figure and the command that reproduces them.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import multiprocessing.connection
import resource
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import orjson

NAMESPACE = "bench"


# --- a realistic pod ----------------------------------------------------------------


def make_pod(i: int, *, rv: int = 1, gen: int = 0) -> dict[str, Any]:
    """A pod as kube-apiserver sends it: managedFields, two containers with env,
    probes and mounts, a projected token volume, conditions and container states."""
    name = f"web-{i:05d}"
    labels = {
        "app.kubernetes.io/name": "web",
        "app.kubernetes.io/instance": "web-prod",
        "pod-template-hash": "7d9c6b8f4",
        "tier": "frontend",
        "gen": str(gen),
    }
    env = [{"name": f"SETTING_{k}", "value": f"value-{k}-{i}"} for k in range(8)]
    probe = {
        "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
        "timeoutSeconds": 1,
        "periodSeconds": 10,
        "successThreshold": 1,
        "failureThreshold": 3,
    }
    mounts = [
        {"name": "config", "mountPath": "/etc/web"},
        {
            "name": "kube-api-access-x7k2p",
            "readOnly": True,
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
        },
    ]
    container = {
        "name": "web",
        "image": "registry.example.com/web:1.24.3",
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "env": env,
        "resources": {
            "limits": {"cpu": "500m", "memory": "256Mi"},
            "requests": {"cpu": "100m", "memory": "128Mi"},
        },
        "volumeMounts": mounts,
        "livenessProbe": probe,
        "readinessProbe": probe,
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }
    sidecar = dict(
        container,
        name="proxy",
        image="registry.example.com/proxy:2.1.0",
        ports=[{"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
    )
    now = "2026-01-10T08:00:00Z"
    fields = {f"f:{k}": {} for k in labels}
    managed = [
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "apiVersion": "v1",
            "time": now,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": fields, "f:ownerReferences": {}},
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"web"}': {"f:env": {}, "f:image": {}},
                        'k:{"name":"proxy"}': {"f:image": {}},
                    }
                },
            },
        },
        {
            "manager": "kubelet",
            "operation": "Update",
            "apiVersion": "v1",
            "time": now,
            "fieldsType": "FieldsV1",
            "subresource": "status",
            "fieldsV1": {
                "f:status": {
                    "f:conditions": {},
                    "f:containerStatuses": {},
                    "f:hostIP": {},
                    "f:phase": {},
                    "f:podIP": {},
                }
            },
        },
    ]
    conditions = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
        for t in (
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled",
        )
    ]
    statuses = [
        {
            "name": c,
            "ready": True,
            "restartCount": 0,
            "started": True,
            "image": f"registry.example.com/{c}:1",
            "imageID": f"registry.example.com/{c}@sha256:" + "ab" * 32,
            "containerID": f"containerd://{i:08x}" + "cd" * 28,
            "state": {"running": {"startedAt": now}},
            "lastState": {},
        }
        for c in ("web", "proxy")
    ]
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "generateName": "web-7d9c6b8f4-",
            "namespace": NAMESPACE,
            "uid": f"5f0c6a1e-0000-4000-8000-{i:012d}",
            "resourceVersion": str(rv),
            "creationTimestamp": now,
            "labels": labels,
            "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-7d9c6b8f4",
                    "uid": "1b2c3d4e-aaaa-4bbb-8ccc-000000000001",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": managed,
        },
        "spec": {
            "volumes": [
                {"name": "config", "configMap": {"name": "web-config", "defaultMode": 420}},
                {
                    "name": "kube-api-access-x7k2p",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {
                                "configMap": {
                                    "name": "kube-root-ca.crt",
                                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                }
                            },
                            {
                                "downwardAPI": {
                                    "items": [
                                        {
                                            "path": "namespace",
                                            "fieldRef": {
                                                "apiVersion": "v1",
                                                "fieldPath": "metadata.namespace",
                                            },
                                        }
                                    ]
                                }
                            },
                        ],
                        "defaultMode": 420,
                    },
                },
            ],
            "containers": [container, sidecar],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "nodeName": "far-node",
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {
            "phase": "Running",
            "conditions": conditions,
            "hostIP": "10.1.0.7",
            "hostIPs": [{"ip": "10.1.0.7"}],
            "podIP": f"10.244.{i // 250}.{i % 250}",
            "podIPs": [{"ip": f"10.244.{i // 250}.{i % 250}"}],
            "startTime": now,
            "containerStatuses": statuses,
            "qosClass": "Burstable",
        },
    }


def recorded_lines(events: int, pods: int) -> list[bytes]:
    return [
        orjson.dumps({"type": "MODIFIED", "object": make_pod(n % pods, rv=n + 2, gen=n // pods)})
        for n in range(events)
    ]


def _report(name: str, value: float, unit: str) -> None:
    print(f"  {name:<58} {value:>12,.1f} {unit}", flush=True)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --- 1. recorded stream, in process --------------------------------------------------


def _ours(lines: list[bytes]) -> None:
    from probemarker.kube.watch.cache import Store, entry_of
    from probemarker.kube.watch.watchevents import ObjectEvent, parse_watch_line
    from probemarker.watch.pods import pod_projection

    store: Store[dict[str, Any]] = Store()
    for line in lines:
        event = parse_watch_line(line)
        assert isinstance(event, ObjectEvent)
        store.apply(event.type, entry_of(event.object, pod_projection))


def _stock(lines: list[bytes], watch: Any) -> None:
    for line in lines:
        watch.unmarshal_event(line.decode("utf8"), "V1Pod")  # as Watch.next() does


def _floor(lines: list[bytes]) -> None:
    for line in lines:
        orjson.loads(line)


async def bench_recorded(args: argparse.Namespace) -> None:
    from kubernetes_asyncio import watch

    lines = recorded_lines(args.events, args.pods)
    size = sum(map(len, lines)) / len(lines)
    print(
        f"recorded stream: {len(lines):,} MODIFIED events of {args.pods:,} pods, "
        f"{size:,.0f} bytes a line"
    )
    stock = watch.Watch()
    try:
        runs: list[tuple[str, Callable[[], None]]] = [
            ("orjson.loads only (floor)", lambda: _floor(lines)),
            ("probemarker: parse + project + store", lambda: _ours(lines)),
            ("kubernetes_asyncio Watch.unmarshal_event(V1Pod)", lambda: _stock(lines, stock)),
        ]
        for name, run in runs:
            best = min(_timed(run) for _ in range(args.repeat))
            _report(f"{name}", len(lines) / best, "events/s")
            _report(f"{name}: CPU per event", best / len(lines) * 1e6, "us")
    finally:
        await stock._api_client.close()


def _timed(run: Callable[[], None]) -> float:
    gc.collect()
    began = time.process_time()
    run()
    return time.process_time() - began


# --- 2. live pod watch, the sim in a child process ----------------------------------


def _serve(conn: multiprocessing.connection.Connection, pods: int) -> None:
    asyncio.run(_serve_async(conn, pods))


async def _serve_async(conn: multiprocessing.connection.Connection, pods: int) -> None:
    from probemarker.sim import SimCluster
    from probemarker.sim.server.discovery.catalog import NAMESPACES, PODS

    async with SimCluster(history_limit=200_000, node_names=("node-1",)) as sim:
        sim.store.create(NAMESPACES, {"metadata": {"name": NAMESPACE}}, namespace=None)
        for i in range(pods):
            pod = make_pod(i)
            for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
                pod["metadata"].pop(key)
            del pod["spec"]["nodeName"]  # no kubelet of the sim touches these pods
            status = pod.pop("status")
            sim.store.create(PODS, pod, namespace=NAMESPACE)
            stored = sim.store.get(PODS, NAMESPACE, pod["metadata"]["name"])
            stored["status"] = status
            sim.store.update(
                PODS,
                stored,
                namespace=NAMESPACE,
                name=pod["metadata"]["name"],
                subresource="status",
            )
        conn.send(str(sim.kubeconfig_path))
        loop = asyncio.get_running_loop()
        while True:
            command = await loop.run_in_executor(None, conn.recv)
            if command is None:
                return
            await _rewrite(sim, pods, command)
            conn.send("written")


async def _rewrite(sim: Any, pods: int, count: int) -> None:
    from probemarker.sim.server.discovery.catalog import PODS

    for n in range(count):
        name = f"web-{n % pods:05d}"
        pod = sim.store.get(PODS, NAMESPACE, name)
        pod["metadata"]["labels"]["gen"] = str(int(pod["metadata"]["labels"]["gen"]) + 1)
        sim.store.update(PODS, pod, namespace=NAMESPACE, name=name)
        if n % 100 == 99:
            await asyncio.sleep(0)  # let the watch streams send


async def _measure(
    conn: multiprocessing.connection.Connection,
    count: int,
    received: Callable[[], int],
    progress: asyncio.Event,
) -> tuple[float, float]:
    """Ask the child for `count` rewrites; (wall seconds, client CPU seconds) until all
    `count` events were received here."""
    start = received()
    cpu, wall = _cpu(), time.perf_counter()
    conn.send(count)
    async with asyncio.timeout(300):
        while received() - start < count:
            progress.clear()
            await progress.wait()
    cpu, wall = _cpu() - cpu, time.perf_counter() - wall
    await asyncio.get_running_loop().run_in_executor(None, conn.recv)  # "written"
    return wall, cpu


async def live_ours(
    conn: multiprocessing.connection.Connection, kubeconfig: str, count: int
) -> tuple[float, float]:
    import anyio

    from probemarker.kube.connect.client import KubeClient
    from probemarker.kube.connect.config import load_kubeconfig
    from probemarker.kube.watch.informer import PODS, Informer
    from probemarker.watch.pods import pod_projection

    seen = 0
    progress = asyncio.Event()
    async with KubeClient(await load_kubeconfig(kubeconfig)) as client:
        informer = Informer(client=client, resource=PODS, project=pod_projection)

        async def consume() -> None:
            nonlocal seen
            async for _ in informer.changes:
                seen += 1
                progress.set()

        async with anyio.create_task_group() as group:
            group.start_soon(informer.run)
            group.start_soon(consume)
            await informer.wait_synced()
            while seen < len(informer.list()):  # the initial ADDEDs
                progress.clear()
                await progress.wait()
            result = await _measure(conn, count, lambda: seen, progress)
            group.cancel_scope.cancel()
    return result


async def live_stock(
    conn: multiprocessing.connection.Connection, kubeconfig: str, count: int
) -> tuple[float, float]:
    from kubernetes_asyncio import client, config, watch

    configuration = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    seen = 0
    progress = asyncio.Event()
    async with client.ApiClient(configuration) as api:
        core = client.CoreV1Api(api)
        listed = await core.list_namespaced_pod(NAMESPACE, resource_version="0")
        stock = watch.Watch()

        async def consume() -> None:
            nonlocal seen
            async with stock.stream(
                core.list_namespaced_pod,
                NAMESPACE,
                resource_version=listed.metadata.resource_version,
                timeout_seconds=600,
            ) as events:
                async for _ in events:
                    seen += 1
                    progress.set()

        task = asyncio.create_task(consume())
        try:
            result = await _measure(conn, count, lambda: seen, progress)
        finally:
            stock.stop()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await stock._api_client.close()
    return result


async def bench_live(args: argparse.Namespace) -> None:
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    server = context.Process(target=_serve, args=(child, args.pods), daemon=True)
    server.start()
    try:
        kubeconfig = await asyncio.get_running_loop().run_in_executor(None, parent.recv)
        print(
            f"live pod watch: the sim in a child process, {args.pods:,} pods, "
            f"{args.live_events:,} rewrites (label changes) per run"
        )
        for name, run in (
            ("probemarker Informer (pod projection)", live_ours),
            ("kubernetes_asyncio watch.Watch (V1Pod)", live_stock),
        ):
            wall, cpu = await run(parent, kubeconfig, args.live_events)
            _report(f"{name}: events/s", args.live_events / wall, "events/s")
            _report(f"{name}: client CPU per event", cpu / args.live_events * 1e6, "us")
        parent.send(None)
    finally:
        server.join(timeout=10)
        if server.is_alive():
            server.kill()


# --- 3. memory of a store of N pods, each kind in a fresh process --------------------


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def _hold_models(lines: list[bytes]) -> dict[str, Any]:
    from kubernetes_asyncio import watch

    stock = watch.Watch()  # its ApiClient needs a running loop
    try:
        held = {}
        for line in lines:
            event = stock.unmarshal_event(line.decode("utf8"), "V1Pod")
            held[event["object"].metadata.name] = event["object"]
        return held
    finally:
        await stock._api_client.close()


def _hold(kind: str, lines: list[bytes]) -> object:
    if kind == "V1Pod models":
        return asyncio.run(_hold_models(lines))
    from probemarker.kube.watch.cache import Store, entry_of
    from probemarker.kube.watch.watchevents import ObjectEvent, parse_watch_line
    from probemarker.watch.pods import pod_projection

    project = pod_projection if kind == "probemarker projections" else (lambda obj: obj)
    store: Store[Any] = Store()
    for line in lines:
        event = parse_watch_line(line)
        assert isinstance(event, ObjectEvent)
        store.apply("ADDED", entry_of(event.object, project))
    return store


def _memory_child(
    conn: multiprocessing.connection.Connection, kind: str, pods: int, traced: bool
) -> None:
    lines = recorded_lines(pods, pods)
    if kind == "V1Pod models":  # import the models before the baseline
        from kubernetes_asyncio import client  # noqa: F401
    else:
        import probemarker.kube.watch.informer  # noqa: F401
    gc.collect()
    if traced:
        tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0] if traced else _rss_kib() * 1024
    held = _hold(kind, lines)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0] if traced else _rss_kib() * 1024
    conn.send(after - before)
    del held


def bench_memory(args: argparse.Namespace) -> None:
    context = multiprocessing.get_context("spawn")
    print(f"store of {args.pods:,} pods (each kind in a fresh process)")
    for kind in ("probemarker projections", "whole pods (parsed dicts)", "V1Pod models"):
        figures = []
        for traced in (False, True):
            parent, child = context.Pipe()
            process = context.Process(target=_memory_child, args=(child, kind, args.pods, traced))
            process.start()
            if not parent.poll(300):
                process.kill()
                raise RuntimeError(f"the memory run for {kind} gave no answer")
            figures.append(parent.recv())
            process.join()
        rss, allocated = figures
        _report(f"{kind}: RSS growth", rss / 2**20, "MiB")
        _report(f"{kind}: allocated and kept", allocated / 2**20, "MiB")
        _report(f"{kind}: kept per pod", allocated / args.pods / 1024, "KiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000, help="recorded watch lines")
    parser.add_argument("--pods", type=int, default=1_000, help="distinct pods (and store size)")
    parser.add_argument("--live-events", type=int, default=10_000, help="rewrites per live run")
    parser.add_argument("--repeat", type=int, default=3, help="recorded runs; the best counts")
    args = parser.parse_args()
    print(
        f"python {sys.version.split()[0]}; reproduce: python bench/informer_bench.py "
        f"--events {args.events} --pods {args.pods} --live-events {args.live_events} "
        f"--repeat {args.repeat}"
    )
    asyncio.run(bench_recorded(args))
    asyncio.run(bench_live(args))
    bench_memory(args)


if __name__ == "__main__":
    main()
