"""`probemarker sim serve` (sim/cli.py): serves until SIGTERM, with a usable kubeconfig;
one-line errors (exit 2) when it cannot start; defaults in --help; a log on stderr."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
import yaml

from probemarker.sim.cli import build_parser, main
from tests import plain_install


async def test_serve_writes_kubeconfig_and_stops_on_sigterm(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "sim.kubeconfig"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "probemarker.sim.cli",
        "serve",
        "--port",
        "0",
        "--kubeconfig-out",
        str(kubeconfig),
        "--nodes",
        "a,b",
        "--token",
        "t0k",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(20):
            assert process.stdout is not None
            line = (await process.stdout.readline()).decode()
            assert "serving on http://127.0.0.1:" in line
            config = yaml.safe_load(kubeconfig.read_text())
            server = config["clusters"][0]["cluster"]["server"]
            headers = {"Authorization": "Bearer t0k"}
            async with (
                aiohttp.ClientSession(headers=headers) as session,
                session.get(server + "/api/v1/nodes") as response,
            ):
                nodes = await response.json()
            assert [n["metadata"]["name"] for n in nodes["items"]] == ["a", "b"]
            process.send_signal(signal.SIGTERM)
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def run_serve(*args: str) -> subprocess.CompletedProcess[str]:
    """`probemarker sim serve ARGS` that is expected to exit on its own."""
    return subprocess.run(
        [sys.executable, "-m", "probemarker", "sim", "serve", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_port_in_use_is_one_line_naming_address_port_and_fix(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_serve("--port", str(port), "--kubeconfig-out", str(tmp_path / "kc"))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"probemarker sim: cannot listen on 127.0.0.1:{port}: address already in use "
        f"(another process is listening there); pick another port (--port {port + 1}) "
        "or let the sim pick a free one (--port 0)"
    ]


def test_unwritable_kubeconfig_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = run_serve("--kubeconfig-out", str(blocker / "kc"))
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"probemarker sim: cannot write the kubeconfig to {blocker / 'kc'}: ")
    assert line.endswith("give --kubeconfig-out a path in a writable directory")


def test_https_without_cryptography_names_the_extra_in_one_line(tmp_path: Path) -> None:
    """The CA of --https needs cryptography (the sim extra's); without it, the one line
    `probemarker sim` says without the extra, not a traceback, and nothing written."""
    hidden = ["cryptography"]
    kubeconfig = tmp_path / "kc"
    result = subprocess.run(
        plain_install.command_without(
            hidden, "sim", "serve", "--https", "--kubeconfig-out", str(kubeconfig)
        ),
        env=plain_install.environment_without(hidden, os.environ),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        "probemarker sim needs the sim extra: pip install 'probemarker[sim]' "
        "(missing module 'cryptography')"
    ]
    assert not kubeconfig.exists()


def test_help_shows_every_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # unwrap argparse's line breaks
    for expected in (
        "(default: 0)",
        "(default: node-1)",
        "(default: 10000)",
        "(default: plain HTTP)",
        "(default: none, every request is allowed)",
        "(default: the scheduler binds them to a node)",
        "(required)",
    ):
        assert expected in text
    # Every option but --help states its default (or that it is required), so an option
    # added later without one fails here.
    options = [a for a in serve_parser()._actions if a.option_strings != ["-h", "--help"]]
    assert len(options) == 7
    assert text.count("(default: ") + text.count("(required)") == len(options)


def serve_parser() -> argparse.ArgumentParser:
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser: argparse.ArgumentParser = commands.choices["serve"]
    return parser


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["--port", "70000"], "70000 is not between 0 (any free port) and 65535", id="port"
        ),
        pytest.param(["--port", "http"], "not a port number: 'http'", id="port-text"),
        pytest.param(["--nodes", " , "], "give at least one node name", id="nodes"),
    ],
)
def test_bad_options_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["serve", "--kubeconfig-out", "kc", *args])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


@asynccontextmanager
async def serving(tmp_path: Path, *args: str) -> AsyncIterator[tuple[str, asyncio.StreamReader]]:
    """A `sim serve` process: its URL and its stderr (the log); stopped with SIGTERM."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "probemarker",
        "sim",
        "serve",
        "--kubeconfig-out",
        str(tmp_path / "kc"),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    try:
        line = (await asyncio.wait_for(process.stdout.readline(), 20)).decode()
        yield line.split(" serving on ")[1].strip(), process.stderr
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 20) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_pod_for_a_node_the_sim_does_not_run_is_logged(tmp_path: Path) -> None:
    async with serving(tmp_path, "--nodes", "a,b") as (url, log):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "far"},
            "spec": {"nodeName": "node-9", "containers": [{"name": "c", "image": "x"}]},
        }
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{url}/api/v1/namespaces/default/pods", json=pod) as response,
        ):
            assert response.status == 201
        async with asyncio.timeout(20):
            while b"far" not in (line := await log.readline()):
                assert line, "the sim's log ended without the line"
    assert (
        line.decode()
        .rstrip()
        .endswith(
            "WARNING probemarker.sim.kubelet.node: pod default/far is bound to node node-9, "
            "which this sim does not run (its nodes: a,b), so it stays Pending: start the sim "
            "with --nodes a,b,node-9 (SimCluster(node_names=...) in tests), or set "
            "spec.nodeName to one of its nodes"
        )
    )
