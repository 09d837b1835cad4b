"""The status socket: one request line in, one JSON document out, mode 0600, bounded."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from probemarker.api.model import MarkerRef
from probemarker.observe.statussocket import (
    REQUEST_LIMIT,
    RequestError,
    StatusRequest,
    StatusSocket,
    StatusSocketError,
    parse_request,
)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b"", StatusRequest()),
        (b"\n", StatusRequest()),
        (b'{"pod": "ns/web-0"}\n', StatusRequest(pod=("ns", "web-0"))),
        (b'{"marker": "ns/m", "pod": null}', StatusRequest(marker=MarkerRef("ns", "m"))),
        (b'{"namespace": "ns", "pod": null}', StatusRequest(namespace="ns")),
    ],
)
def test_requests(line: bytes, expected: Any) -> None:
    assert parse_request(line) == expected


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b"{", "not JSON"),
        (b"[]", "must be"),
        (b'{"pods": "a/b"}', "must be"),
        (b'{"pod": "web-0"}', "pod must be NAMESPACE/NAME"),
        (b'{"marker": 3}', "marker must be"),
        (b'{"pod": "a/b/c"}', "pod must be"),
        (b'{"namespace": ""}', "namespace must be a namespace's name"),
        (b'{"namespace": "a/b"}', "namespace must be"),
    ],
)
def test_bad_requests_say_why(line: bytes, problem: str) -> None:
    with pytest.raises(RequestError, match=problem):
        parse_request(line)


async def ask(path: str, line: bytes) -> Any:
    reader, writer = await asyncio.open_unix_connection(path)
    writer.write(line)
    await writer.drain()
    body = await reader.read()
    writer.close()
    await writer.wait_closed()
    return orjson.loads(body)


async def test_it_answers_each_request_and_is_only_the_users(tmp_path: Path) -> None:
    path = str(tmp_path / "status.sock")
    asked: list[Any] = []

    def answer(request: StatusRequest) -> bytes:
        asked.append(request)
        return orjson.dumps({"pods": len(asked)})

    async with asyncio.timeout(10):
        async with StatusSocket(path, answer) as server:
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
            assert await ask(path, b'{"pod": "ns/a"}\n') == {"pods": 1}
            assert (await ask(path, b"nonsense\n"))["error"].startswith("the request is not JSON")
            too_long = await ask(path, b"x" * (REQUEST_LIMIT * 2) + b"\n")
            assert "error" in too_long
            assert asked == [StatusRequest(pod=("ns", "a"))]  # nothing built for a bad request
            assert server.answered == 3
        assert not await anyio.Path(path).exists()


async def test_a_stale_socket_is_replaced_and_anything_else_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "status.sock")
    async with asyncio.timeout(10):
        async with StatusSocket(path, lambda request: b"{}\n"):
            pass
        stale = await asyncio.start_unix_server(lambda r, w: None, path)  # left behind
        stale.close()
        await stale.wait_closed()
        async with StatusSocket(path, lambda request: b'{"ok": true}\n'):
            assert await ask(path, b"\n") == {"ok": True}
        await anyio.Path(path).write_text("not a socket")
        with pytest.raises(StatusSocketError, match=r"--status-socket .*not a socket"):
            async with StatusSocket(path, lambda request: b"{}\n"):
                pass
        missing = str(tmp_path / "no" / "such" / "dir.sock")
        with pytest.raises(StatusSocketError, match="cannot listen"):
            async with StatusSocket(missing, lambda request: b"{}\n"):
                pass


async def test_the_umask_is_the_processs_own_again_before_the_first_await(
    tmp_path: Path,
) -> None:
    """The umask is process-wide: another task that runs while the socket starts (the
    server yields once after binding) creates its files with the daemon's own umask,
    not the socket's 0177."""
    path = str(tmp_path / "status.sock")
    seen: list[int] = []

    async def meanwhile() -> None:
        mask = os.umask(0o022)
        os.umask(mask)
        seen.append(mask)

    previous = os.umask(0o022)
    try:
        async with asyncio.timeout(10):
            task = asyncio.create_task(meanwhile())
            async with StatusSocket(path, lambda request: b"{}\n"):
                await task
                assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    finally:
        os.umask(previous)
    assert seen == [0o022]


async def test_a_reader_past_the_cap_is_told_the_daemon_is_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connections past the cap get an error that says so (an empty answer would be
    printed as "the daemon's answer is not JSON")."""
    from probemarker.observe import statussocket

    monkeypatch.setattr(statussocket, "CONNECTIONS", 1)
    path = str(tmp_path / "status.sock")
    async with asyncio.timeout(10):
        async with StatusSocket(path, lambda request: b'{"ok": true}\n'):
            _holder, holding = await asyncio.open_unix_connection(path)  # asks nothing yet
            try:
                answer = await ask(path, b"\n")
                assert answer["error"].startswith("busy: ")
                assert "try again" in answer["error"]
            finally:
                holding.close()
                await holding.wait_closed()
