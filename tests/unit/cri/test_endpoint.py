"""`--cri-endpoint`: a unix socket URL, as the kubelet's; anything else says what to write."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from probemarker.cri.client import CallFailed, RuntimeClient
from probemarker.cri.endpoint import DEFAULT_ENDPOINT, socket_path, socket_problem
from probemarker.daemon.settings import SettingsError, parse_run_settings


@pytest.mark.parametrize(
    ("endpoint", "path"),
    [
        (DEFAULT_ENDPOINT, "/run/containerd/containerd.sock"),
        ("unix:///var/run/crio/crio.sock", "/var/run/crio/crio.sock"),
        ("  unix:///run/k3s/containerd/containerd.sock ", "/run/k3s/containerd/containerd.sock"),
    ],
)
def test_unix_urls_name_their_socket(endpoint: str, path: str) -> None:
    assert socket_path(endpoint) == path


@pytest.mark.parametrize(
    ("endpoint", "needle"),
    [
        ("/run/containerd/containerd.sock", "write unix:///run/containerd/containerd.sock"),
        ("tcp://10.0.0.1:10010", "must be a unix socket"),
        ("npipe:////./pipe/containerd-containerd", "must be a unix socket"),
        ("unix://run/containerd.sock", "absolute path after unix://, e.g. unix:///run/"),
        ("unix:///run/x.sock?timeout=1", "without a query"),
        ("unix:///" + "a" * 120, "at most 107 bytes"),
        ("", "must be a unix socket"),
    ],
)
def test_other_endpoints_are_refused_with_what_to_write(endpoint: str, needle: str) -> None:
    with pytest.raises(ValueError, match="must") as caught:
        socket_path(endpoint)
    assert needle in str(caught.value)


def test_the_settings_refuse_a_bad_endpoint_naming_the_flag_and_the_variable() -> None:
    with pytest.raises(SettingsError) as by_flag:
        parse_run_settings(["--node", "n", "--cri-endpoint", "/run/x.sock"], {})
    assert str(by_flag.value).startswith("--cri-endpoint='/run/x.sock': must be a unix:// URL")
    with pytest.raises(SettingsError) as by_env:
        parse_run_settings(["--node", "n"], {"PROBEMARKER_CRI_ENDPOINT": "tcp://h:1"})
    assert str(by_env.value).startswith("PROBEMARKER_CRI_ENDPOINT='tcp://h:1': must be")


@pytest.mark.parametrize(
    ("argv", "env", "backend", "endpoint"),
    [
        ([], {}, "api", DEFAULT_ENDPOINT),
        (["--exec-backend", "cri"], {}, "cri", DEFAULT_ENDPOINT),
        (
            [],
            {"PROBEMARKER_EXEC_BACKEND": "cri", "PROBEMARKER_CRI_ENDPOINT": "unix:///c.sock"},
            "cri",
            "unix:///c.sock",
        ),
        (["--exec-backend", "api"], {"PROBEMARKER_EXEC_BACKEND": "cri"}, "api", DEFAULT_ENDPOINT),
    ],
)
def test_the_backend_defaults_to_api_and_flags_win(
    argv: list[str], env: dict[str, str], backend: str, endpoint: str
) -> None:
    settings = parse_run_settings(["--node", "n", *argv], env)
    assert (settings.exec_backend, settings.cri_endpoint) == (backend, endpoint)


def test_an_unknown_backend_is_refused_with_the_choices() -> None:
    with pytest.raises(SettingsError, match=r"--exec-backend='crio': must be one of api, cri"):
        parse_run_settings(["--node", "n", "--exec-backend", "crio"], {})


def test_a_socket_a_missing_path_or_an_unreadable_one_is_no_problem(tmp_path: Path) -> None:
    listening = socket.socket(socket.AF_UNIX)
    try:
        listening.bind(str(tmp_path / "cri.sock"))
        assert socket_problem(str(tmp_path / "cri.sock")) is None
    finally:
        listening.close()
    assert socket_problem(str(tmp_path / "absent.sock")) is None  # grpc's "No such file"
    assert socket_problem("/nul\0byte") is None


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        pytest.param(lambda p: p.write_text(""), "a regular file", id="file"),
        pytest.param(lambda p: p.mkdir(), "a directory", id="directory"),
        pytest.param(lambda p: os.mkfifo(p), "a named pipe", id="fifo"),
    ],
)
def test_a_path_that_is_no_socket_says_what_it_is(
    tmp_path: Path, make: Callable[[Path], object], kind: str
) -> None:
    path = tmp_path / "containerd.sock"
    make(path)
    assert socket_problem(str(path)) == (
        f"{path} is {kind}, not a socket: --cri-endpoint must name the container runtime's "
        "socket (containerd: unix:///run/containerd/containerd.sock, CRI-O: "
        "unix:///var/run/crio/crio.sock)"
    )


async def test_the_client_says_not_a_socket_where_grpc_says_connection_refused(
    tmp_path: Path,
) -> None:
    """A --cri-endpoint naming a regular file read "Connection refused", the text
    docs/cri.md gives for a stale socket mount after a runtime restart."""
    path = tmp_path / "containerd.sock"
    path.write_text("")
    client = RuntimeClient(str(path))
    try:
        with anyio.fail_after(10):
            answer = await client.version(wait=2.0)
    finally:
        await client.aclose()
    assert isinstance(answer, CallFailed)
    assert answer.code == "UNAVAILABLE"  # still a refusal: /healthz times it as one
    assert answer.details.startswith(f"{path} is a regular file, not a socket: --cri-endpoint")
    assert client.refused_for()[1] == str(answer)
