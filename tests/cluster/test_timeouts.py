"""Exec timeouts on a real runtime (issue 23).

- A probe whose command hangs (`sleep 30`, timeoutSeconds 1, periodSeconds 2): the
  command outlives its timeout (closing the exec stream does not kill it on the API
  server -> kubelet -> containerd path), so the daemon must not start the next one
  while it runs: at most one in the container at any moment, on each backend.
- A slow runtime (the target pod's containerd-shim throttled to 3 % of a CPU through
  its cgroup): the kubelet's own exec readinessProbe, identical to the marker's probe,
  runs through CRI ExecSync, whose timeout the runtime counts from the command's start;
  the marker on the cri backend must agree with it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from tests.cluster.install import Addon, Cluster
from tests.cluster.kube import (
    busybox_pod,
    marker,
    parent_of,
    pod_ready,
    processes_with_args,
    wait_label,
)
from tests.podfields import condition, labels_of

pytestmark = pytest.mark.timeout(600)


@pytest.mark.parametrize("backend", ["api", "cri"])  # then the slow runtime test, in cri
def test_a_hanging_command_runs_at_most_once_at_a_time(
    cluster: Cluster, addon: Addon, namespace: str, backend: str
) -> None:
    addon.use(backend)
    kubectl = cluster.kubectl
    probe = {"exec": {"command": ["sleep", "30"]}, "timeoutSeconds": 1, "periodSeconds": 2}
    kubectl.apply(
        busybox_pod("hang", namespace, script="exec sleep 2147483647", labels={"app": "hang"}),
        marker("hang", namespace, app="hang", probe=probe),
    )
    pod_ready(kubectl, namespace, "hang")
    wait_label(kubectl, namespace, "hang", "probe", "bad")
    most = 0
    end = time.monotonic() + 16  # 8 periods; before the fix: 5, 9, 13 at 8, 16, 24 s
    while time.monotonic() < end:
        most = max(most, len(processes_with_args(["sleep", "30"])))
        time.sleep(0.1)
    assert most <= 1, f"{most} `sleep 30` ran at once in the container ({backend} backend)"
    assert labels_of(kubectl.get("pod", "hang", namespace))["probe"] == "bad"


@contextmanager
def throttled(pid: int, percent: int) -> Iterator[None]:
    """Move process `pid` (all its threads) into a cgroup v1 cpu group of its own,
    limited to `percent` of one CPU; back where it was afterwards."""
    root = Path("/sys/fs/cgroup/cpu")
    if not (root / "cgroup.procs").exists():
        pytest.fail("no cgroup v1 cpu hierarchy at /sys/fs/cgroup/cpu: cannot throttle the shim")
    line = next(
        x for x in Path(f"/proc/{pid}/cgroup").read_text().splitlines() if x.split(":")[1] == "cpu"
    )
    home = root / line.split(":", 2)[2].lstrip("/")
    group = root / f"probemarker-slow-{pid}"
    group.mkdir(exist_ok=True)
    try:
        (group / "cpu.cfs_period_us").write_text("100000")
        (group / "cpu.cfs_quota_us").write_text(str(1000 * percent))
        (group / "cgroup.procs").write_text(str(pid))
        yield
    finally:
        # the shim's children started meanwhile (runc for each exec) are in the group too
        for _ in range(50):
            for moved in (group / "cgroup.procs").read_text().split():
                with suppress(OSError):  # gone meanwhile
                    (home / "cgroup.procs").write_text(moved)
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise AssertionError(f"{group}: still busy after its processes were moved back")


@pytest.mark.timeout(300)
def test_under_a_slow_runtime_the_marker_agrees_with_the_kubelet(
    cluster: Cluster, addon: Addon, namespace: str
) -> None:
    addon.use("cri")
    kubectl = cluster.kubectl
    probe = {"exec": {"command": ["cat", "/tmp/ok"]}}
    kubelet_probe = {**probe, "periodSeconds": 1, "timeoutSeconds": 1, "failureThreshold": 1}
    pod = busybox_pod(
        "slow",
        namespace,
        script="touch /tmp/ok && exec sleep 2147483645",
        labels={"app": "slow"},
        extra_container={"readinessProbe": kubelet_probe},
    )
    kubectl.apply(pod, marker("slow", namespace, app="slow", probe=probe))
    pod_ready(kubectl, namespace, "slow")
    wait_label(kubectl, namespace, "slow", "probe", "ok")
    (init,) = processes_with_args(["sleep", "2147483645"])
    shim = parent_of(init)
    assert Path(f"/proc/{shim}/comm").read_text().startswith("containerd-shim"), shim
    seen: set[tuple[str | None, str | None]] = set()
    with throttled(shim, 3):
        end = time.monotonic() + 30
        while time.monotonic() < end:
            now = kubectl.get("pod", "slow", namespace)
            seen.add(((condition(now, "Ready") or {}).get("status"), labels_of(now).get("probe")))
            time.sleep(0.2)
    kubelet_failed = any(ready != "True" for ready, _ in seen)
    marker_failed = any(label != "ok" for _, label in seen)
    assert marker_failed == kubelet_failed, f"(kubelet Ready, marker label) seen: {sorted(seen)}"
