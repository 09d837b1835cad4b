"""Who can reach the runtime's socket, and through what kind of mount (for deployment).

The findings the kustomize component (manifests/components/cri/) relies on:

1. a READ-ONLY bind mount of the socket (the file, or its directory) still takes CRI
   calls: connect(2) on a unix socket needs write permission on the socket inode, which
   a read-only mount does not take away (what a hostPath volume with readOnly: true
   makes);
2. containerd makes its socket 0660 root:root, so a non-root user (uid 65532) connects
   when it has group 0 among its supplementary groups, and gets EACCES (errno 13)
   without it. Checked with a full CRI Version call made as that user
   (tests/cri/raw_version.py, standard library only, run by the system Python because
   the test environment's interpreter may not be readable by that user).

Root only (mounts, setuid).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cri.client import CRIClient
from tests.cri.runtime import skip_or_fail

pytestmark = pytest.mark.cri

RAW_VERSION = Path(__file__).with_name("raw_version.py")
NONROOT = 65532


@pytest.fixture
def as_root() -> None:
    if os.geteuid() != 0:
        skip_or_fail("mounting the runtime's socket and switching users needs root")


@pytest.fixture
def socket_path(cri: CRIClient, as_root: None) -> Path:
    return Path(cri.endpoint.removeprefix("unix://"))


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every user can traverse (pytest's tmp_path is 0700)."""
    path = Path(tempfile.mkdtemp(prefix="pm-cri-sock-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def mount_options(point: Path) -> list[str]:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if fields[1] == str(point):
            return fields[3].split(",")
    raise AssertionError(f"{point} is not a mount point")


def bind_read_only(source: Path, point: Path) -> None:
    subprocess.run(["mount", "--bind", str(source), str(point)], check=True)
    try:
        # A bind mount takes "ro" only on a remount.
        subprocess.run(["mount", "-o", "remount,bind,ro", str(point)], check=True)
    except subprocess.CalledProcessError:
        subprocess.run(["umount", str(point)], check=False)
        raise
    assert "ro" in mount_options(point)


@pytest.fixture
def read_only_socket(socket_path: Path, open_dir: Path) -> Iterator[Path]:
    """The runtime's socket bind-mounted read-only at open_dir/containerd.sock."""
    point = open_dir / "containerd.sock"
    point.touch()
    bind_read_only(socket_path, point)
    try:
        yield point
    finally:
        subprocess.run(["umount", str(point)], check=True)


def test_a_read_only_bind_mount_of_the_socket_takes_cri_calls(
    cri: CRIClient, read_only_socket: Path
) -> None:
    with CRIClient(f"unix://{read_only_socket}", cri.pb) as client:
        assert client.version().runtime_name == "containerd"


def test_a_read_only_bind_mount_of_the_sockets_directory_takes_cri_calls(
    cri: CRIClient, socket_path: Path, open_dir: Path
) -> None:
    point = open_dir / "run"
    point.mkdir()
    bind_read_only(socket_path.parent, point)
    try:
        with CRIClient(f"unix://{point / socket_path.name}", cri.pb) as client:
            assert client.version().runtime_name == "containerd"
    finally:
        subprocess.run(["umount", str(point)], check=True)


def system_python() -> str:
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        skip_or_fail("no system python3 in /usr/bin or /bin to run as another user")
    return python


def version_as(uid: int, groups: list[int], socket: Path) -> tuple[int, str]:
    """tests/cri/raw_version.py as uid (gid = uid) with these supplementary groups."""

    def drop() -> None:
        os.setgroups(groups)
        os.setgid(uid)
        os.setuid(uid)

    script = RAW_VERSION.read_text()  # read as root: the user may not read the checkout
    done = subprocess.run(
        [system_python(), "-I", "-c", script, str(socket)],
        preexec_fn=drop,  # setgroups/setgid/setuid only, between fork and exec
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return done.returncode, (done.stdout + done.stderr).strip()


def test_the_socket_is_0660_root_root(socket_path: Path) -> None:
    info = socket_path.stat()
    assert stat.S_ISSOCK(info.st_mode)
    assert (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid) == (0o660, 0, 0)


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        pytest.param([0], (0, "runtime_name=containerd"), id="with-group-0"),
        pytest.param([], (1, "connect failed: Permission denied (errno 13)"), id="no-groups"),
        pytest.param(
            [NONROOT], (1, "connect failed: Permission denied (errno 13)"), id="own-group-only"
        ),
    ],
)
def test_uid_65532_reaches_the_socket_only_with_group_0(
    read_only_socket: Path, groups: list[int], expected: tuple[int, str]
) -> None:
    assert version_as(NONROOT, groups, read_only_socket) == expected
