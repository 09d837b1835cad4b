"""The cluster and the add-on on it, for the cluster suite (tests/cluster/conftest.py)
and bench/cluster_flips.py alike.

Stage: a test helper. `overlay` is pure: the overlay's folder, the exec backend and
the node's containerd socket in, kustomization.yaml text out, as
docs/installation.md tells users to write it: `resources` the checkout's manifests/,
the image renamed to the one loaded into the node, the `node-scope` component, and
for the `cri` backend the `cri` component with the hostPath of this node's socket
(not containerd's default path; the path inside the pod stays, as docs/cri.md shows
for other sockets). `Cluster` is hack/cluster.sh's cluster, read from its state
folder, and only once its API server answers on an address of this host
(`reachable`: a cluster that is down sends nothing off the machine); `Addon` installs
the overlay with `kubectl apply -k` and waits for the rollout.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from probemarker import __version__
from tests.cluster.kube import DAEMON_NAMESPACE, REPO, SCRIPT, AuditLog, Kubectl, wait_for
from tests.podfields import condition

IMAGE_NAME = "localhost/probemarker"
IMAGE = f"{IMAGE_NAME}:{__version__}"
STATE = Path(os.environ.get("PROBEMARKER_CLUSTER_DIR", "/tmp/probemarker-cluster"))
# The user's Kubernetes server binaries (docs/development.md); none without it
KUBE_BIN_SETTING = os.environ.get("PROBEMARKER_KUBE_BIN", "")
KUBE_BIN = Path(KUBE_BIN_SETTING) if KUBE_BIN_SETTING else None


# The node-scope component needs the token's node name (ServiceAccountTokenPodNodeInfo,
# beta in 1.30) and ValidatingAdmissionPolicy v1 (1.30); MutatingAdmissionPolicy exists
# from 1.32 (docs/installation.md).
NODE_SCOPE_MINOR = 30
MUTATING_POLICY_MINOR = 32


def needs_release(cluster: Cluster, minor: int, what: str) -> None:
    """Skip (never fail, even with PROBEMARKER_TEST_REQUIRE_CLUSTER) what the cluster's
    release does not have, naming the release and the need."""
    have = cluster.minor()
    if have < minor:
        pytest.skip(f"{what} needs Kubernetes 1.{minor} or later; this cluster is 1.{have}")


class ClusterDown(SystemExit):
    """hack/cluster.sh's cluster is not up: one line saying what is missing and the fix.
    A SystemExit, so that a bench meeting it ends with that line (exit status 1) and no
    traceback; in the suite it fails the test that needed the cluster."""

    def __str__(self) -> str:
        return str(self.code)


def reachable(kubeconfig: Path, *, timeout: float = 2.0) -> None:
    """Raise ClusterDown unless the kubeconfig's API server listens on an address of
    this host. The address is checked first by binding a socket to it, which sends
    nothing: the harness's addresses (its bridge, 10.246.0.0/16) route off the machine
    once the bridge is gone, so a stale kubeconfig must fail here, not on the wire."""
    fix = "start it with `hack/cluster.sh up` (docs/development.md)"
    try:
        config = yaml.safe_load(kubeconfig.read_text())
    except FileNotFoundError:
        raise ClusterDown(f"the cluster is down: no {kubeconfig}; {fix}") from None
    server = _server(config)
    if server is None:
        raise ClusterDown(f"the cluster is down: {kubeconfig} names no server; {fix}")
    url = urlsplit(server)
    host, port = url.hostname or "", url.port or 443
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise ClusterDown(
            f"{kubeconfig}: server {server} is not an address of this host; {fix}"
        ) from None
    if not _is_local(address):
        raise ClusterDown(
            f"the cluster is down: {server} (in {kubeconfig}) is no address of this host "
            f"(its bridge is gone); {fix}"
        )
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as error:
        why = error.strerror or type(error).__name__
        raise ClusterDown(
            f"the cluster is down: nothing answers at {server} ({why}); {fix}"
        ) from None


def _server(config: Any) -> str | None:
    """The current context's cluster server in a kubeconfig, or None."""
    if not isinstance(config, dict):
        return None
    contexts = {c.get("name"): c.get("context") or {} for c in config.get("contexts") or []}
    clusters = {c.get("name"): c.get("cluster") or {} for c in config.get("clusters") or []}
    context = contexts.get(config.get("current-context")) or {}
    server = clusters.get(context.get("cluster"), {}).get("server")
    return server if isinstance(server, str) else None


def _is_local(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether `address` is assigned on this host: a bind succeeds only then."""
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((str(address), 0))
        except OSError as error:
            if error.errno == errno.EADDRNOTAVAIL:
                return False
            raise
    return True


def run_script(*args: str, timeout: float) -> str:
    """`hack/cluster.sh ARGS` on STATE with the user's PROBEMARKER_KUBE_BIN; its stdout
    (fails on an error)."""
    done = subprocess.run(
        ["bash", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "PROBEMARKER_CLUSTER_DIR": str(STATE)},
    )
    assert done.returncode == 0, f"hack/cluster.sh {' '.join(args)}: {done.stderr[-3000:]}"
    return done.stdout


@dataclass
class Cluster:
    kubectl: Kubectl
    state: Path
    audit: AuditLog

    @classmethod
    def at(cls, state: Path) -> Cluster:
        """The cluster hack/cluster.sh keeps in `state`, once its API server answers on
        this host (ClusterDown, one line, before any request otherwise)."""
        reachable(state / "kubeconfig")
        return cls(Kubectl(state / "kubeconfig"), state, AuditLog(state / "logs" / "audit.log"))

    def minor(self) -> int:
        """The API server's minor release (28 for Kubernetes 1.28): the suite runs on
        any release from 1.28, and what a release lacks is skipped by name."""
        version = self.kubectl.json("version")["serverVersion"]
        return int(str(version["minor"]).rstrip("+"))

    def socket(self) -> Path:
        """containerd's socket (hack/cri-runtime.sh keeps it under /run for a long state dir)."""
        short = self.state / "cri" / "short-run-dir"
        run = Path(short.read_text().strip()) if short.exists() else self.state / "cri" / "run"
        return run / "containerd.sock"

    def script(self, *args: str, timeout: float = 180) -> str:
        return run_script(*args, timeout=timeout)


def _live(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


@dataclass
class Addon:
    """The add-on as installed by `kubectl apply -k` on an overlay in `folder`."""

    cluster: Cluster
    folder: Path
    backend: str = ""

    def use(self, backend: str) -> None:
        """Install with this exec backend (a rollout when it changes)."""
        if backend == self.backend:
            return
        socket = self.cluster.socket()
        node_scope = self.cluster.minor() >= NODE_SCOPE_MINOR
        (self.folder / "kustomization.yaml").write_text(
            overlay(self.folder, backend, socket, node_scope=node_scope)
        )
        self.cluster.kubectl.run("apply", "-k", str(self.folder), timeout=120)
        self.rolled_out()
        self.backend = backend

    def rolled_out(self, timeout: float = 180) -> None:
        self.cluster.kubectl.run(
            "-n", DAEMON_NAMESPACE, "rollout", "status", "daemonset/probemarker",
            f"--timeout={timeout:g}s", timeout=timeout + 10,
        )  # fmt: skip

    def daemon_pod(self) -> dict[str, Any]:
        pods = wait_for(
            lambda: _live(
                self.cluster.kubectl.json(
                    "-n",
                    DAEMON_NAMESPACE,
                    "get",
                    "pods",
                    "-l",
                    "app.kubernetes.io/name=probemarker",
                )["items"]
            ),
            lambda live: len(live) == 1,
            timeout=60,
            what="one daemon pod",
        )
        return pods[0]

    def replace_daemon_pod(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Delete the daemon pod; (the old one, its Ready replacement)."""
        old = self.daemon_pod()
        self.cluster.kubectl.run(
            "-n", DAEMON_NAMESPACE, "delete", "pod", old["metadata"]["name"], "--wait=true"
        )
        self.rolled_out()
        new = wait_for(
            self.daemon_pod,
            lambda pod: (
                pod["metadata"]["uid"] != old["metadata"]["uid"]
                and (condition(pod, "Ready") or {}).get("status") == "True"
            ),
            timeout=60,
            what="the replacement daemon pod Ready",
        )
        return old, new


# Every Addon the suite made (conftest's `addon`): a module that removes the kustomize
# install (tests/cluster/test_helm.py) resets them, so the next `use` installs again.
ADDONS: list[Addon] = []


def overlay(folder: Path, backend: str, socket: Path, *, node_scope: bool = True) -> str:
    """The overlay's kustomization.yaml; `node_scope` adds that component, as
    docs/installation.md says to on Kubernetes 1.30 and later."""
    if backend not in ("api", "cri"):
        raise ValueError(f"backend {backend!r}: api or cri")
    manifests = os.path.relpath(REPO / "manifests", folder)
    components = [f"{manifests}/components/node-scope"] if node_scope else []
    patches = []
    if backend == "cri":
        components.append(f"{manifests}/components/cri")
        volume = {"name": "cri-socket", "hostPath": {"path": str(socket), "type": "Socket"}}
        daemonset = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "probemarker"},
            "spec": {"template": {"spec": {"volumes": [volume]}}},
        }
        patches.append(
            {
                "target": {"kind": "DaemonSet", "name": "probemarker"},
                "patch": yaml.safe_dump(daemonset),
            }
        )
    return yaml.safe_dump(
        {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [manifests],
            "components": components,
            "patches": patches,
            "images": [
                {
                    "name": "ghcr.io/probemarker/probemarker",
                    "newName": IMAGE_NAME,
                    "newTag": __version__,
                }
            ],
        }
    )
