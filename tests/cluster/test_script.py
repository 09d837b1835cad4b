"""hack/cluster.sh itself: idempotent, refusing what it must not touch, errors that say
the fix."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.cluster.install import Cluster
from tests.cluster.kube import SCRIPT

pytestmark = pytest.mark.timeout(300)

PIDS = ("etcd", "apiserver", "kcm", "sched", "kubelet", "proxy")


def _run(*args: str, state: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if state is not None:
        env["PROBEMARKER_CLUSTER_DIR"] = str(state)
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        check=False,
    )


def test_up_while_up_starts_nothing_and_says_the_same_kubeconfig(cluster: Cluster) -> None:
    before = {n: (cluster.state / f"{n}.pid").read_text() for n in PIDS}
    again = cluster.script("up")
    assert again.strip().splitlines()[-1] == f"KUBECONFIG={cluster.kubectl.kubeconfig}"
    assert {n: (cluster.state / f"{n}.pid").read_text() for n in PIDS} == before


def test_an_unknown_command_prints_the_usage(tmp_path: Path) -> None:
    done = _run("upp", state=tmp_path)
    assert done.returncode == 2
    assert "load-image [IMAGE]" in done.stderr


def test_up_refuses_a_folder_it_did_not_make(tmp_path: Path) -> None:
    (tmp_path / "precious").write_text("x")
    done = _run("up", state=tmp_path)
    assert done.returncode == 1
    assert "was not made by this script: set PROBEMARKER_CLUSTER_DIR" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["precious"]


def test_down_of_nothing_does_nothing(tmp_path: Path) -> None:
    done = _run("down", state=tmp_path / "absent")
    assert done.returncode == 0, done.stderr
    assert "nothing to do" in done.stderr


def test_load_image_names_the_fix(cluster: Cluster) -> None:
    done = _run("load-image", "localhost/no-such-image:1")
    assert done.returncode == 1
    assert (
        "podman has no image localhost/no-such-image:1: build it with hack/build-image.sh"
        in done.stderr
    )


@pytest.mark.parametrize("command", ["up", "down", "load-image", "restart-apiserver"])
def test_without_root_it_says_it_needs_root(command: str, tmp_path: Path) -> None:
    # The script goes in on stdin and runs from /: the checkout may be in a folder the
    # unprivileged user cannot read.
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    with SCRIPT.open() as script:
        done = subprocess.run(
            [*nobody, "bash", "-s", command],
            stdin=script,
            capture_output=True,
            text=True,
            timeout=60,
            cwd="/",
            env={**os.environ, "PROBEMARKER_CLUSTER_DIR": str(tmp_path / "state")},
            check=False,
        )
    assert done.returncode == 1, done.stderr
    assert f"{command} needs root" in done.stderr
    assert not (tmp_path / "state").exists()
