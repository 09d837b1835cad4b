"""One node, two tenants: what tenant A's floods do to tenant B's probes (issue 40).

The sim runs in this process (its kubelet runs node-1's pods, its exec handlers are
this bench's functions); the daemon is `python -m probemarker run` in a process of its
own with the default settings (but `--cleanup-delay-seconds 0`, so that each flood's
marks are gone before the next phase starts), JSON logs to a file. Its memory (VmRSS
sampled each second, VmHWM) and CPU are read from /proc.

Tenant B (namespace `tenant-b`): 5 pods, one marker with one exec probe each at period
1 s (timeout 1 s, thresholds 1) setting the label `b.bench/answer: yes|no`. Its answer
flips at moments drawn once per pod (4 to 8 s apart, seeded), read from this process's
monotonic clock, so each flip happens at a known moment and nothing else causes it.
A flip's delay is the moment the sim stores the pod with the new value minus the flip's
moment; a flip is missed if the value never shows before the next flip or within 10 s.

Tenant A (namespace `tenant-a`): 60 pods, idle in `quiet`; in each flood phase, one
kind of marker of A's selects them:
- `writes`: a label `a.bench/stamp: "{{.Result}}"` whose answer changes every run, so
  every pod wants a write every second (60/s, over the node's 50/s budget);
- `exec`: an exec probe whose command hangs (until the phase ends): the exec slots and
  the held streams fill;
- `slow`: two exec probes a pod whose commands take 2.9 s, within their 3 s timeout,
  due again at once: 120 runs that want the 64 probe slots all the time, no hold;
- `events`: four probes per pod whose answers flip every run, each with a condition: a
  transition, so an Event, per probe per second (240/s, over the 50/s event budget);
- `warnings`: a `{{.Result}}` label whose answer is never a valid label value and
  changes every run: InvalidResultValue warnings;
- `markers`: 100 markers of one probe each (period 1 s);
- `all`: every one of the above at once.
Each phase: A's markers applied, --warmup s, a --seconds window measured, the markers
deleted and the node left to settle (no pod write for 3 s).

Goal (issue 40): under any flood, B's p99 is at most 1.5 x its quiet p99 + 0.25 s,
with no flip missed, and the daemon's memory under its limit in
manifests/daemonset.yaml.

    python bench/noisy_neighbours.py                   # about 10 minutes
    python bench/noisy_neighbours.py --seconds 30 --floods writes,exec

Prints the figures and the command that reproduces them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cri_exec import percentile
from bench.daemonset_resources import RUN, proc_cpu, proc_status

REPO = Path(__file__).resolve().parents[1]
NODE = "node-1"
A, B = "tenant-a", "tenant-b"
A_PODS, B_PODS = 60, 5
ANSWER = "b.bench/answer"
MISSED_AFTER = 10.0
FLOODS = ("writes", "exec", "slow", "events", "warnings", "markers", "all")
GROUP, VERSION, PLURAL = "probemarker.io", "v1alpha1", "podprobemarkers"


# -- the answers -----------------------------------------------------------------------


@dataclass
class Flips:
    """Tenant B's answers: each pod's flip moments (monotonic seconds)."""

    moments: dict[str, list[float]] = field(default_factory=dict)

    def plan(self, pods: list[str], *, start: float, until: float, seed: int) -> None:
        rng = random.Random(seed)
        for pod in pods:
            at, out = start + rng.uniform(1, 4), []
            while at < until:
                out.append(at)
                at += rng.uniform(4, 8)
            self.moments[pod] = out

    def value(self, pod: str, now: float) -> str:
        """The label the answer means now: 'yes' before the first flip, then alternating."""
        passed = sum(1 for m in self.moments.get(pod, ()) if m <= now)
        return "yes" if passed % 2 == 0 else "no"


def delays(
    moments: list[float], seen: list[tuple[float, str]], *, start: float, end: float
) -> tuple[list[float], int]:
    """For the flips at `moments` inside [start, end): each flip's delay until the label
    showed its new value (the first stored change to it after the flip, before the next
    flip), and how many flips were missed (no such change, or later than MISSED_AFTER)."""
    out, missed = [], 0
    for index, moment in enumerate(moments):
        if not start <= moment < end:
            continue
        value = "yes" if (index + 1) % 2 == 0 else "no"
        nxt = moments[index + 1] if index + 1 < len(moments) else float("inf")
        limit = min(nxt, moment + MISSED_AFTER)
        shown = [t for t, v in seen if moment <= t < limit and v == value]
        if shown:
            out.append(shown[0] - moment)
        else:
            missed += 1
    return out, missed


def quantile(values: list[float], q: float) -> float:
    """bench/cri_exec.py's nearest-rank quantile; NaN for no values (a phase whose flips
    were all missed)."""
    return percentile(values, q) if values else float("nan")


# -- the sim and the markers -------------------------------------------------------------


def _marker(name: str, selector: dict[str, str], probes: list[dict[str, Any]], ns: str) -> Any:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodProbeMarker",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"selector": {"matchLabels": selector}, "probes": probes},
    }


def _probe(name: str, word: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "containerName": "app",
        "probe": {
            "exec": {"command": [word, name]},
            "periodSeconds": 1,
            "timeoutSeconds": 1,
            "successThreshold": 1,
            "failureThreshold": 1,
        },
        **extra,
    }


def _labels(succeeded: dict[str, str], failed: dict[str, str] | None = None) -> Any:
    policy = [{"state": "Succeeded", "labels": succeeded}]
    if failed is not None:
        policy.append({"state": "Failed", "labels": failed})
    return {"markerPolicy": policy}


def flood_markers(kind: str) -> list[Any]:
    """Tenant A's markers for one flood."""
    every = {"tenant": "a"}
    if kind == "writes":
        return [
            _marker(
                "a-writes",
                every,
                [_probe("s", "stamp", **_labels({"a.bench/stamp": "{{.Result}}"}))],
                A,
            )
        ]
    if kind == "exec":
        return [
            _marker("a-exec", every, [_probe("h", "hang", **_labels({"a.bench/hang": "done"}))], A)
        ]
    if kind == "slow":
        probes = [
            _probe(f"s{i}", "slow", **_labels({f"a.bench/slow{i}": "done"})) for i in range(2)
        ]
        for slow in probes:
            slow["probe"]["timeoutSeconds"] = 3
        return [_marker("a-slow", every, probes, A)]
    if kind == "events":
        probes = [_probe(f"f{i}", "flip", podConditionType=f"a.bench/f{i}") for i in range(4)]
        return [_marker("a-events", every, probes, A)]
    if kind == "warnings":
        return [
            _marker(
                "a-warnings",
                every,
                [_probe("w", "bad", **_labels({"a.bench/bad": "{{.Result}}"}))],
                A,
            )
        ]
    if kind == "markers":
        return [
            _marker(
                f"a-m{i}",
                {"idx": str(i % A_PODS)},
                [_probe("m", "ok", **_labels({f"a.bench/m{i}": "ok"}))],
                A,
            )
            for i in range(100)
        ]
    if kind == "all":
        return [m for k in FLOODS[:-1] for m in flood_markers(k)]
    raise ValueError(f"no flood {kind!r}: one of {', '.join(FLOODS)}")


class Answers:
    """The exec handlers: B's flips, A's floods by the command's first word."""

    def __init__(self, flips: Flips) -> None:
        self.flips = flips
        self.release = anyio.Event()  # ends A's hanging commands
        self.calls = 0
        self._turns: dict[tuple[str, str], int] = {}

    async def answer(self, request: Any) -> Any:
        from probemarker.sim.exec.runners import ExecReply

        self.calls += 1
        pod, word = request.target.pod, (request.command or [""])[0]
        now = time.monotonic()
        if word == "flip" and request.target.namespace == B:
            return ExecReply(0 if self.flips.value(pod, now) == "yes" else 1, b"b\n")
        if word == "stamp":
            return ExecReply(0, f"v{int(now)}\n".encode())
        if word == "hang":
            await self.release.wait()
            return ExecReply(0, b"done\n")
        if word == "slow":
            await anyio.sleep(2.9)  # within its 3 s timeout: a slot taken, no hold
            return ExecReply(0, b"done\n")
        if word == "flip":
            key = (pod, request.command[-1])
            self._turns[key] = self._turns.get(key, 0) + 1
            return ExecReply(self._turns[key] % 2, b"a\n")
        if word == "bad":
            return ExecReply(0, f"not a label value at {now:.3f}\n".encode())
        return ExecReply(0, b"ok\n")


async def _pods(
    core: Any,
    sim: Any,
    answers: Answers,
    ns: str,
    count: int,
    labels: Callable[[int], dict[str, str]],
) -> list[str]:
    names = []
    for i in range(count):
        name = f"{ns[-1]}-{i}"
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels(i)},
            "spec": {
                "nodeName": NODE,
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "app", "image": "game:1"}],
            },
        }
        sim.exec_handlers.register(ns, name, "app", answers.answer)
        await core.create_namespaced_pod(ns, body)
        names.append(name)
    for name in names:
        await sim.kubelet.wait_running(ns, name)
    return names


# -- the daemon -------------------------------------------------------------------------


class DaemonProcess:
    """`probemarker run` in a process of its own; waits are async (the sim serves it
    from this process's loop)."""

    def __init__(self, kubeconfig: Path, log: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO), "PROBEMARKER_LOG_FORMAT": "json",
               "PROBEMARKER_METRICS_ADDRESS": "0"}  # fmt: skip
        self.log = log
        with log.open("ab") as sink:
            self.process = subprocess.Popen(
                [*RUN, "--kubeconfig", str(kubeconfig), "--node", NODE, "--cleanup-delay-seconds", "0"],
                stdout=sink, stderr=subprocess.STDOUT, env=env,
            )  # fmt: skip

    async def ready(self, within: float = 120) -> None:
        with anyio.fail_after(within):
            while b'"daemon.ready"' not in self.log.read_bytes():
                if self.process.poll() is not None:
                    raise RuntimeError(f"the daemon exited {self.process.returncode}")
                await anyio.sleep(0.1)

    async def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        # in a thread: the loop keeps serving the sim, which the daemon flushes to
        return await anyio.to_thread.run_sync(lambda: self.process.wait(60))


# -- a run ------------------------------------------------------------------------------


@dataclass
class Phase:
    name: str
    delays: list[float]
    missed: int
    flips: int
    rss_max: int
    cpu: float
    wall: float
    writes: int


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from kubernetes_asyncio import client

    from probemarker.api.crd import build_crd
    from probemarker.sim import SimCluster
    from probemarker.sim.server.discovery.catalog import PODS
    from probemarker.sim.store.watchcache import WatchEvent

    floods = [f for f in args.floods.split(",") if f]
    for flood in floods:
        flood_markers(flood)  # an unknown name fails here, before anything starts
    flips = Flips()
    answers = Answers(flips)
    seen: dict[str, list[tuple[float, str]]] = {}
    phases: list[Phase] = []
    work = Path(tempfile.mkdtemp(prefix="noisy-"))
    async with (
        SimCluster(node_names=(NODE,), kubelet_events=False) as sim,
        client.ApiClient(sim.configuration()) as api,
    ):
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        await client.ApiextensionsV1Api(api).create_custom_resource_definition(build_crd())
        for ns in (A, B):
            await core.create_namespace(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
            )
        b_pods = await _pods(core, sim, answers, B, B_PODS, lambda i: {"tenant": "b"})
        await _pods(core, sim, answers, A, A_PODS, lambda i: {"tenant": "a", "idx": str(i)})
        total = (len(floods) + 1) * (args.warmup + args.seconds + 30) + 60
        now = time.monotonic()
        flips.plan(b_pods, start=now, until=now + total, seed=args.seed)
        watch = sim.store.watch(PODS, namespace=B)

        async def follow() -> None:
            async for event in watch:
                if isinstance(event, WatchEvent):
                    meta = event.object["metadata"]
                    value = (meta.get("labels") or {}).get(ANSWER)
                    trail = seen.setdefault(meta["name"], [])
                    if value is not None and (not trail or trail[-1][1] != value):
                        trail.append((time.monotonic(), value))

        async def apply(markers: list[Any]) -> None:
            for body in markers:
                await custom.create_namespaced_custom_object(
                    GROUP, VERSION, body["metadata"]["namespace"], PLURAL, body
                )

        async def delete(markers: list[Any]) -> None:
            for body in markers:
                meta = body["metadata"]
                await custom.delete_namespaced_custom_object(
                    GROUP, VERSION, meta["namespace"], PLURAL, meta["name"]
                )

        async def settle() -> None:
            """Until no pod write for 3 s (at most 120 s)."""
            with anyio.move_on_after(120):
                last, quiet_since = writes(), time.monotonic()
                while time.monotonic() - quiet_since < 3:
                    await anyio.sleep(0.5)
                    if (now := writes()) != last:
                        last, quiet_since = now, time.monotonic()

        def writes() -> int:
            return sim.accounting.count(verb="patch", resource="pods", subresource="status")

        async with anyio.create_task_group() as group:
            group.start_soon(follow)
            daemon = DaemonProcess(sim.kubeconfig_path, work / "daemon.log")
            try:
                await daemon.ready()
                await apply(
                    [
                        _marker(
                            "b",
                            {"tenant": "b"},
                            [_probe("answer", "flip", **_labels({ANSWER: "yes"}, {ANSWER: "no"}))],
                            B,
                        )
                    ]
                )
                for name in ["quiet", *floods]:
                    markers = [] if name == "quiet" else flood_markers(name)
                    answers.release = anyio.Event()
                    await apply(markers)
                    await anyio.sleep(args.warmup)
                    start, cpu0, w0 = time.monotonic(), proc_cpu(daemon.process.pid), writes()
                    rss = 0
                    while time.monotonic() - start < args.seconds:
                        rss = max(rss, proc_status(daemon.process.pid)["VmRSS"])
                        await anyio.sleep(1)
                    end = time.monotonic()
                    cpu = proc_cpu(daemon.process.pid) - cpu0
                    rss = max(rss, proc_status(daemon.process.pid)["VmHWM"])
                    got, missed, count = [], 0, 0
                    for pod in b_pods:
                        d, m = delays(
                            flips.moments[pod],
                            seen.get(pod, []),
                            start=start,
                            end=end - MISSED_AFTER,
                        )
                        got += d
                        missed += m
                        count += len(d) + m
                    phases.append(
                        Phase(name, got, missed, count, rss, cpu, end - start, writes() - w0)
                    )
                    print(
                        f"{name}: {count} flips, p99 {quantile(got, 0.99):.2f} s, {missed} missed",
                        file=sys.stderr,
                    )
                    await delete(markers)
                    answers.release.set()
                    await settle()
            finally:
                answers.release.set()
                code = await daemon.stop()
                watch.close()
                group.cancel_scope.cancel()
    limit = _memory_limit()
    return {
        "phases": phases,
        "exit_code": code,
        "memory_limit": limit,
        "log": str(work / "daemon.log"),
    }


def _memory_limit() -> int:
    for doc in yaml.safe_load_all((REPO / "manifests" / "daemonset.yaml").read_text()):
        if doc and doc.get("kind") == "DaemonSet":
            text = doc["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"]
            return int(text.removesuffix("Mi")) * 1024 * 1024
    raise ValueError("manifests/daemonset.yaml: no DaemonSet memory limit")


def report(args: argparse.Namespace, out: dict[str, Any]) -> None:
    phases: list[Phase] = out["phases"]
    quiet = next(p for p in phases if p.name == "quiet")
    goal = 1.5 * quantile(quiet.delays, 0.99) + 0.25
    print(f"\nTenant B's flip -> label delay (5 pods, exec at period 1 s), tenant A's floods "
          f"in turn ({args.seconds:g} s windows); goal: p99 <= {goal:.2f} s, 0 missed\n")  # fmt: skip
    head = (
        "phase",
        "flips",
        "p50 s",
        "p99 s",
        "max s",
        "missed",
        "goal",
        "pod writes/s",
        "daemon CPU",
        "daemon RSS max",
    )
    rows = []
    for p in phases:
        p99 = quantile(p.delays, 0.99)
        ok = "-" if p.name == "quiet" else ("met" if p99 <= goal and p.missed == 0 else "MISSED")
        rows.append((p.name, str(p.flips), f"{quantile(p.delays, 0.5):.2f}", f"{p99:.2f}",
                     f"{max(p.delays, default=float('nan')):.2f}", str(p.missed), ok,
                     f"{p.writes / p.wall:.1f}", f"{100 * p.cpu / p.wall:.0f} %",
                     f"{p.rss_max / 2**20:.0f} MiB"))  # fmt: skip
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
    print(f"\nmemory limit (manifests/daemonset.yaml): {out['memory_limit'] / 2**20:.0f} MiB; "
          f"daemon exit code on SIGTERM: {out['exit_code']}; log: {out['log']}")  # fmt: skip
    print(f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores")
    again = f"python bench/noisy_neighbours.py --seconds {args.seconds:g} --warmup {args.warmup:g} --seed {args.seed}"
    if args.floods != ",".join(FLOODS):
        again += f" --floods {args.floods}"
    print(f"reproduce: {again}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="each phase's window")
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=40)
    parser.add_argument("--floods", default=",".join(FLOODS), help="comma-separated, in order")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    out = asyncio.run(run(args))
    report(args, out)
    if args.json:
        phases = [{**p.__dict__, "delays": p.delays} for p in out["phases"]]
        args.json.write_text(json.dumps({**out, "phases": phases}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
