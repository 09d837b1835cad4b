"""Fixtures for the tests against a real single-node cluster (marker `cluster`).

The cluster is `hack/cluster.sh`'s (a kubelet, containerd + runc, the control plane, a
CNI bridge), the image is `hack/build-image.sh`'s, loaded into the node's containerd,
and the add-on is installed with `kubectl apply -k` on an overlay, as
docs/installation.md tells users. Kubernetes is the user's: the server binaries of a
release >= 1.28 in the folder `$PROBEMARKER_KUBE_BIN` (nothing is provided with the
project). Without that variable every test skips, naming it; with it, they skip,
naming what is missing, without root, kubectl, podman or the binaries, and with
PROBEMARKER_TEST_REQUIRE_CLUSTER=1 (CI) they fail instead. docs/development.md ("A
real cluster") says how to run them.

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

import pytest

from probemarker import __version__
from tests.cluster.install import (
    ADDONS,
    IMAGE,
    IMAGE_NAME,
    KUBE_BIN,
    STATE,
    Addon,
    Cluster,
    run_script,
)
from tests.cluster.kube import REPO, create_namespace

NO_BINARIES = (
    "PROBEMARKER_KUBE_BIN is not set: the cluster suite needs the server binaries of a "
    'Kubernetes release >= 1.28 (docs/development.md, "A real cluster")'
)


def _why_not() -> str | None:
    if KUBE_BIN is None:
        return NO_BINARIES
    if os.geteuid() != 0:
        return "not root: the cluster runs a kubelet and containerd (hack/cluster.sh up)"
    for tool, why in (
        ("kubectl", "kubectl"),
        ("podman", "podman (apt-get install podman mmdebstrap)"),
    ):
        if shutil.which(tool) is None:
            return f"{why} is not installed"
    names = ("kube-apiserver", "kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy")
    missing = [n for n in names if not os.access(KUBE_BIN / n, os.X_OK)]
    if missing:
        return (
            f"PROBEMARKER_KUBE_BIN={KUBE_BIN} has no executable {', '.join(missing)}: it needs "
            "the five server binaries of one Kubernetes release >= 1.28 (docs/development.md)"
        )
    return None


WHY_NOT = _why_not()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/cluster/" in str(item.path).replace(os.sep, "/"):
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(autouse=True)
def _available() -> None:
    _skip_without_a_cluster()


def _skip_without_a_cluster() -> None:
    """Skip when there is no real cluster to bring up, or fail when the user asked for
    one (PROBEMARKER_TEST_REQUIRE_CLUSTER=1 with PROBEMARKER_KUBE_BIN set: a machine
    without Kubernetes binaries, as CI's, skips whatever that variable says). Called
    first by `cluster` too: pytest sets up a package-scoped fixture before a
    function-scoped autouse one, so without it `hack/cluster.sh up` ran before the
    skip."""
    if WHY_NOT is None:
        return
    if KUBE_BIN is not None and os.environ.get("PROBEMARKER_TEST_REQUIRE_CLUSTER") == "1":
        pytest.fail(f"PROBEMARKER_TEST_REQUIRE_CLUSTER=1, but no real cluster: {WHY_NOT}")
    pytest.skip(f"no real cluster: {WHY_NOT}")


@pytest.fixture(scope="package")
def cluster() -> Iterator[Cluster]:
    _skip_without_a_cluster()
    out = run_script("up", timeout=300)
    last = out.strip().splitlines()[-1]
    up = Cluster.at(STATE)
    assert last == f"KUBECONFIG={up.kubectl.kubeconfig}", (
        f"hack/cluster.sh up: the last line: {last!r}"
    )
    try:
        if os.environ.get("PROBEMARKER_TEST_CLUSTER_SKIP_BUILD") != "1":
            build = subprocess.run(
                ["bash", str(REPO / "hack" / "build-image.sh"), "--no-verify", "--image", IMAGE_NAME,
                 "--tag", __version__],
                capture_output=True, text=True, timeout=900, check=False,
            )  # fmt: skip
            assert build.returncode == 0, f"hack/build-image.sh: {build.stderr[-3000:]}"
        run_script("load-image", IMAGE, timeout=300)
        yield up
    finally:
        if os.environ.get("PROBEMARKER_TEST_CLUSTER_KEEP") != "1":
            run_script("down", timeout=300)


@pytest.fixture(scope="package")
def addon(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Addon:
    folder = tmp_path_factory.mktemp("overlay")
    installed = Addon(cluster, folder)
    ADDONS.append(installed)
    installed.use("api")
    return installed


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    stem = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[:40].strip("-")
    name = f"t-{stem}-{uuid.uuid4().hex[:5]}"
    create_namespace(cluster.kubectl, name)
    try:
        yield name
    finally:
        cluster.kubectl.run("delete", "namespace", name, "--wait=false", check=False)
