"""Reaction latency: from a container's answer changing to a separate watcher seeing the
pod's label change, through the real daemon.

Three processes (the children of bench/engine_idle.py):
- the sim (HTTPS with a bearer token) in a child process; its Python exec handler
  answers each pod's `check` from a value this child flips: every pod independently,
  `uniform(--low, --high)` s apart (default 1.5-2.5 s: one period wide, so the flip's
  phase against the probe's grid is uniform), recording t0 = `time.monotonic()` of each
  flip;
- the daemon (`probemarker.daemon.app.Daemon`, default settings, in-cluster connection) in a
  child process of its own: one marker, one exec probe per pod, period 1 s, thresholds
  1, timeout 1 s, setting `ready=true` on success and `ready=false` on failure;
- this process: the watcher, kubernetes_asyncio's stock `watch.Watch` on its own client,
  recording t1 = `time.monotonic()` when a pod event with a changed `ready` arrives.
`time.monotonic()` is CLOCK_MONOTONIC, one clock for every process of the machine.

A flip's latency is t1 - t0 for the first event showing its value after it (before the
pod's next flip; a flip never seen before the next one is counted as missed). Several
pods flip in parallel to get the transitions in a few minutes; at 4 pods, 2 transitions
a second cost 2 patches and 2 event writes a second, far under either budget (50/s).

The floor: a flip waits for the probe's next run, uniform in [0, period) (p50 half a
period, p99 0.99 of one), then the exec, the writer's coalescing window
(write_coalesce_seconds, 0.05 s), the pods/status patch and the watch event.

    python bench/engine_latency.py                     # 4 pods x 60 flips = 240
    python bench/engine_latency.py --pods 4 --flips 100

Prints the figures and the command that reproduces them.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import platform
import sys
import time
from pathlib import Path
from typing import Any

LABEL = "ready"


async def watch_pods(
    kubeconfig: str, seen: list[tuple[str, float, str]], ready: asyncio.Event, pods: int
) -> None:
    """Record (pod, t1, value) whenever a pod's `ready` label changes."""
    from kubernetes_asyncio import client, config, watch

    configuration = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    last: dict[str, str] = {}
    async with client.ApiClient(configuration) as api:
        core = client.CoreV1Api(api)
        stream = watch.Watch().stream(
            core.list_namespaced_pod,
            namespace="default",
            label_selector="app=game",
            timeout_seconds=3600,
        )
        async for event in stream:
            now = time.monotonic()
            meta = event["object"].metadata
            value = str((meta.labels or {}).get(LABEL))
            if last.get(meta.name, "") != value:
                last[meta.name] = value
                seen.append((meta.name, now, value))
            if len(last) >= pods:
                ready.set()


def match(
    flips: list[tuple[str, float, str]],
    seen: list[tuple[str, float, str]],
    execs: list[tuple[str, float, str]],
) -> tuple[list[tuple[float, float]], int]:
    """For every flip seen before its pod's next flip: (t1 - t0, t1 - te), te the first
    exec that answered the new value; and how many flips were not seen."""

    def by_pod(rows: list[tuple[str, float, str]]) -> dict[str, list[tuple[float, str]]]:
        out: dict[str, list[tuple[float, str]]] = {}
        for pod, t, value in rows:
            out.setdefault(pod, []).append((t, value))
        return out

    shown, answered = by_pod(seen), by_pod(execs)
    flips = sorted(flips, key=lambda f: (f[0], f[1]))
    found, missed = [], 0
    for n, (pod, t0, value) in enumerate(flips):
        following = flips[n + 1] if n + 1 < len(flips) else None
        until = following[1] if following is not None and following[0] == pod else float("inf")
        t1 = next((t for t, v in shown.get(pod, []) if t0 <= t < until and v == value), None)
        te = next((t for t, v in answered.get(pod, []) if t0 <= t < until and v == value), None)
        if t1 is None or te is None:
            missed += 1
        else:
            found.append((t1 - t0, t1 - te))
    return found, missed


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from bench.engine_idle import Child, marker_body, serve_daemon, start_sim, writes_in

    sim, info = start_sim()
    try:
        sim.call("pods", count=args.pods)
        flipping = lambda j: {  # noqa: E731
            "succeeded": {"labels": {LABEL: "true"}},
            "failed": {"labels": {LABEL: "false"}},
        }
        sim.call("marker", body=marker_body(probes=1, period=1, policies=flipping))
        daemon = Child(serve_daemon, info, True, {})
        try:
            daemon.receive(120)
            sim.call("wait_labels", pods=args.pods, label=LABEL, value="true")
            seen: list[tuple[str, float, str]] = []
            watching = asyncio.Event()
            loop = asyncio.get_running_loop()
            watcher = asyncio.create_task(watch_pods(info["kubeconfig"], seen, watching, args.pods))
            await asyncio.wait_for(watching.wait(), 30)
            before = sim.call("counts")
            flipped = await loop.run_in_executor(
                None,
                lambda: sim.call(
                    "flip",
                    pods=args.pods,
                    flips=args.flips,
                    low=args.low,
                    high=args.high,
                    seed=args.seed,
                    within=args.flips * args.high + 60,
                ),
            )
            await asyncio.sleep(1.0)  # the last flips' events (the sim waited 2 s already)
            after = sim.call("counts")
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            end = daemon.call("sample")
        finally:
            daemon.close()
    finally:
        sim.close()
    flips = flipped["flips"]
    found, missed = match(flips, seen, flipped["execs"])
    pods_status = after.get(("patch", "pods", "status"), 0) - before.get(
        ("patch", "pods", "status"), 0
    )
    writes = writes_in({k: v - before.get(k, 0) for k, v in after.items()})
    return {
        "latencies": [total for total, _ in found],
        "after_exec": [after for _, after in found],
        "missed": missed,
        "flips": len(flips),
        "pod_writes": pods_status,
        "writes": writes,
        "daemon": end,
    }


def _print(args: argparse.Namespace, out: dict[str, Any]) -> None:
    lat = out["latencies"]
    n = len(lat)
    print(
        f"{out['flips']} flips ({args.pods} pods x {args.flips}, each {args.low:g}-{args.high:g} s "
        f"after the last), period 1 s, thresholds 1; {n} seen, {out['missed']} missed"
    )
    print(f"{'latency, ms':<40} {'p50':>6} {'p90':>6} {'p99':>6} {'max':>6} {'min':>6}")
    rows = {
        "flip -> watcher sees the label": lat,
        "  of which: exec answered -> watcher": out["after_exec"],
    }
    for label, values in rows.items():
        figures = [pct(values, 0.5), pct(values, 0.9), pct(values, 0.99), max(values), min(values)]
        print(f"{label:<40} " + " ".join(f"{v * 1000:>6.0f}" for v in figures))
    print(
        f"p99 {pct(lat, 0.99):.3f} s (target <= 1.25 s). The rest of each latency is the wait "
        "for the probe's next run, uniform in [0, 1 s); after the exec answered: decide, "
        "write_coalesce_seconds (0.05 s), the pods/status patch, the watch event"
    )
    print(
        f"writes during the run: {out['pod_writes']} pods/status patches, {out['writes']} "
        f"writes in all (with events), for {out['flips']} flips"
    )
    d = out["daemon"]
    print(
        f"daemon: {d['runs']} runs, {d['late']} started late, the latest "
        f"{d['lateness_max'] * 1000:.0f} ms after its due; {d['slot_waits']} waited for a "
        f"slot under the cap, the longest {d['slot_wait_max'] * 1000:.0f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=4, help="pods flipping in parallel")
    parser.add_argument("--flips", type=int, default=60, help="flips per pod")
    parser.add_argument("--low", type=float, default=1.5, help="shortest time between flips")
    parser.add_argument("--high", type=float, default=2.5, help="longest time between flips")
    parser.add_argument("--seed", type=int, default=8)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    out = asyncio.run(run(args))
    print("reproduce: python bench/engine_latency.py " + " ".join(sys.argv[1:]))
    print(
        f"machine: {multiprocessing.cpu_count()} cores, Python {platform.python_version()}; "
        "sim (HTTPS + token), daemon and watcher (kubernetes_asyncio) each in their own process"
    )
    _print(args, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
