"""`probemarker run` as an operator meets it: settings and kubeconfig problems are one
line on stderr (exit 2), never a traceback; KUBECONFIG is read as kubectl reads it."""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import structlog

from probemarker.cli import main


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NODE_NAME", "n")
    yield
    # `run` configured logging to this test's captured stderr, which is closed next.
    structlog.reset_defaults()


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--shutdown-grace-seconds", "nan"], id="grace-nan"),
        pytest.param(["--write-qps", "inf"], id="qps-inf"),
        pytest.param(["--namespaces", ",,"], id="namespaces"),
    ],
)
def test_run_refuses_a_bad_setting_with_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", *argv]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert err.startswith(f"probemarker run: {argv[0]}=")


def test_kubeconfig_variable_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """KUBECONFIG names the file (the error used to be about the in-cluster config)."""
    missing = tmp_path / "nowhere.kubeconfig"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("KUBECONFIG", str(missing))
        assert main(["run"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert str(missing) in line


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        pytest.param(
            lambda p: p.write_text(""), "has no clusters and no contexts (is it empty?)", id="empty"
        ),
        pytest.param(lambda p: p.mkdir(), "is a directory, not a file", id="directory"),
        pytest.param(
            lambda p: p.write_text("clusters: [\n"), "is not YAML: expected the node", id="yaml"
        ),
    ],
)
def test_kubeconfig_problems_are_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    make: Callable[[Path], object],
    needle: str,
) -> None:
    """An empty kubeconfig was "'NoneType' object does not support item assignment", a
    directory "does not exist"."""
    path = tmp_path / "kubeconfig"
    make(path)
    assert main(["run", "--kubeconfig", str(path)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("probemarker run: ")
    assert needle in line


def test_a_metrics_port_in_use_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The server listens before the first request, so a dead API server does not
    matter: the port is refused first, with the flag and what to do."""
    with socket.socket() as dead, socket.socket() as taken:
        dead.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = f"http://127.0.0.1:{dead.getsockname()[1]}"
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        path = tmp_path / "kubeconfig"
        path.write_text(
            "clusters: [{name: c, cluster: {server: '" + server + "'}}]\n"
            "users: [{name: u, user: {}}]\n"
            "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
            "current-context: x\n"
        )
        argv = ["run", "--kubeconfig", str(path), "--metrics-address", address]
        assert main([*argv, "--log-format", "json"]) == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith(f"probemarker run: --metrics-address='{address}': cannot listen: ")
    assert last.endswith("or 0 to turn the server off")


def test_the_cri_backend_without_its_extra_stops_start_up_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "grpc", None)  # as if grpcio were not installed
    assert main(["run", "--exec-backend", "cri", "--kubeconfig", "/nowhere"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(
        "probemarker run: --exec-backend cri: the cri exec backend needs the optional cri "
        "extra: pip install 'probemarker[cri]' (ModuleNotFoundError: "
    )
