"""hack/cri-runtime.sh on its own: arguments, refusals and failures, without a runtime.

Not marked `cri`: these run everywhere (the ones that get past the script's root check
need root, and containerd's tools installed for the launch failures). The runtime it
starts is exercised by the `cri` tests (tests/cri/test_harness.py and the others).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cri.runtime import SCRIPT

as_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="the script's checks come after its root check"
)
with_tools = pytest.mark.skipif(
    shutil.which("ctr") is None
    or shutil.which("runc") is None
    or not Path("/bin/busybox").exists(),
    reason="containerd's ctr, runc or /bin/busybox is not installed (hack/cri-runtime.sh install)",
)


def script(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PROBEMARKER_CRI_PYTHON": sys.executable, **(env or {})},
    )


@pytest.mark.parametrize(
    "args",
    [
        pytest.param([], id="nothing"),
        pytest.param(["bogus"], id="unknown-command"),
        pytest.param(["start"], id="start-without-dir"),
        pytest.param(["down", "/tmp/x", "--now"], id="down-unknown-option"),
    ],
)
def test_bad_arguments_print_the_usage(args: list[str]) -> None:
    done = script(*args)
    assert done.returncode == 2
    for command in ("install", "start STATE_DIR", "stop STATE_DIR", "down STATE_DIR", "up"):
        assert command in done.stderr


@as_root
def test_stop_refuses_a_directory_start_did_not_make(tmp_path: Path) -> None:
    (tmp_path / "keep").write_text("mine")
    done = script("stop", str(tmp_path))
    assert done.returncode == 1
    assert f"{tmp_path} has no containerd.toml: not a directory made by" in done.stderr
    assert (tmp_path / "keep").read_text() == "mine"


@as_root
def test_stop_of_nothing_is_fine(tmp_path: Path) -> None:
    done = script("stop", str(tmp_path / "absent"))
    assert done.returncode == 0, done.stderr
    assert "does not exist: nothing to stop" in done.stderr


@as_root
def test_start_refuses_a_directory_in_use(tmp_path: Path) -> None:
    (tmp_path / "something").touch()
    done = script("start", str(tmp_path))
    assert done.returncode == 1
    assert f"{tmp_path} is not empty: give start a new or empty directory" in done.stderr


@as_root
def test_start_names_the_python_it_needs(tmp_path: Path) -> None:
    done = script("start", str(tmp_path / "state"), env={"PROBEMARKER_CRI_PYTHON": "/bin/false"})
    assert done.returncode == 1
    assert "/bin/false cannot import grpc" in done.stderr
    assert "set PROBEMARKER_CRI_PYTHON" in done.stderr


def put_fake(tmp_path: Path, body: str) -> dict[str, str]:
    """A `containerd` shell script that shadows the real one on PATH; the environment."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "containerd"
    fake.write_text(f"#!/bin/sh\necho 'fake containerd here'\n{body}\n")
    fake.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "PROBEMARKER_CRI_WAIT": "2"}


@as_root
@with_tools
@pytest.mark.parametrize(
    ("body", "said"),
    [
        pytest.param("exit 1", "containerd exited before answer from containerd", id="exits"),
        pytest.param(
            "trap 'exit 0' TERM\nwhile :; do sleep 0.1; done",
            "no answer from containerd (ctr version) on ",
            id="never-answers",
        ),
    ],
)
def test_a_containerd_that_fails_is_reported_with_its_log_and_stopped(
    tmp_path: Path, body: str, said: str
) -> None:
    state = tmp_path / "state"
    done = script("start", str(state), env=put_fake(tmp_path, body))
    try:
        assert done.returncode == 1
        assert said in done.stderr
        assert "fake containerd here" in done.stderr  # the log's tail
        assert f"'{SCRIPT} stop {state}' removes what is left" in done.stderr
        pid = (state / "containerd.pid").read_text().strip()
        assert not Path(f"/proc/{pid}/cmdline").exists() or _is_zombie(pid)
    finally:
        stopped = script("stop", str(state))
    assert stopped.returncode == 0, stopped.stderr
    assert not state.exists()


def _is_zombie(pid: str) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rpartition(") ")[2].startswith("Z")
