"""What exec probes cost a real node on each exec backend: CPU per exec run of the
daemon, the API server, etcd, the kubelet and the runtime (containerd and its shims),
side by side in one run on the single-node cluster (hack/cluster.sh), against the
node's idle.

Needs root and a cluster with the add-on installed and the image loaded, e.g. after
`PROBEMARKER_TEST_CLUSTER_KEEP=1 python -m pytest -q -m cluster` (docs/development.md,
"A real cluster"). It switches the exec backend with the suite's overlay
(tests/cluster/install.py) and leaves the `api` backend installed.

Load: --pods busybox pods (`sleep`), one marker with --probes exec probes on each
(`true`, timeoutSeconds 1, thresholds 1, a label each), every --period s: by default
60 pods x 1 probe every 2 s = 30 runs/s, the shape of issue 30's run. Windows of
--seconds each, in this order, after --warmup s:
1. idle: the pods, no marker (the daemon watches and has nothing to run);
2. each backend of --backends: the marker applied (after a switch, once the new
   daemon is Ready and every pod carries its label).

CPU is read from /proc/PID/stat (utime+stime and the children's cutime+cstime it has
reaped: a shim reaps the `runc exec` and the probe's command, the kubelet what it
runs) of the cluster's processes, by the PIDs hack/cluster.sh records (etcd,
kube-apiserver, kubelet, kube-controller-manager, kube-scheduler, kube-proxy,
containerd), every containerd-shim, and the daemon (`probemarker run`). The node is
their sum: other work on the machine is not counted. Runs are the daemon's own
count (`probemarker_probe_runs_total{kind="exec"}` from its /metrics on the pod's
IP), with `probemarker_probe_late_starts_total` and `_missed_slots_total` beside
them; writes are the daemon's pods/status writes in the window (the API server's
audit log); memory is the daemon container's cgroup (v1 `memory.usage_in_bytes`).
Per run: (the window's CPU minus the idle window's) / runs.

    python bench/exec_node_cost.py                          # about 5 minutes
    python bench/exec_node_cost.py --pods 30 --probes 2 --seconds 60
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.cluster.install import STATE, Addon, Cluster
from tests.cluster.kube import (
    DAEMON_NAMESPACE,
    Kubectl,
    busybox_pod,
    create_namespace,
    processes_with_args,
    wait_for,
)
from tests.podfields import labels_of

NS = "bench-exec-cost"
DAEMON_ARGS = ["/opt/probemarker/bin/python3", "/opt/probemarker/bin/probemarker", "run"]
TICK = os.sysconf("SC_CLK_TCK")
# hack/cluster.sh's PID files, by the part of the node each process is
COMPONENTS = {
    "kube-apiserver": ["apiserver.pid"],
    "etcd": ["etcd.pid"],
    "kubelet": ["kubelet.pid"],
    "containerd": ["cri/containerd.pid"],
    "other (controller-manager, scheduler, kube-proxy)": ["kcm.pid", "sched.pid", "proxy.pid"],
}
SHIMS = "containerd-shims"
REAPED = "runc exec + the command (the shims reap them)"
ROWS = ["daemon", *COMPONENTS, SHIMS, REAPED]


def cpu_seconds(pid: int, *, own: bool = True, children: bool = True) -> float:
    """utime+stime (`own`) and cutime+cstime (`children`, those it reaped) of `pid`, in
    seconds (0 once it is gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = [int(x) for x in text.rsplit(")", 1)[1].split()[11:15]]
    return (sum(fields[:2]) * own + sum(fields[2:]) * children) / TICK


def shims() -> list[int]:
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if Path(f"/proc/{entry.name}/comm").read_text().startswith("containerd-shim"):
                    out.append(int(entry.name))
            except OSError:
                continue
    return out


def daemon_pid() -> int:
    found = processes_with_args(DAEMON_ARGS)
    if len(found) != 1:
        raise SystemExit(f"not one daemon process `probemarker run` on this host: {found}")
    return found[0]


def pids_by_part() -> dict[str, list[int]]:
    parts = {"daemon": [daemon_pid()]}
    for part, files in COMPONENTS.items():
        parts[part] = [int((STATE / f).read_text().strip()) for f in files]
    parts[SHIMS] = parts[REAPED] = shims()
    return parts


def sample(parts: dict[str, list[int]]) -> dict[str, float]:
    out = {}
    for part, pids in parts.items():
        own, children = part != REAPED, part not in (SHIMS,)
        out[part] = sum(cpu_seconds(p, own=own, children=children) for p in pids)
    return out


def metrics(kubectl: Kubectl) -> dict[str, float]:
    """The daemon's exec runs, late starts and missed slots, from its /metrics."""
    pods = kubectl.json(
        "-n", DAEMON_NAMESPACE, "get", "pods", "-l", "app.kubernetes.io/name=probemarker"
    )["items"]
    ip = next(p["status"]["podIP"] for p in pods if not p["metadata"].get("deletionTimestamp"))
    with urllib.request.urlopen(f"http://{ip}:9808/metrics", timeout=10) as answer:
        text = answer.read().decode()
    out = {"runs": 0.0, "failed": 0.0, "late": 0.0, "missed": 0.0}
    for line in text.splitlines():
        if line.startswith('probemarker_probe_runs_total{kind="exec"'):
            out["runs"] += float(line.rsplit(" ", 1)[1])
            if 'result="Succeeded"' not in line:
                out["failed"] += float(line.rsplit(" ", 1)[1])
        elif line.startswith("probemarker_probe_late_starts_total "):
            out["late"] = float(line.rsplit(" ", 1)[1])
        elif line.startswith("probemarker_probe_missed_slots_total "):
            out["missed"] = float(line.rsplit(" ", 1)[1])
    return out


def memory_mib(pid: int) -> float:
    line = next(x for x in Path(f"/proc/{pid}/cgroup").read_text().splitlines() if ":memory:" in x)
    group = Path("/sys/fs/cgroup/memory") / line.split(":", 2)[2].lstrip("/")
    return int((group / "memory.usage_in_bytes").read_text()) / 2**20


@dataclass
class Window:
    name: str
    seconds: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)  # seconds of CPU by part
    runs: float = 0.0
    failed: float = 0.0  # runs not Succeeded (a `true` that timed out under load)
    late: float = 0.0
    missed: float = 0.0
    writes: int = 0
    memory: float = 0.0

    def share(self, part: str) -> float:
        """% of one core."""
        return 100 * self.cpu[part] / self.seconds

    @property
    def node(self) -> float:
        return 100 * sum(self.cpu.values()) / self.seconds


def measure(cluster: Cluster, name: str, seconds: float) -> Window:
    kubectl = cluster.kubectl
    parts = pids_by_part()
    mark = cluster.audit.mark()
    before_metrics = metrics(kubectl)
    before, started = sample(parts), time.monotonic()
    time.sleep(seconds)
    after, ended = sample(parts), time.monotonic()
    after_metrics = metrics(kubectl)
    window = Window(name, ended - started)
    window.cpu = {part: after[part] - before[part] for part in parts}
    for key in ("runs", "failed", "late", "missed"):
        setattr(window, key, after_metrics[key] - before_metrics[key])
    window.writes = len(cluster.audit.daemon_writes(mark, namespace=NS))
    window.memory = memory_mib(parts["daemon"][0])
    return window


def marker(pods: int, probes: int, period: int) -> dict[str, Any]:
    items = [
        {
            "name": f"p{j}",
            "containerName": "main",
            "probe": {
                "exec": {"command": ["true"]},
                "periodSeconds": period,
                "timeoutSeconds": 1,
                "successThreshold": 1,
                "failureThreshold": 1,
            },
            "markerPolicy": [
                {"state": "Succeeded", "labels": {f"p{j}": "ok"}},
                {"state": "Failed", "labels": {f"p{j}": "bad"}},
            ],
        }
        for j in range(probes)
    ]
    return {
        "apiVersion": "probemarker.io/v1alpha1",
        "kind": "PodProbeMarker",
        "metadata": {"name": "cost", "namespace": NS},
        "spec": {"selector": {"matchLabels": {"app": "cost"}}, "probes": items},
    }


def all_labelled(kubectl: Kubectl, pods: int, probes: int) -> None:
    wait_for(
        lambda: kubectl.json("-n", NS, "get", "pods")["items"],
        lambda items: (
            len(items) == pods
            and all(all(labels_of(p).get(f"p{j}") == "ok" for j in range(probes)) for p in items)
        ),
        timeout=180,
        what=f"{pods} pods labelled by {probes} probes",
        interval=1.0,
    )


def report(windows: list[Window], args: argparse.Namespace) -> None:
    idle = windows[0]
    rate = args.pods * args.probes / args.period
    print(
        f"{args.pods} pods x {args.probes} exec probe(s) `true` every {args.period} s "
        f"({rate:g} runs/s); {args.seconds:g} s windows; {os.cpu_count()} cores"
    )
    width = 52
    print(f"{'':{width}}" + "".join(f"{w.name:>12}" for w in windows))
    print(f"{'exec runs in the window':{width}}" + "".join(f"{w.runs:>12.0f}" for w in windows))
    print(f"{'  of them not Succeeded':{width}}" + "".join(f"{w.failed:>12.0f}" for w in windows))
    print(
        f"{'late starts / missed slots':{width}}"
        + "".join(f"{f'{w.late:.0f} / {w.missed:.0f}':>12}" for w in windows)
    )
    print(f"{'daemon writes to the pods':{width}}" + "".join(f"{w.writes:>12}" for w in windows))
    print("CPU, % of one core")
    for part in ROWS:
        print(f"  {part:{width - 2}}" + "".join(f"{w.share(part):>12.1f}" for w in windows))
    print(
        f"  {'node (all of the above)':{width - 2}}" + "".join(f"{w.node:>12.1f}" for w in windows)
    )
    print("CPU per exec run, ms (minus idle)")
    for part in [*ROWS, "node"]:
        cells = []
        for w in windows[1:]:
            if part == "node":
                extra = sum(w.cpu.values()) / w.seconds - sum(idle.cpu.values()) / idle.seconds
            else:
                extra = w.cpu[part] / w.seconds - idle.cpu[part] / idle.seconds
            per_run = 1000 * extra * w.seconds / w.runs if w.runs else float("nan")
            cells.append(f"{per_run:>12.2f}")
        print(f"  {part:{width - 2}}{'':>12}" + "".join(cells))
    print(
        f"{'daemon memory (cgroup), MiB':{width}}" + "".join(f"{w.memory:>12.1f}" for w in windows)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=60)
    parser.add_argument("--probes", type=int, default=1, help="exec probes per pod")
    parser.add_argument("--period", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=45.0, help="of each window")
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--backends", default="api,cri")
    args = parser.parse_args()
    cluster = Cluster.at(STATE)
    kubectl = cluster.kubectl
    create_namespace(kubectl, NS, fresh=True)
    addon = Addon(cluster, Path(tempfile.mkdtemp()))
    try:
        addon.use("api")
        script = "exec sleep 2147483647"
        kubectl.apply(
            *(busybox_pod(f"c-{i}", NS, script=script, labels={"app": "cost"}) for i in range(args.pods))
        )  # fmt: skip
        wait_for(
            lambda: kubectl.json("-n", NS, "get", "pods")["items"],
            lambda items: (
                len(items) == args.pods
                and all(p["status"].get("phase") == "Running" for p in items)
            ),
            timeout=300,
            what=f"{args.pods} pods running",
            interval=1.0,
        )
        time.sleep(args.warmup)
        windows = [measure(cluster, "idle", args.seconds)]
        kubectl.apply(marker(args.pods, args.probes, args.period))
        for backend in args.backends.split(","):
            addon.use(backend)
            all_labelled(kubectl, args.pods, args.probes)
            time.sleep(args.warmup)
            windows.append(measure(cluster, backend, args.seconds))
        report(windows, args)
    finally:
        addon.use("api")
        kubectl.run("delete", "namespace", NS, "--wait=false", check=False)
    print(
        f"command: python bench/exec_node_cost.py --pods {args.pods} --probes {args.probes} "
        f"--period {args.period} --seconds {args.seconds:g} --backends {args.backends}"
    )


if __name__ == "__main__":
    main()
