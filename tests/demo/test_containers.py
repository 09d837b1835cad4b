"""The demo containers' stand-ins: files under a scratch root, the examples' exec
commands run with their paths mapped there, the web container's HTTP answers."""

from __future__ import annotations

import os
from pathlib import Path

import aiohttp
import pytest

from probemarker.api.model import ExecAction
from probemarker.demo.containers import (
    ContainerFiles,
    DemoError,
    MappedExec,
    free_port,
    map_command,
    serving_http,
)
from probemarker.demo.examples import find_probe, load_examples
from probemarker.demo.scenario import DB_ROLE, GAME_STATE, UPSTREAM, pod_named
from probemarker.sim.exec.runners import ExecRequest, ExecTarget, SubprocessRunner


@pytest.mark.parametrize(
    ("command", "mapped"),
    [
        pytest.param(["/home/game/idle.sh"], ("/s/home/game/idle.sh",), id="argv0"),
        pytest.param(
            ["sh", "-c", 'test "$(cat /var/run/db/role)" = primary'],
            ("sh", "-c", 'test "$(cat /s/var/run/db/role)" = primary'),
            id="inside-an-argument",
        ),
        pytest.param(["cat", "/etc/hostname"], ("cat", "/etc/hostname"), id="not-a-file-of-it"),
        pytest.param(["cat", "/a/bc"], ("cat", "/s/a/bc"), id="longest-first"),
    ],
)
def test_map_command(command: list[str], mapped: tuple[str, ...]) -> None:
    paths = {
        "/home/game/idle.sh": "/s/home/game/idle.sh",
        "/var/run/db/role": "/s/var/run/db/role",
        "/a/b": "/s/a/b",
        "/a/bc": "/s/a/bc",
    }
    assert map_command(command, paths) == mapped


def test_files_are_written_under_the_containers_root(tmp_path: Path) -> None:
    files = ContainerFiles(tmp_path)
    game = pod_named("games/game-0")
    files.create(game)
    root = tmp_path / "games" / "game-0" / "game-server"
    assert (root / "home/game/state").read_text() == "idle\n"
    assert os.access(root / "home/game/idle.sh", os.X_OK)
    files.write(game, "/home/game/idle.sh", "#!/bin/sh\nexit 0\n")
    assert os.access(root / "home/game/idle.sh", os.X_OK)  # a replaced script stays one
    files.write(game, GAME_STATE, "busy\n")
    assert files.read(game, GAME_STATE) == "busy\n"
    assert sorted(p.name for p in (root / "home/game").iterdir()) == ["idle.sh", "state"]


def test_a_scratch_directory_where_scripts_cannot_run_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "access", lambda *_args, **_kw: False)  # as on a noexec mount
    with pytest.raises(DemoError, match="mounted noexec; point TMPDIR at a directory"):
        ContainerFiles(tmp_path).create(pod_named("games/game-0"))


class Streams:
    def __init__(self) -> None:
        self.stdout, self.stderr = b"", b""

    async def write_stdout(self, data: bytes) -> None:
        self.stdout += data

    async def write_stderr(self, data: bytes) -> None:
        self.stderr += data

    async def read_stdin(self) -> bytes | None:
        return None


async def run_probe(
    files: ContainerFiles, pod_key: str, marker: str, probe: str
) -> tuple[int, bytes]:
    pod = pod_named(pod_key)
    handler = find_probe(load_examples(), marker, probe).handler
    assert isinstance(handler, ExecAction)
    command = handler.command  # the example's own command
    target = ExecTarget(
        namespace=pod.namespace,
        pod=pod.name,
        pod_uid="uid",
        container=pod.container,
        env={"HOSTNAME": pod.name},
        workdir=files.scratch / "unused",
    )
    streams = Streams()
    code = await MappedExec(files, pod, SubprocessRunner())(ExecRequest(target, command), streams)
    return code, streams.stdout


async def test_the_game_servers_idle_check_answers_from_its_state_file(tmp_path: Path) -> None:
    files = ContainerFiles(tmp_path)
    game = pod_named("games/game-0")
    files.create(game)
    assert await run_probe(files, game.key, "game-server-idle", "idle") == (0, b"match: idle\n")
    files.write(game, GAME_STATE, "busy\n")
    assert await run_probe(files, game.key, "game-server-idle", "idle") == (1, b"match: busy\n")


async def test_the_databases_role_check_answers_its_role(tmp_path: Path) -> None:
    files = ContainerFiles(tmp_path)
    db = pod_named("databases/db-0")
    files.create(db)
    assert await run_probe(files, db.key, "database-role-value", "role") == (0, b"primary\n")
    files.write(db, DB_ROLE, "replica\n")
    assert await run_probe(files, db.key, "database-role-value", "role") == (0, b"replica\n")


async def test_the_web_container_answers_its_upstream_state(tmp_path: Path) -> None:
    files = ContainerFiles(tmp_path)
    web = pod_named("web/web-0")
    files.create(web)
    port = free_port()
    url = f"http://127.0.0.1:{port}/healthz/upstream"
    async with serving_http(files, [(web, "127.0.0.1")], port), aiohttp.ClientSession() as session:
        async with session.get(url) as answer:
            assert (answer.status, await answer.text()) == (200, "upstream reachable\n")
        files.write(web, UPSTREAM, "unreachable\n")
        async with session.get(url) as answer:
            assert (answer.status, await answer.text()) == (503, "upstream unreachable\n")
        async with session.get(f"http://127.0.0.1:{port}/") as answer:
            assert answer.status == 404


async def test_an_address_this_host_lacks_is_refused_with_the_reason(tmp_path: Path) -> None:
    files = ContainerFiles(tmp_path)
    web = pod_named("web/web-0")
    # 192.0.2.0/24 is TEST-NET-1 (RFC 5737): never assigned to a host.
    with pytest.raises(
        DemoError,
        match=r"cannot listen on 192\.0\.2\.1:\d+, the IP the sim "
        r"gave pod web/web-0: .*every 127\.x\.y\.z address",
    ):
        async with serving_http(files, [(web, "192.0.2.1")], free_port()):
            pass
