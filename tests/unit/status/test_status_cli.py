"""`probemarker status` at the command line: usage errors, a socket that is not there."""

from __future__ import annotations

from pathlib import Path

import pytest

from probemarker.cli import main


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pod", "web-0"], "--pod 'web-0': expected NAMESPACE/NAME"),
        (["--marker", "a/b/c"], "--marker 'a/b/c': expected NAMESPACE/NAME"),
        (["--pod", "Game/web-0"], "--pod 'Game/web-0': the namespace must be a DNS label"),
        (["--pod", "game/web 0"], "--pod 'game/web 0': the name must be a DNS subdomain"),
        (["--pod=-x/y"], "--pod '-x/y': the namespace must be a DNS label"),
        (["--marker", "ns/\x1b[31m"], "--marker 'ns/\\x1b[31m': the name must be"),
        (["--node", ""], "--node '': a node's name must be a DNS subdomain"),
        (["--node", "a,b"], "--node 'a,b': a node's name must be a DNS subdomain"),
        # issue 40: an empty namespace was sent on, to a 404 (`/namespaces//pods`)
        (["--daemon-namespace", ""], "--daemon-namespace '': a namespace must be a DNS label"),
        (["--daemon-namespace", "Probemarker"], "--daemon-namespace 'Probemarker': a namespace"),
        (["-n", ""], "-n '': a namespace must be a DNS label"),
        (["-n", "a/b"], "-n 'a/b': a namespace must be a DNS label"),
        (["-n", "web", "--pod", "game/g-0"], "--pod 'game/g-0' is not in namespace web (-n)"),
        (["-n", "web", "--marker", "game/m"], "--marker 'game/m' is not in namespace web (-n)"),
    ],
)
def test_usage_errors_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", "--socket", "/nonexistent", *args]) == 2
    assert message in capsys.readouterr().err


def test_a_missing_socket_is_named_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "none.sock")
    assert main(["status", "--local", "--socket", path]) == 1
    assert f"status socket {path}: not found; is the daemon running with --status-socket" in (
        capsys.readouterr().err
    )
    assert main(["status", "--socket", path]) == 1
    out = capsys.readouterr().out
    assert "Nodes:\n  (local): status socket" in out


async def test_an_answer_past_the_limit_is_refused_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from probemarker.status import local, read

    monkeypatch.setattr(local, "ANSWER_LIMIT", 1000)
    path = str(tmp_path / "big.sock")

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        writer.write(b"x" * 5000)
        await writer.drain()
        writer.close()

    async with asyncio.timeout(10):
        server = await asyncio.start_unix_server(answer, path)
        async with server:
            with pytest.raises(OSError, match=r"larger than .* narrow it with --pod or --marker"):
                await read.read_socket(path, read.StatusOptions())


def test_the_reader_in_the_daemons_container_loads_no_event_loop_or_client(
    tmp_path: Path,
) -> None:
    """`status --local` runs under the daemon's memory limit, once per node asked: it
    loads the standard library's socket, not asyncio, anyio, aiohttp or our API client
    (which took it from 20 to 45 MiB of RSS beside the daemon)."""
    import subprocess
    import sys

    path = str(tmp_path / "none.sock")
    code = (
        "import sys\n"
        "from probemarker.cli import main\n"
        f"rc = main(['status', '--local', '--socket', {path!r}, '--pod', 'ns/p'])\n"
        "heavy = ('asyncio', 'anyio', 'aiohttp', 'kubernetes_asyncio', 'probemarker.kube', "
        "'probemarker.status.read')\n"
        "print(rc, sorted({m for m in sys.modules for h in heavy "
        "if m == h or m.startswith(h + '.')}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip() == "1 []", done.stderr
    assert "not found; is the daemon running with --status-socket" in done.stderr


@pytest.mark.parametrize(
    ("exit_code", "stderr", "problem"),
    [
        (
            2,
            "usage: probemarker [-h]\nprobemarker: error: argument command: invalid choice: "
            "'status' (choose from 'run', 'validate', 'check')\n",
            "the daemon's image has no `probemarker status --local`",
        ),
        (
            2,
            "probemarker: error: unrecognized arguments: --local\n",
            "the daemon's image has no `probemarker status --local`",
        ),
        (
            2,
            "probemarker: error: unrecognized arguments: --namespace web\n",
            "the daemon's image has no `probemarker status -n`",
        ),
        (1, "probemarker status --local: status socket /x: not found\n", "socket /x: not found"),
        (137, "", "probemarker status --local: exit code 137"),
    ],
)
def test_a_reader_that_fails_in_the_daemons_container_says_why(
    exit_code: int, stderr: str, problem: str
) -> None:
    from probemarker.status.read import reader_failed

    assert problem in reader_failed(exit_code, stderr)


def test_the_readers_own_error_line_is_named_once() -> None:
    from probemarker.status.read import reader_failed

    said = "probemarker status --local: status socket /x: not found\n"
    assert reader_failed(1, said) == "probemarker status --local: status socket /x: not found"
