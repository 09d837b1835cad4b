"""The cluster suite's hands: kubectl against the real cluster, the API server's audit
log, host processes and cgroups of the node.

Stage: a test helper. Input: the kubeconfig and the state folder `hack/cluster.sh`
made. Output: JSON objects, counts, waits that end at a deadline with what was last
seen. Every call has a time bound; nothing here retries a failure silently.

Waiting: `wait_for` polls a read (kubectl get) until a predicate holds: a kubectl
watch would be a process per wait, and polling every 0.1 s keeps the waits simple.
What must not be missed (a label that flips and flips back) is read by `Watch`, a
raw watch that keeps every event with its arrival time (the suite's flip counts,
bench/cluster_flips.py's latencies).
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import subprocess
import tempfile
import threading
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


# -- a watch ----------------------------------------------------------------------------


class Watch(threading.Thread):
    """A LIST and a watch of `path` (a collection, with its query) with the admin
    credentials; every object seen, listed or in an event, is kept with the time it
    arrived (`seen`). It lists again after each watch ends (`timeoutSeconds` 5, so
    that `stop` is heard), after an ERROR event (a watch cache behind etcd answers
    "Too large resource version") and after a connection error (an API server
    restarting), so an object's state is never missed across a gap."""

    def __init__(self, kubectl: Kubectl, path: str) -> None:
        super().__init__(daemon=True)
        config = kubectl.json("config", "view", "--raw", "--minify")
        cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
        host, port = cluster["server"].removeprefix("https://").rsplit(":", 1)
        self._address = (host, int(port))
        with tempfile.TemporaryDirectory() as folder:
            files = {}
            for key, source in (
                ("certificate-authority-data", cluster),
                ("client-certificate-data", user),
                ("client-key-data", user),
            ):
                files[key] = Path(folder) / key
                files[key].write_bytes(base64.b64decode(source[key]))
            self._context = ssl.create_default_context(
                cafile=str(files["certificate-authority-data"])
            )
            self._context.load_cert_chain(
                str(files["client-certificate-data"]), str(files["client-key-data"])
            )
        self._path = path
        self._stopping = threading.Event()
        self.seen: list[tuple[float, dict[str, Any]]] = []
        self.listed = threading.Event()  # the first LIST is in `seen`

    def run(self) -> None:
        sep = "&" if "?" in self._path else "?"
        while not self._stopping.is_set():
            connection = http.client.HTTPSConnection(
                *self._address, context=self._context, timeout=30
            )
            try:
                connection.request("GET", self._path)
                listed = json.loads(connection.getresponse().read())
                now = time.monotonic()
                self.seen.extend((now, item) for item in listed["items"])
                self.listed.set()
                version = listed["metadata"]["resourceVersion"]
                query = f"watch=1&timeoutSeconds=5&resourceVersion={version}"
                connection.request("GET", f"{self._path}{sep}{query}")
                answer = connection.getresponse()
                while line := answer.readline():
                    event = json.loads(line)
                    if event["type"] == "ERROR":
                        break
                    self.seen.append((time.monotonic(), event["object"]))
            except (OSError, http.client.HTTPException, ValueError, KeyError):
                self._stopping.wait(0.5)  # the API server away: list again when it is back
            finally:
                connection.close()

    def __enter__(self) -> Watch:
        self.start()
        if not self.listed.wait(30):
            raise AssertionError(f"watch {self._path}: no LIST within 30 s")
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopping.set()
        self.join(timeout=15)

    def first_after(self, since: float, test: Callable[[dict[str, Any]], bool]) -> float | None:
        """Seconds from `since` to the first object seen then that passes `test`."""
        for at, item in list(self.seen):
            if at >= since and test(item):
                return at - since
        return None


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


def create_namespace(kubectl: Kubectl, name: str, *, fresh: bool = False) -> None:
    """Create namespace `name` (`fresh`: deleting it first, with what a run before left
    in it) and wait for its default ServiceAccount, which pods need."""
    if fresh:
        kubectl.run("delete", "namespace", name, "--ignore-not-found", "--wait=true", timeout=180)
    kubectl.run("create", "namespace", name)
    wait_for(
        lambda: kubectl.run("-n", name, "get", "serviceaccount", "default", check=False),
        lambda done: done.returncode == 0,
        timeout=30,
        what=f"ServiceAccount {name}/default",
    )


def exec_in(kubectl: Kubectl, namespace: str, pod: str, *command: str) -> str:
    return kubectl.run("exec", "-n", namespace, pod, "--", *command, timeout=30).stdout


# -- the audit log: who wrote what ------------------------------------------------------


@dataclass(frozen=True)
class AuditLog:
    """The API server's audit log (`hack/cluster.sh` records every request by a
    ServiceAccount of probemarker-system or kruise-system, at Metadata level)."""

    path: Path

    def mark(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def events(self, since: int, *, until: int | None = None) -> Iterator[dict[str, Any]]:
        """The events logged between two marks (`until`: to the end)."""
        if not self.path.exists():
            return
        with self.path.open("rb") as handle:
            handle.seek(since)
            for line in handle:
                if until is not None and handle.tell() > until:
                    return
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
