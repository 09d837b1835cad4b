"""Fixtures for the tests against a real single-node cluster (marker `cluster`).

The cluster is `hack/cluster.sh`'s (a kubelet, containerd + runc, the control plane, a
CNI bridge), the image is `hack/build-image.sh`'s, loaded into the node's containerd,
and the add-on is installed with `kubectl apply -k` on an overlay, as
docs/installation.md tells users. The tests skip, naming what is missing, without
root, kubectl, podman or the Kubernetes binaries (`$PROBEMARKER_KUBE_BIN`, default
`../shared/realk8s/bin`); with PROBEMARKER_TEST_REQUIRE_CLUSTER=1 (CI) they fail
instead. docs/development.md ("A real cluster") says how to run them.

- `cluster`: the running cluster (brought up for this package, taken down after it;
  PROBEMARKER_TEST_CLUSTER_KEEP=1 keeps it for the next run) with the image loaded;
- `addon`: the add-on installed; `addon.use("api" | "cri")` switches the exec backend
  (an overlay with the `cri` component; a DaemonSet rollout);
- `namespace`: a namespace of the test's own, deleted after it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from probemarker import __version__
from tests.cluster.install import IMAGE, IMAGE_NAME, overlay
from tests.cluster.kube import (
    DAEMON_NAMESPACE,
    REPO,
    SCRIPT,
    AuditLog,
    Kubectl,
    wait_for,
)

STATE = Path(os.environ.get("PROBEMARKER_CLUSTER_DIR", "/tmp/probemarker-cluster"))
KUBE_BIN = Path(os.environ.get("PROBEMARKER_KUBE_BIN", REPO.parent / "shared" / "realk8s" / "bin"))


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "not root: the cluster runs a kubelet and containerd (hack/cluster.sh up)"
    for tool, why in (
        ("kubectl", "kubectl"),
        ("podman", "podman (apt-get install podman mmdebstrap)"),
    ):
        if shutil.which(tool) is None:
            return f"{why} is not installed"
    names = ("kube-apiserver", "kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy")
    if not all((KUBE_BIN / f"{n}.xz").exists() or (KUBE_BIN / n).exists() for n in names):
        return (
            f"no Kubernetes binaries in {KUBE_BIN}: set PROBEMARKER_KUBE_BIN (docs/development.md)"
        )
    return None


WHY_NOT = _why_not()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/cluster/" in str(item.path).replace(os.sep, "/"):
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(autouse=True)
def _available() -> None:
    if WHY_NOT is None:
        return
    if os.environ.get("PROBEMARKER_TEST_REQUIRE_CLUSTER") == "1":
        pytest.fail(f"PROBEMARKER_TEST_REQUIRE_CLUSTER=1, but no real cluster: {WHY_NOT}")
    pytest.skip(f"no real cluster: {WHY_NOT}")


def _script(*args: str, timeout: float) -> str:
    done = subprocess.run(
        ["bash", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={
            **os.environ,
            "PROBEMARKER_KUBE_BIN": str(KUBE_BIN),
            "PROBEMARKER_CLUSTER_DIR": str(STATE),
        },
    )
    assert done.returncode == 0, f"hack/cluster.sh {' '.join(args)}: {done.stderr[-3000:]}"
    return done.stdout


@dataclass
class Cluster:
    kubectl: Kubectl
    state: Path
    audit: AuditLog

    def socket(self) -> Path:
        """containerd's socket (hack/cri-runtime.sh keeps it under /run for a long state dir)."""
        short = self.state / "cri" / "short-run-dir"
        run = Path(short.read_text().strip()) if short.exists() else self.state / "cri" / "run"
        return run / "containerd.sock"

    def script(self, *args: str, timeout: float = 180) -> str:
        return _script(*args, timeout=timeout)


@pytest.fixture(scope="package")
def cluster() -> Iterator[Cluster]:
    out = _script("up", timeout=300)
    last = out.strip().splitlines()[-1]
    match = re.fullmatch(r"KUBECONFIG=(.+)", last)
    assert match, f"hack/cluster.sh up: the last line is not KUBECONFIG=...: {last!r}"
    try:
        if os.environ.get("PROBEMARKER_TEST_CLUSTER_SKIP_BUILD") != "1":
            build = subprocess.run(
                ["bash", str(REPO / "hack" / "build-image.sh"), "--no-verify", "--image", IMAGE_NAME,
                 "--tag", __version__],
                capture_output=True, text=True, timeout=900, check=False,
            )  # fmt: skip
            assert build.returncode == 0, f"hack/build-image.sh: {build.stderr[-3000:]}"
        _script("load-image", IMAGE, timeout=300)
        yield Cluster(Kubectl(Path(match.group(1))), STATE, AuditLog(STATE / "logs" / "audit.log"))
    finally:
        if os.environ.get("PROBEMARKER_TEST_CLUSTER_KEEP") != "1":
            _script("down", timeout=300)


@dataclass
class Addon:
    """The add-on as installed by `kubectl apply -k` on an overlay in `folder`."""

    cluster: Cluster
    folder: Path
    backend: str = ""
    applies: list[str] = field(default_factory=list)

    def use(self, backend: str) -> None:
        if backend == self.backend:
            return
        socket = self.cluster.socket()
        (self.folder / "kustomization.yaml").write_text(overlay(self.folder, backend, socket))
        kubectl = self.cluster.kubectl
        done = kubectl.run("apply", "-k", str(self.folder), timeout=120)
        self.applies.append(done.stdout + done.stderr)
        self.rolled_out()
        self.backend = backend

    def rolled_out(self, timeout: float = 180) -> None:
        self.cluster.kubectl.run(
            "-n", DAEMON_NAMESPACE, "rollout", "status", "daemonset/probemarker",
            f"--timeout={timeout:g}s", timeout=timeout + 10,
        )  # fmt: skip

    def daemon_pod(self) -> dict[str, object]:
        pods = wait_for(
            lambda: self.cluster.kubectl.json(
                "-n", DAEMON_NAMESPACE, "get", "pods", "-l", "app.kubernetes.io/name=probemarker"
            )["items"],
            lambda items: (
                len([p for p in items if not p["metadata"].get("deletionTimestamp")]) == 1
            ),
            timeout=60,
            what="one daemon pod",
        )
        return next(p for p in pods if not p["metadata"].get("deletionTimestamp"))


@pytest.fixture(scope="package")
def addon(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Addon:
    folder = tmp_path_factory.mktemp("overlay")
    installed = Addon(cluster, folder)
    installed.use("api")
    return installed


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    stem = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[:40].strip("-")
    name = f"t-{stem}-{uuid.uuid4().hex[:5]}"
    cluster.kubectl.run("create", "namespace", name)
    wait_for(
        lambda: cluster.kubectl.run("-n", name, "get", "serviceaccount", "default", check=False),
        lambda done: done.returncode == 0,
        timeout=30,
        what=f"ServiceAccount {name}/default",
    )
    try:
        yield name
    finally:
        cluster.kubectl.run("delete", "namespace", name, "--wait=false", check=False)
