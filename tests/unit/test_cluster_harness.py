"""What hack/cluster.sh and its clients do without a cluster: the binaries are the
user's and checked before anything starts, and a kubeconfig of a cluster that is down
fails on this host before a packet is sent (issue: nothing leaves the machine).

Nothing here needs root or Kubernetes: `hack/cluster.sh binaries` runs on stand-in
executables that print a version, and `reachable` is tried on kubeconfigs written here.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.install import Cluster, ClusterDown, reachable
from tests.cluster.kube import SCRIPT

COMPONENTS = (
    "kube-apiserver",
    "kubelet",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-proxy",
)


def _binaries(folder: Path, versions: dict[str, str]) -> Path:
    folder.mkdir()
    for name, printed in versions.items():
        path = folder / name
        path.write_text(f"#!/bin/sh\necho '{printed}'\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return folder


def _check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "PROBEMARKER_KUBE_BIN"}
    return subprocess.run(
        ["bash", str(SCRIPT), "binaries"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**base, **env},
    )


def test_one_release_from_1_28_is_taken_and_named(tmp_path: Path) -> None:
    folder = _binaries(tmp_path / "bin", dict.fromkeys(COMPONENTS, "Kubernetes v1.28.15"))
    done = _check({"PROBEMARKER_KUBE_BIN": str(folder)})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Kubernetes v1.28.15\n"


@pytest.mark.parametrize(
    ("versions", "says"),
    [
        pytest.param(None, "set PROBEMARKER_KUBE_BIN", id="unset"),
        pytest.param(
            {n: "Kubernetes v1.32.0" for n in COMPONENTS if n != "kube-proxy"},
            "no executable kube-proxy in PROBEMARKER_KUBE_BIN=",
            id="one-missing",
        ),
        pytest.param(
            {**dict.fromkeys(COMPONENTS, "Kubernetes v1.32.0"), "kubelet": "Kubernetes v1.31.4"},
            "mixes releases: kube-apiserver is v1.32.0, kubelet is v1.31.4",
            id="mixed-releases",
        ),
        pytest.param(
            dict.fromkeys(COMPONENTS, "Kubernetes v1.27.16"),
            "is v1.27.16: the cluster needs Kubernetes 1.28 or later",
            id="too-old",
        ),
        pytest.param(
            dict.fromkeys(COMPONENTS, "Kubernetes v0.0.0-master+$Format:%H$"),
            "not 'Kubernetes v1.MINOR.PATCH'",
            id="unversioned-build",
        ),
    ],
)
def test_binaries_that_will_not_do_are_refused_in_one_line(
    tmp_path: Path, versions: dict[str, str] | None, says: str
) -> None:
    env = {}
    if versions is not None:
        env["PROBEMARKER_KUBE_BIN"] = str(_binaries(tmp_path / "bin", versions))
    done = _check(env)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("cluster.sh: "), lines[0]
    assert says in lines[0], lines[0]
    assert "PROBEMARKER_KUBE_BIN" in lines[0] or "Kubernetes 1.28" in lines[0]
    assert done.stdout == ""


def _kubeconfig(path: Path, server: str) -> Path:
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "probemarker", "cluster": {"server": server}}],
        "users": [{"name": "admin", "user": {}}],
        "contexts": [
            {"name": "probemarker", "context": {"cluster": "probemarker", "user": "admin"}}
        ],
        "current-context": "probemarker",
    }
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def no_connections(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every connection attempted by the guard, refused here: none may reach the wire."""
    tried: list[object] = []

    def refuse(address: object, *args: object, **kwargs: object) -> socket.socket:
        tried.append(address)
        raise AssertionError(f"a connection to {address} was attempted")

    monkeypatch.setattr(socket, "create_connection", refuse)
    return tried


def test_a_downed_clusters_kubeconfig_fails_here_without_a_packet(
    tmp_path: Path, no_connections: list[object]
) -> None:
    """hack/cluster.sh's address once its bridge is gone: not on this host, so the check
    stops before connecting (with the bridge gone the address would route off the host)."""
    with socket.socket() as probe:
        try:
            probe.bind(("10.246.0.1", 0))
        except OSError:
            pass  # not on this host: the state this test is about
        else:
            pytest.skip("hack/cluster.sh's cluster is up on this host: 10.246.0.1 is local")
    (tmp_path / "logs").mkdir()
    _kubeconfig(tmp_path / "kubeconfig", "https://10.246.0.1:6470")
    with pytest.raises(ClusterDown) as down:
        Cluster.at(tmp_path)
    message = str(down.value)
    assert "\n" not in message
    assert "https://10.246.0.1:6470" in message
    assert "hack/cluster.sh up" in message
    assert no_connections == []


def test_no_kubeconfig_is_a_cluster_that_is_down(
    tmp_path: Path, no_connections: list[object]
) -> None:
    with pytest.raises(ClusterDown, match=r"no .*kubeconfig; start it with `hack/cluster.sh up`"):
        Cluster.at(tmp_path)
    assert no_connections == []


@pytest.mark.parametrize(
    "server",
    [
        pytest.param("https://probemarker.example:6443", id="a-name"),
        pytest.param("https://192.0.2.77:6443", id="another-host"),
    ],
)
def test_a_server_that_is_not_this_host_is_refused(
    tmp_path: Path, no_connections: list[object], server: str
) -> None:
    with pytest.raises(
        ClusterDown, match=r"is not an address of this host|is no address of this host"
    ):
        reachable(_kubeconfig(tmp_path / "kubeconfig", server))
    assert no_connections == []


def test_a_local_address_with_nothing_listening_is_down(tmp_path: Path) -> None:
    with socket.socket() as placeholder:  # a port of this host that then has no listener
        placeholder.bind(("127.0.0.1", 0))
        port = placeholder.getsockname()[1]
    with pytest.raises(ClusterDown, match=rf"nothing answers at https://127.0.0.1:{port}"):
        reachable(_kubeconfig(tmp_path / "kubeconfig", f"https://127.0.0.1:{port}"))


def test_a_local_listener_is_up(tmp_path: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        reachable(_kubeconfig(tmp_path / "kubeconfig", f"https://127.0.0.1:{port}"))
