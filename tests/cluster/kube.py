"""The cluster suite's hands: kubectl against the real cluster, the API server's audit
log, host processes and cgroups of the node.

Stage: a test helper. Input: the kubeconfig and the state folder `hack/cluster.sh`
made. Output: JSON objects, counts, waits that end at a deadline with what was last
seen. Every call has a time bound; nothing here retries a failure silently.

Waiting: `wait_for` polls a read (kubectl get) until a predicate holds. A real cluster
has no event this suite can await more cheaply than a watch, and a watch through
kubectl is a process per wait; polling every 0.1 s keeps the suite simple and the
figures it reports come from `bench/cluster_flips.py`, which watches.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from tests.podfields import condition, labels_of

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "hack" / "cluster.sh"
NODE_NAME = "probemarker-node"
BUSYBOX = "localhost/probemarker/busybox:cri-test"  # hack/cri-runtime.sh imports it
DAEMON_NAMESPACE = "probemarker-system"
DAEMON_USER = "system:serviceaccount:probemarker-system:probemarker"

T = TypeVar("T")


class KubectlError(AssertionError):
    def __init__(self, args: Sequence[str], done: subprocess.CompletedProcess[str]) -> None:
        super().__init__(
            f"kubectl {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}"
        )
        self.stderr = done.stderr


@dataclass(frozen=True)
class Kubectl:
    kubeconfig: Path

    def run(
        self, *args: str, stdin: str | None = None, timeout: float = 60, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise KubectlError(args, done)
        return done

    def json(self, *args: str, timeout: float = 30) -> Any:
        return json.loads(self.run(*args, "-o", "json", timeout=timeout).stdout)

    def get(self, kind: str, name: str, namespace: str | None = None) -> Any:
        where = ["-n", namespace] if namespace else []
        return self.json("get", kind, name, *where)

    def apply(self, *documents: Mapping[str, Any]) -> None:
        self.run("apply", "-f", "-", stdin=yaml.safe_dump_all(list(documents)))

    def raw(self, path: str, timeout: float = 30) -> str:
        return self.run("get", "--raw", path, timeout=timeout).stdout


def wait_for(
    read: Callable[[], T],
    done: Callable[[T], bool],
    *,
    timeout: float,
    what: str,
    interval: float = 0.1,
) -> T:
    """Poll `read` until `done(value)`; on timeout, fail naming `what` and the last value."""
    end = time.monotonic() + timeout
    while True:
        value = read()
        if done(value):
            return value
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {timeout:g} s; last seen: {value!r}"[:4000])
        time.sleep(interval)


# -- pods and markers -------------------------------------------------------------------


def busybox_pod(
    name: str,
    namespace: str,
    *,
    script: str,
    labels: Mapping[str, str],
    extra_container: Mapping[str, Any] | None = None,
    spec: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A pod of the busybox image running `sh -c script`, bound to the node by the scheduler."""
    container: dict[str, Any] = {
        "name": "main",
        "image": BUSYBOX,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", script],
        **(extra_container or {}),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [container], **(spec or {})},
    }


def marker(
    name: str,
    namespace: str,
    *,
    app: str,
    probe: Mapping[str, Any],
    label: str | None = "probe",
    condition_type: str | None = None,
    container: str = "main",
) -> dict[str, Any]:
    """A PodProbeMarker with one probe: label `label=ok|bad`, and/or a condition."""
    item: dict[str, Any] = {
        "name": "p",
        "containerName": container,
        "probe": {
            "periodSeconds": 1,
            "timeoutSeconds": 1,
            "successThreshold": 1,
            "failureThreshold": 1,
            **probe,
        },
    }
    if label is not None:
        item["markerPolicy"] = [
            {"state": "Succeeded", "labels": {label: "ok"}},
            {"state": "Failed", "labels": {label: "bad"}},
        ]
    if condition_type is not None:
        item["podConditionType"] = condition_type
    return {
        "apiVersion": "probemarker.io/v1alpha1",
        "kind": "PodProbeMarker",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": {"app": app}}, "probes": [item]},
    }


def pod_ready(
    kubectl: Kubectl, namespace: str, name: str, *, timeout: float = 60
) -> dict[str, Any]:
    return wait_for(
        lambda: kubectl.get("pod", name, namespace),
        lambda pod: (condition(pod, "ContainersReady") or {}).get("status") == "True",
        timeout=timeout,
        what=f"pod {namespace}/{name} running",
    )


def wait_label(
    kubectl: Kubectl, namespace: str, name: str, key: str, value: str | None, *, timeout: float = 30
) -> dict[str, Any]:
    return wait_for(
        lambda: kubectl.get("pod", name, namespace),
        lambda pod: labels_of(pod).get(key) == value,
        timeout=timeout,
        what=f"label {key}={value} on pod {namespace}/{name}",
    )


def exec_in(kubectl: Kubectl, namespace: str, pod: str, *command: str) -> str:
    return kubectl.run("exec", "-n", namespace, pod, "--", *command, timeout=30).stdout


# -- the audit log: who wrote what ------------------------------------------------------


@dataclass(frozen=True)
class AuditLog:
    """The API server's audit log (`hack/cluster.sh` records every write by a
    ServiceAccount of probemarker-system, and exec requests, at Metadata level)."""

    path: Path

    def mark(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def events(self, since: int) -> Iterator[dict[str, Any]]:
        if not self.path.exists():
            return
        with self.path.open("rb") as handle:
            handle.seek(since)
            for line in handle:
                if line.strip():
                    yield json.loads(line)

    def daemon_writes(self, since: int, *, namespace: str | None = None) -> list[dict[str, Any]]:
        """The daemon's pod writes (pods/status patches) since `mark`, in one namespace."""
        out = []
        for event in self.events(since):
            ref = event.get("objectRef") or {}
            if (
                event.get("user", {}).get("username") == DAEMON_USER
                and ref.get("resource") == "pods"
                and ref.get("subresource") == "status"
                and event.get("verb") in ("patch", "update")
                and (namespace is None or ref.get("namespace") == namespace)
            ):
                out.append(event)
        return out


# -- the node's processes ---------------------------------------------------------------


def processes_with_args(args: Sequence[str]) -> list[int]:
    """PIDs on this host whose argv is exactly `args` (the node's containers share the
    host's PID space as seen from the host)."""
    wanted = ("\0".join(args) + "\0").encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as handle:
                if handle.read() == wanted:
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def parent_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise AssertionError(f"no PPid in /proc/{pid}/status")
