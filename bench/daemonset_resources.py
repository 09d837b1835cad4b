"""The daemon's memory and CPU in the DaemonSet's terms: `probemarker run` itself (the
command the image runs), on a node at the kubelet's default pod limit, idle and loaded,
in one run; the figures behind manifests/daemonset.yaml's requests and memory limit.

Processes, so each figure is the daemon's own:
- the sim (HTTPS with a bearer token; bench/engine_idle.py's child) in a child process,
  not counted: --pods pods gs-0.. on node-1, container `app` declaring the named ports
  `http` (8080) and `tcp` (9090), each pod with its own IP 127.0.1.N; its Python exec
  handler answers every exec with exit 0 and `ok`;
- the targets (bench/daemon_kinds.py's child) in a child process, not counted: on every
  pod's IP an HTTP/1.1 server on 8080 (200, keep-alive) and a TCP listener on 9090;
- the daemon: `python -m probemarker run --kubeconfig <the sim's> --node node-1`, a
  process of its own, default settings, JSON logs (PROBEMARKER_LOG_FORMAT=json) to a
  file, as a container's stdout goes to the runtime. Read from outside through
  /proc/PID: VmRSS (resident now), VmHWM (the kernel's record of its peak), and
  utime+stime of /proc/PID/stat (every thread) over each window.

Phases, one daemon through the first three:
1. idle: the pods there, no marker; from `daemon.ready`, --warmup s, then a window;
2. loaded: one marker selecting every pod, 3 probes each (exec `check p0` with the pod
   condition bench.io/p0, httpGet /healthz on `http`, tcpSocket on `tcp`), period
   --period s, timeout 1 s, thresholds 1, each setting label p<j>=ok: the kubelet's
   default of 110 pods x 3 probes every 10 s is 33 runs/s. After the first results are
   written (every label seen, then no write for 5 s, at least --warmup s), a window;
3. marker changed: every label's value changes at once (110 pods rewritten in a burst),
   until written and quiet, then a window;
4. restart: SIGTERM (exit code and time to exit recorded), then a fresh daemon on the
   loaded node (it seeds from what the pods show: no writes expected), --warmup s, a
   window: the peak of a daemon starting where the work already is.

In every window VmRSS is sampled each second (least, mean, most); VmHWM is read at its
end. The request suggested for memory is the loaded mean, rounded up; for CPU the
loaded share of a core, rounded up; the limit, the highest VmHWM or sampled VmRSS of
all phases times --margin, each with what this run's daemon does not load on top ("extras"): fresh
processes measure the RSS that importing prometheus-client and making the metrics'
families adds (where the daemon has no metrics server; where it has one, it listens on
a free loopback port and is scraped every 15 s in every window, its CPU counted), and
importing grpcio (a node with grpc probes).

    python bench/daemonset_resources.py                    # about 6 minutes
    python bench/daemonset_resources.py --pods 250         # a node with maxPods 250
    python bench/daemonset_resources.py --seconds 300      # longer windows

Prints the figures and the command that reproduces them.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.engine_idle import Child

REPO = Path(__file__).resolve().parent.parent
MiB = 1 << 20
TICKS = os.sysconf("SC_CLK_TCK")
NODE = "node-1"
RUN = (sys.executable, "-m", "probemarker", "run")


# --- the daemon, from outside -----------------------------------------------------------


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in bytes."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) * 1024
    return out


def proc_cpu(pid: int) -> float:
    """utime + stime of a process (every thread), in seconds."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # after the command, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / TICKS


@dataclass
class Daemon:
    """`probemarker run` in a process of its own, logging JSON to a file."""

    kubeconfig: str
    log: Path
    node: str = NODE
    args: tuple[str, ...] = ()  # more flags, e.g. ("--exec-backend", "cri")
    process: subprocess.Popen[bytes] = field(init=False)
    started: float = field(init=False)
    offset: int = field(init=False)  # where its lines begin in the shared log

    def __post_init__(self) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "PROBEMARKER_LOG_FORMAT": "json",
            "PROBEMARKER_LOG_LEVEL": "info",
            # the health and metrics server, where the daemon has one, on a free port
            "PROBEMARKER_METRICS_ADDRESS": "127.0.0.1:0",
        }
        self.offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as sink:
            self.process = subprocess.Popen(
                [*RUN, "--kubeconfig", self.kubeconfig, "--node", self.node, *self.args],
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=env,
            )
        self.started = time.monotonic()

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, within: float = 120) -> float:
        """Seconds from the start to its `daemon.ready` line."""
        while time.monotonic() - self.started < within:
            if self.process.poll() is not None:
                raise RuntimeError(f"the daemon exited {self.process.returncode}: {self.tail()}")
            if b'"daemon.ready"' in self.log.read_bytes()[self.offset :]:
                return time.monotonic() - self.started
            time.sleep(0.1)
        raise TimeoutError(f"the daemon was not ready within {within:g} s: {self.tail()}")

    def metrics_port(self) -> int | None:
        """The port of its `metrics.serving` line, or None (a daemon without the server)."""
        for line in self.log.read_bytes()[self.offset :].splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("event") == "metrics.serving":
                return int(entry["port"])
        return None

    def stop(self, within: float = 30) -> tuple[int, float]:
        """SIGTERM; (its exit code, seconds to exit)."""
        began = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(within)
        return code, time.monotonic() - began

    def tail(self) -> str:
        return "\n".join(self.log.read_text().splitlines()[-10:])


SCRAPE_EVERY = 15.0  # a common Prometheus scrape interval


def scrape(port: int) -> int:
    """GET /metrics as Prometheus does; the size of the answer."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        return len(answer.read())


def window(daemon: Daemon, seconds: float, *, every: float = 1.0) -> dict[str, Any]:
    """CPU over `seconds`, VmRSS sampled each `every` s, VmHWM at the end; /metrics
    scraped every SCRAPE_EVERY s where the daemon serves it (the daemon's CPU counts the
    scrapes, as in a cluster)."""
    port = daemon.metrics_port()
    cpu, began = proc_cpu(daemon.pid), time.monotonic()
    rss, scraped, last_scrape = [], [], -SCRAPE_EVERY
    while (elapsed := time.monotonic() - began) < seconds:
        if port is not None and elapsed - last_scrape >= SCRAPE_EVERY:
            scraped.append(scrape(port))
            last_scrape = elapsed
        rss.append(proc_status(daemon.pid)["VmRSS"])
        time.sleep(min(every, max(0.0, seconds - elapsed)))
    used = proc_cpu(daemon.pid) - cpu
    wall = time.monotonic() - began
    status = proc_status(daemon.pid)
    return {
        "cpu": used,
        "wall": wall,
        "rss_min": min(rss),
        "rss_mean": statistics.fmean(rss),
        "rss_max": max(rss),
        "hwm": status["VmHWM"],
        "scrapes": len(scraped),
        "scrape_bytes": max(scraped, default=0),
    }


# --- the load ----------------------------------------------------------------------------


def marker_body(*, period: int, value: str) -> Any:
    """One marker over app=game: exec (with a condition), httpGet and tcpSocket."""
    from tests.integration.world import marker, probe

    actions: list[dict[str, Any]] = [
        {"exec": {"command": ["check", "p0"]}},
        {"httpGet": {"port": "http", "path": "/healthz"}},
        {"tcpSocket": {"port": "tcp"}},
    ]
    items = []
    for j, action in enumerate(actions):
        item = probe(
            f"p{j}",
            period=period,
            timeout=1,
            succeeded={"labels": {f"p{j}": value}},
            action=action,
            condition="bench.io/p0" if j == 0 else None,
        )
        items.append(item)
    return marker("bench", probes=items)


def served(sim: Child, targets: Child) -> dict[str, int]:
    from bench.engine_idle import execs_in, writes_in

    requests, counts = sim.call("counts"), targets.call("counts")
    return {
        "exec": execs_in(requests),
        "httpGet": counts.get("http requests", 0),
        "tcpSocket": counts.get("tcp connections", 0),
        "writes": writes_in(requests),
    }


def measured(daemon: Daemon, sim: Child, targets: Child, seconds: float) -> dict[str, Any]:
    before = served(sim, targets)
    figures = window(daemon, seconds)
    after = served(sim, targets)
    figures["served"] = {k: after[k] - before[k] for k in after}
    return figures


def wait_labels(sim: Child, pods: int, value: str) -> float:
    began = time.monotonic()
    for j in range(3):
        sim.call("wait_labels", pods=pods, label=f"p{j}", value=value)
    return time.monotonic() - began


# What the daemon loads beyond this run: a fresh interpreter imports what the daemon
# imports, then the extra, and prints its VmRSS before and after (MiB).
_EXTRA = """
import sys
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'): return int(line.split()[1]) / 1024
import probemarker.daemon.app  # the daemon's own imports, so only what is new counts
before = rss()
try:
%s
except ImportError:
    print('none'); sys.exit()
print(before, rss())
"""
EXTRAS = {
    # the metrics endpoint: prometheus-client and ~20 metric families with a few label sets
    "metrics": """
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
    registry = CollectorRegistry()
    for i in range(7):
        c = Counter(f'c{i}_total', 'x', ['kind', 'result'], registry=registry)
        g = Gauge(f'g{i}', 'x', ['kind'], registry=registry)
        h = Histogram(f'h{i}_seconds', 'x', ['kind'], registry=registry)
        for kind in ('exec', 'httpGet', 'tcpSocket', 'grpc'):
            c.labels(kind, 'Succeeded').inc(); g.labels(kind).set(1); h.labels(kind).observe(0.01)
    generate_latest(registry)""",
    # the first grpc probe: grpcio's C core and the health-checking stub (probe/grpc.py)
    "grpc": """
    import grpc, grpc.aio, grpc_health.v1.health_pb2, grpc_health.v1.health_pb2_grpc""",
}


def extra_cost(name: str) -> float | None:
    """MiB of RSS that loading EXTRAS[name] adds, or None where it is not installed."""
    done = subprocess.run(
        [sys.executable, "-c", _EXTRA % EXTRAS[name]],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    if done.stdout.strip() == "none":
        return None
    before, after = (float(x) for x in done.stdout.split())
    return after - before


# --- the run -------------------------------------------------------------------------------


def bench(args: argparse.Namespace) -> dict[str, Any]:
    from bench.daemon_kinds import PORTS, serve_pod_targets
    from bench.engine_idle import Child, settle, start_sim

    out: dict[str, Any] = {}
    sim, info = start_sim()
    targets: Child | None = None
    daemon: Daemon | None = None
    scratch = tempfile.TemporaryDirectory(prefix="probemarker-bench-")
    log = Path(scratch.name) / "daemon.log"
    try:
        sim.call("pods", count=args.pods, ports={"app": PORTS})
        targets = Child(serve_pod_targets, sim.call("pod_ips", count=args.pods))
        targets.receive(60)

        daemon = Daemon(info["kubeconfig"], log)
        out["ready"] = daemon.wait_ready()
        time.sleep(args.warmup)
        out["idle"] = measured(daemon, sim, targets, args.seconds)

        phases: list[tuple[str, str]] = [("loaded", "ok"), ("changed", "changed")]
        for name, value in phases:
            began = time.monotonic()
            sim.call("marker", body=marker_body(period=args.period, value=value))
            labelled = wait_labels(sim, args.pods, value)
            settle(sim, at_least=max(0.0, args.warmup - (time.monotonic() - began)))
            out[f"{name}_written"] = labelled
            out[name] = measured(daemon, sim, targets, args.seconds)

        out["stop"] = daemon.stop()
        daemon = Daemon(info["kubeconfig"], log)
        out["restart_ready"] = daemon.wait_ready()
        settle(sim, at_least=args.warmup)
        out["restart"] = measured(daemon, sim, targets, args.seconds)
        out["restart_stop"] = daemon.stop()
        daemon = None
        lines = log.read_text().splitlines()
        out["log_lines"] = len(lines)
        out["log_bytes"] = sum(len(line) + 1 for line in lines)
    finally:
        if daemon is not None and daemon.process.poll() is None:
            daemon.process.kill()
            daemon.process.wait()
        for child in (targets, sim):
            if child is not None:
                child.close()
        scratch.cleanup()
    served_metrics = out["loaded"]["scrapes"] > 0
    out["extras"] = {
        name: extra_cost(name) for name in EXTRAS if not (name == "metrics" and served_metrics)
    }
    return out


def round_up(value: float, step: float) -> float:
    return math.ceil(value / step) * step


def report(args: argparse.Namespace, out: dict[str, Any]) -> None:
    rate = args.pods * 3 / args.period
    print(
        f"{args.pods} pods on the node; loaded: 3 probes each (exec with a condition, "
        f"httpGet, tcpSocket), period {args.period} s ({rate:g} runs/s); windows of "
        f"{args.seconds:g} s; ready in {out['ready']:.1f} s"
    )
    header = (
        f"{'phase':<30}{'CPU s':>7}{'mCPU':>6}{'runs':>6}{'writes':>7}"
        f"{'RSS min':>8}{'mean':>7}{'max':>7}{'VmHWM':>7}"
    )
    print(header + "   (MiB)")
    labels: dict[str, str] = {
        "idle": "idle (no marker)",
        "loaded": "loaded (steady)",
        "changed": "after every pod rewritten",
        "restart": "restarted on the loaded node",
    }
    for key, label in labels.items():
        f = out[key]
        runs = sum(f["served"][k] for k in ("exec", "httpGet", "tcpSocket"))
        print(
            f"{label:<30}{f['cpu']:>7.2f}{f['cpu'] / f['wall'] * 1000:>6.0f}{runs:>6}"
            f"{f['served']['writes']:>7}{f['rss_min'] / MiB:>8.1f}{f['rss_mean'] / MiB:>7.1f}"
            f"{f['rss_max'] / MiB:>7.1f}{f['hwm'] / MiB:>7.1f}"
        )
    loaded = out["loaded"]
    per_kind = ", ".join(f"{k} {loaded['served'][k]}" for k in ("exec", "httpGet", "tcpSocket"))
    print(f"loaded window runs by kind: {per_kind} (expected {rate * args.seconds:.0f} in all)")
    print(
        f"first results written (every label) in {out['loaded_written']:.1f} s; every pod "
        f"rewritten after the marker changed in {out['changed_written']:.1f} s"
    )
    code, took = out["stop"]
    code2, took2 = out["restart_stop"]
    print(
        f"SIGTERM: exit {code} in {took:.2f} s, after the restart exit {code2} in "
        f"{took2:.2f} s; the restarted daemon was ready in {out['restart_ready']:.1f} s; "
        f"log: {out['log_lines']} lines, {out['log_bytes'] / 1024:.0f} KiB in all"
    )
    if loaded["scrapes"]:
        print(
            f"/metrics: served by the daemon itself, scraped every {SCRAPE_EVERY:g} s "
            f"({loaded['scrapes']} scrapes in the loaded window, {loaded['scrape_bytes']} bytes)"
        )
    said = {
        "metrics": "prometheus-client imported and ~20 metric families made (the metrics "
        "endpoint, not in this daemon yet)",
        "grpc": "grpcio and the health stub imported (the first grpc probe loads them)",
    }
    extra = 0.0
    for name, cost in out["extras"].items():
        if cost is None:
            print(f"{said[name]}: not installed here, not measured")
        else:
            extra += cost
            print(f"{said[name]}: +{cost:.1f} MiB RSS")
    # VmHWM is the kernel's record, updated when memory is unmapped; memory handed back
    # otherwise (madvise) can leave a sampled VmRSS above it: the peak is the higher.
    peak = max(max(out[k]["hwm"], out[k]["rss_max"]) for k in labels) / MiB
    cpu = max(out[k]["cpu"] / out[k]["wall"] for k in ("loaded", "restart")) * 1000
    memory_request = round_up(out["loaded"]["rss_mean"] / MiB + extra, 8)
    cpu_request = round_up(cpu, 5)
    limit = round_up((peak + extra) * args.margin, 32)
    print(
        f"suggested: requests cpu {cpu_request:.0f}m (loaded {cpu:.0f}m), memory "
        f"{memory_request:.0f}Mi (loaded mean {out['loaded']['rss_mean'] / MiB:.1f} MiB + "
        f"{extra:.1f} extras); limit memory {limit:.0f}Mi (peak {peak:.1f} MiB + "
        f"{extra:.1f} extras, x {args.margin:g})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=110, help="at most 254 (127.0.1.N)")
    parser.add_argument("--period", type=int, default=10, help="the probes' periodSeconds")
    parser.add_argument("--seconds", type=float, default=60.0, help="each window")
    parser.add_argument("--warmup", type=float, default=15.0, help="before each window")
    parser.add_argument("--margin", type=float, default=2.0, help="limit = peak x this")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    print("reproduce: python bench/daemonset_resources.py " + " ".join(sys.argv[1:]))
    print(
        f"machine: {multiprocessing.cpu_count()} cores, Python {platform.python_version()}; "
        "the daemon: `python -m probemarker run --kubeconfig` in a process of its own, "
        "read through /proc; the sim (HTTPS + token) and the targets (on the pods' IPs) "
        "each in a child process, not counted"
    )
    report(args, bench(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
