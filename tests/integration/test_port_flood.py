"""Issue 22 (3, 4): connections to the health and metrics port must not starve the
daemon nor flood its log.

The real `probemarker run` in a child process with the open-files limit containers
get (1024 soft and hard), against the sim. 1100 connections to its port, each sending
half a request line and then nothing, from one pod-like address, or spread over 20
of them. Meanwhile a probe's answer flips: the label is written within 15 s; /healthz
from the node's address answers at once; every flooding connection is closed by the
server within its idle timeout; the log stays a handful of lines; /metrics counts the
connections closed to make room.
Before the fix the daemon ran out of descriptors: no label written, no /healthz, and a
traceback per failed accept() (hundreds of thousands of lines).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import socket
import sys
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anyio
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from probemarker.observe.descriptors import raise_open_files_limit
from probemarker.observe.serve import IDLE_TIMEOUT
from probemarker.sim.exec.runners import ExecReply
from tests.integration.world import World, flag, labels_of, marker

LIMIT = 1024  # `prlimit --nofile=1024:1024`, as the issue measured
CONNECTIONS = 1100
NODE = "127.0.0.1"  # the kubelet's probes come from the node's address


def launch(soft: int, hard: int) -> str:
    """`probemarker run` with the limit set inside the child itself (no preexec_fn)."""
    return (
        "import resource, sys; "
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({soft}, {hard})); "
        "from probemarker.cli import main; sys.exit(main())"
    )


class Daemon:
    """The child's JSON log lines, read as they come (a flood is read too, not left to
    fill the pipe), and what the test waits for in them."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[dict[str, Any]] = []
        self.not_json = 0
        self._arrived = anyio.Event()

    async def read(self) -> None:
        assert self.process.stderr is not None
        async for raw in self.process.stderr:
            try:
                line = orjson.loads(raw)
            except orjson.JSONDecodeError:
                self.not_json += 1
                line = {"event": "<not json>"}
            self.lines.append(line if isinstance(line, dict) else {"event": "<not json>"})
            self._arrived.set()
            self._arrived = anyio.Event()

    async def wait_event(self, event: str, *, within: float = 20.0) -> dict[str, Any]:
        with anyio.fail_after(within):
            while True:
                for line in self.lines:
                    if line.get("event") == event:
                        return line
                await self._arrived.wait()


@contextlib.asynccontextmanager
async def daemon_with_limit(
    world: World, soft: int = LIMIT, hard: int = LIMIT
) -> AsyncIterator[Daemon]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROBEMARKER_")}
    env.pop("KUBECONFIG", None)
    env["PROBEMARKER_METRICS_ADDRESS"] = f"{NODE}:0"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        launch(soft, hard),
        "run",
        "--kubeconfig",
        str(world.sim.kubeconfig_path),
        "--node",
        "node-1",
        "--log-format",
        "json",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    daemon = Daemon(process)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(daemon.read)
            try:
                yield daemon
            finally:
                group.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def half_a_request(port: int, source: str) -> socket.socket:
    """A connection from `source` that sends half a request line and then nothing.
    The server may close it at once (refused): that is fine."""
    sock = socket.socket()
    sock.setblocking(False)
    sock.bind((source, 0))
    loop = asyncio.get_running_loop()
    with contextlib.suppress(OSError):
        await loop.sock_connect(sock, (NODE, port))
        await loop.sock_sendall(sock, b"GET /metr")
    return sock


async def closed_by_server(sock: socket.socket) -> None:
    loop = asyncio.get_running_loop()
    with contextlib.suppress(OSError):
        while await loop.sock_recv(sock, 4096):
            pass


async def get(port: int, path: str) -> tuple[int, str]:
    timeout = aiohttp.ClientTimeout(total=5)
    connector = aiohttp.TCPConnector(local_addr=(NODE, 0), force_close=True)
    async with (
        aiohttp.ClientSession(timeout=timeout, connector=connector) as session,
        session.get(f"http://{NODE}:{port}{path}") as response,
    ):
        return response.status, await response.text()


def metric(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    raise AssertionError(f"no {name}{labels}")


@pytest.fixture(autouse=True)
def enough_descriptors_here() -> None:
    """The test itself holds 1100 sockets and the sim: its own soft limit up to the
    hard one (what the daemon does at start-up too)."""
    raise_open_files_limit()
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < CONNECTIONS + 500:
        pytest.skip(f"this process may open {soft} files; the test needs {CONNECTIONS + 500}")


# the addresses the flood comes from
FLOODS = [
    pytest.param(["127.0.0.2"], id="one-address"),
    pytest.param([f"127.0.0.{i}" for i in range(2, 22)], id="twenty-addresses"),
]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("sources", FLOODS)
async def test_a_flood_of_idle_connections_starves_nothing(
    world: World, sources: list[str]
) -> None:
    await world.create_pod("gs-1", labels={"app": "game"})
    await world.apply_marker(marker("m", probes=[flag("idle")]))
    async with daemon_with_limit(world) as daemon:
        port = int((await daemon.wait_event("metrics.serving"))["port"])
        await world.wait_pod("gs-1", lambda p: labels_of(p).get("idle") == "yes", within=20)
        before = len(daemon.lines)

        with anyio.fail_after(30):
            flood = await asyncio.gather(
                *(half_a_request(port, sources[i % len(sources)]) for i in range(CONNECTIONS))
            )
        try:
            world.script.set("gs-1", "app", "check", ExecReply(1, b"busy\n"))
            await world.wait_pod("gs-1", lambda p: labels_of(p).get("idle") == "no", within=15)

            # the node's address gets in at once: the flood's oldest makes room
            assert (await get(port, "/healthz"))[0] == 200
            # every flooding connection closed by the server, within its idle timeout
            with anyio.fail_after(IDLE_TIMEOUT + 10):
                await asyncio.gather(*(closed_by_server(sock) for sock in flood))
        finally:
            for sock in flood:
                sock.close()

        status, text = await get(port, "/metrics")
        assert status == 200
        evicted = sum(
            metric(text, "probemarker_metrics_connections_evicted_total", reason=reason)
            for reason in ("limit", "peer_limit")
        )
        assert evicted >= CONNECTIONS - 64
        assert metric(text, "probemarker_metrics_connections_limit") == 64
        assert metric(text, "probemarker_metrics_connections_open") <= 2
        assert metric(text, "process_max_fds") == LIMIT

    during = daemon.lines[before:]
    assert daemon.not_json == 0
    # the flip (decided, written) and nothing for the 1100 connections
    assert len(during) <= 10, during
    assert not [line for line in during if "accept" in str(line.get("event"))]


async def test_the_daemon_takes_the_hard_limit_and_sizes_its_server_by_it(world: World) -> None:
    """Soft 256 under hard 2048 (what container runtimes often give, larger): the
    daemon raises the soft limit, says so, and its server takes 1/16 of it, at most 64."""
    async with daemon_with_limit(world, 256, 2048) as daemon:
        line = await daemon.wait_event("daemon.open_files_limit")
        assert (line["soft"], line["hard"], line["was"]) == (2048, 2048, 256)
        serving = await daemon.wait_event("metrics.serving")
        assert (serving["max_connections"], serving["max_connections_per_peer"]) == (64, 16)
        status, text = await get(int(serving["port"]), "/metrics")
        assert status == 200
        assert metric(text, "process_max_fds") == 2048
        assert metric(text, "probemarker_metrics_connections_limit") == 64


async def test_a_daemon_with_few_descriptors_keeps_the_server_small(world: World) -> None:
    async with daemon_with_limit(world, 128, 128) as daemon:
        serving = await daemon.wait_event("metrics.serving")
        assert (serving["max_connections"], serving["max_connections_per_peer"]) == (8, 2)
    assert not [line for line in daemon.lines if line.get("event") == "daemon.open_files_limit"]
