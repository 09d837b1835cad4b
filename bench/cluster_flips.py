"""Figures from the real single-node cluster (hack/cluster.sh): label flip latency per
exec backend, the delay from the marker's condition to the kubelet's Ready and to the
EndpointSlice, a DaemonSet rollout's time and writes, and the daemon's memory.

Needs root and a cluster with the add-on installed and the image loaded, e.g. after
`PROBEMARKER_TEST_CLUSTER_KEEP=1 python -m pytest -q -m cluster` (docs/development.md,
"A real cluster"). It switches the exec backend with the suite's overlay
(tests/cluster/install.py) and leaves the `api` backend installed.

One pod (busybox) with a readiness gate and a Service; one marker, exec `cat /tmp/ok`,
period 1 s, thresholds 1, writing a label and the gate's condition (one patch). Each
flip: `rm` or `touch` the file through `kubectl exec`; t=0 just before that command
starts (the file changes while it runs, and the probe may see it before kubectl
returns), so the label latency includes part of the exec, whose own time is printed.
A watch of the pod and one of the Service's EndpointSlices (tests/cluster/kube.py,
`Watch`) timestamp what follows:
- label: the event carrying the new label value (the daemon's write);
- Ready: the event where the kubelet's Ready follows (it recomputes Ready from the
  gate's condition and writes the pod status);
- endpoint: the EndpointSlice event whose endpoint's `ready` follows.

The rollout: `kubectl set env` on the DaemonSet until `rollout status` returns, and
the daemon's pods/status writes in the audit log meanwhile (all namespaces). Memory:
the daemon container's cgroup (`memory.usage_in_bytes`, v1) and the process's VmRSS,
after the flips.

    python bench/cluster_flips.py                   # 20 flips per backend
    python bench/cluster_flips.py --flips 40 --backends cri
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.cluster.install import STATE, Addon, Cluster
from tests.cluster.kube import (
    Kubectl,
    Watch,
    busybox_pod,
    create_namespace,
    marker,
    processes_with_args,
    wait_for,
)
from tests.podfields import condition, labels_of

NS = "bench-flips"
EXEC_TIMES: list[float] = []  # how long each `kubectl exec` that changed the file took
GATE = "probemarker.bench/gate"


def _pod_state(pod: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """(the label, the gate's condition, Ready)."""
    gate, ready = (condition(pod, GATE) or {}), (condition(pod, "Ready") or {})
    return labels_of(pod).get("probe"), gate.get("status"), ready.get("status")


def _endpoint_ready(item: dict[str, Any]) -> Any:
    states = [e.get("conditions", {}).get("ready") for e in item.get("endpoints") or []]
    return states[0] if len(states) == 1 else None


def flips(kubectl: Kubectl, count: int, seed: int) -> dict[str, list[float]]:
    pods = Watch(kubectl, f"/api/v1/namespaces/{NS}/pods?fieldSelector=metadata.name%3Dgate")
    slices = Watch(
        kubectl,
        f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices?"
        "labelSelector=kubernetes.io%2Fservice-name%3Dgate",
    )
    with pods, slices:
        return _flips(kubectl, pods, slices, count, seed)


def _flips(
    kubectl: Kubectl, pods: Watch, slices: Watch, count: int, seed: int
) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"label": [], "ready": [], "endpoint": []}
    present = True
    rng = random.Random(seed)
    for _ in range(count):
        present = not present
        label, ready, endpoint = _flip(kubectl, pods, slices, present=present)
        out["label"].append(label)
        out["ready"].append(ready - label)
        out["endpoint"].append(endpoint - ready)
        # a random pause: flips at a fixed pace would lock onto the probe's period and
        # measure one phase of it; the phase must be uniform over the period
        time.sleep(rng.uniform(0.3, 1.3))
    return out


def _flip(kubectl: Kubectl, pods: Watch, slices: Watch, *, present: bool) -> tuple[float, ...]:
    """One flip: (file -> label, file -> Ready, file -> endpoint), in seconds."""
    word = "ok" if present else "bad"
    status = "True" if present else "False"
    # t=0 before the exec: the probe may see the file change before kubectl returns
    t0 = time.monotonic()
    kubectl.run("-n", NS, "exec", "gate", "--", "touch" if present else "rm", "/tmp/ok")
    EXEC_TIMES.append(time.monotonic() - t0)
    found = []
    for watch, test in (
        (pods, lambda p: _pod_state(p)[0] == word),
        (pods, lambda p: _pod_state(p)[2] == status),
        (slices, lambda s: _endpoint_ready(s) is present),
    ):
        found.append(
            wait_for(
                lambda watch=watch, test=test: watch.first_after(t0, test),
                lambda at: at is not None,
                timeout=30,
                what=f"flip to {word}",
            )
        )
    return tuple(found)


def memory() -> tuple[float, float]:
    found = processes_with_args(
        ["/opt/probemarker/bin/python3", "/opt/probemarker/bin/probemarker", "run"]
    )
    if len(found) != 1:
        raise SystemExit(f"not one daemon process `probemarker run` on this host: {found}")
    pid = found[0]
    status = Path(f"/proc/{pid}/status").read_text()
    rss = next(int(x.split()[1]) for x in status.splitlines() if x.startswith("VmRSS:")) / 1024
    line = next(x for x in Path(f"/proc/{pid}/cgroup").read_text().splitlines() if ":memory:" in x)
    group = Path("/sys/fs/cgroup/memory") / line.split(":", 2)[2].lstrip("/")
    usage = int((group / "memory.usage_in_bytes").read_text()) / 2**20
    return usage, rss


def _summary(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    p90 = ms[min(len(ms) - 1, int(len(ms) * 0.9))]
    return f"median {statistics.median(ms):6.0f} ms  p90 {p90:6.0f} ms  max {ms[-1]:6.0f} ms  (n={len(ms)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flips", type=int, default=20)
    parser.add_argument("--backends", default="api,cri")
    parser.add_argument("--seed", type=int, default=23, help="of the pauses between flips")
    args = parser.parse_args()
    cluster = Cluster.at(STATE)
    kubectl = cluster.kubectl
    create_namespace(kubectl, NS, fresh=True)
    pod = busybox_pod(
        "gate", NS, script="touch /tmp/ok && exec sleep 2147483647", labels={"app": "gate"},
        spec={"readinessGates": [{"conditionType": GATE}]},
    )  # fmt: skip
    service = {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "gate", "namespace": NS},
        "spec": {"selector": {"app": "gate"}, "ports": [{"port": 80}]},
    }  # fmt: skip
    probe = {"exec": {"command": ["cat", "/tmp/ok"]}}
    kubectl.apply(pod, service, marker("gate", NS, app="gate", probe=probe, condition_type=GATE))
    addon = Addon(cluster, Path(tempfile.mkdtemp()))
    try:
        for backend in args.backends.split(","):
            addon.use(backend)
            wait_for(
                lambda: _pod_state(kubectl.get("pod", "gate", NS)),
                lambda state: state == ("ok", "True", "True"),
                timeout=60,
                what="pod marked ok and Ready",
            )
            found = flips(kubectl, args.flips, args.seed)
            print(f"backend {backend}: {args.flips} flips, period 1 s, thresholds 1")
            print(f"  kubectl exec (rm/touch) itself   {_summary(EXEC_TIMES)}")
            EXEC_TIMES.clear()
            print(f"  exec started -> label written    {_summary(found['label'])}")
            print(f"  label/condition -> kubelet Ready {_summary(found['ready'])}")
            print(f"  Ready -> EndpointSlice ready     {_summary(found['endpoint'])}")
            usage, rss = memory()
            print(f"  daemon memory: cgroup {usage:.1f} MiB, VmRSS {rss:.1f} MiB")
        mark = cluster.audit.mark()
        started = time.monotonic()
        kubectl.run("-n", "probemarker-system", "set", "env", "ds/probemarker",
                    f"PROBEMARKER_CLEANUP_DELAY_SECONDS={30 + int(started) % 7}")  # fmt: skip
        addon.rolled_out()
        took = time.monotonic() - started
        writes = cluster.audit.daemon_writes(mark)
        print(
            f"rollout (env change, 1 node, minReadySeconds 10): {took:.1f} s, {len(writes)} pod writes"
        )
    finally:
        addon.use("api")
        kubectl.run("delete", "namespace", NS, "--wait=false", check=False)
    print(f"command: python bench/cluster_flips.py --flips {args.flips} --backends {args.backends}")


if __name__ == "__main__":
    main()
