"""TLS session resumption with real handshakes: connections that find each other
mid-handshake, a session another context made, many first connections at once.

Issue 22 defect 0: with the informers' connections opened at the same moment, a
connection's `wrap_bio` read `SSLObject.session` of one whose handshake had not
finished, CPython raised `ValueError: i2d() failed.` and the daemon died at start-up.
The interleaving is made exact here: in memory (`MemoryPair`, a flight at a time), and
over sockets through a relay that holds every handshake until all have begun.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ssl
from collections.abc import Callable
from pathlib import Path

import pytest

from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.config import load_kubeconfig
from probemarker.kube.connect.errors import RequestInfo
from probemarker.kube.connect.tlsresume import ResumingSSLContext, SessionCache
from probemarker.sim import SimCluster
from probemarker.sim.server.harness.tls import TlsMaterial
from tests.kube.tls_peers import (
    HOST,
    NAME,
    HoldingRelay,
    MemoryPair,
    line_server,
    server_context,
    tls_files,
)

VERSIONS = [
    pytest.param(ssl.TLSVersion.TLSv1_3, id="tls1.3"),
    pytest.param(ssl.TLSVersion.TLSv1_2, id="tls1.2"),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return tls_files(tmp_path_factory.mktemp("tls"))


def client_context(files: TlsMaterial, cache: SessionCache | None = None) -> ResumingSSLContext:
    context = ResumingSSLContext(cache=cache)
    context.load_verify_locations(cafile=files.ca_path)
    return context


STAGES: dict[str, Callable[[MemoryPair], object]] = {
    "wrapped": lambda pair: pair,
    "hello-sent": MemoryPair.hello,
    "answered": lambda pair: pair.hello().answer(),
}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("stage", list(STAGES))
def test_a_connection_wrapped_while_another_handshake_is_unfinished(
    files: TlsMaterial, version: ssl.TLSVersion, stage: str
) -> None:
    client, server = client_context(files), server_context(files, version)
    first = MemoryPair(client, server)
    STAGES[stage](first)
    second = MemoryPair(client, server)  # its wrap_bio harvests `first`, unfinished
    assert client.cache.collected == 0  # nothing of an unfinished handshake is kept
    assert client.cache.offered == 0
    for pair in (first, second):
        pair.hello().finish()
        assert pair.data() == b"pong\n"
        assert not pair.client.session_reused
    third = MemoryPair(client, server).hello().finish()  # harvests both, now finished
    assert client.cache.collected == 2
    assert client.cache.offered == 1
    assert third.client.session_reused


@pytest.mark.parametrize("version", VERSIONS)
def test_a_session_of_another_context_is_dropped_not_raised(
    files: TlsMaterial, version: ssl.TLSVersion
) -> None:
    """A cache shared by two contexts (a `KubeClient` opened again keeps its cache and
    makes a new context): OpenSSL refuses the other context's session ("Session refers to
    a different SSLContext."); the connection goes on with a full handshake."""
    cache = SessionCache()
    server = server_context(files, version)
    old = client_context(files, cache)
    MemoryPair(old, server).hello().finish().data()
    MemoryPair(old, server).hello().finish()  # collects the first one's session
    assert cache.collected == 1

    new = client_context(files, cache)
    fresh = MemoryPair(new, server).hello().finish()
    assert not fresh.client.session_reused
    assert cache.unusable == 1
    assert cache.offered == 1  # the old context's second connection; none here
    fresh.data()
    resumed = MemoryPair(new, server).hello().finish()  # the new context's own session
    assert resumed.client.session_reused
    assert (cache.offered, cache.collected) == (2, 2)


async def exchange(context: ssl.SSLContext, port: int) -> bool:
    """One connection as asyncio makes it: a line each way; True if it resumed."""
    reader, writer = await asyncio.open_connection(
        HOST, port, ssl=context, server_hostname=NAME, ssl_handshake_timeout=10
    )
    try:
        writer.write(b"ping\n")
        assert await reader.readline() == b"pong\n"  # the TLS 1.3 tickets came before it
        ssl_object = writer.get_extra_info("ssl_object")
        return bool(ssl_object.session_reused)
    finally:
        writer.close()
        await writer.wait_closed()


CONNECTIONS = 12  # more than the context keeps pending


@pytest.mark.parametrize("version", VERSIONS)
async def test_many_first_connections_at_once(files: TlsMaterial, version: ssl.TLSVersion) -> None:
    """Each connection is opened while all the earlier ones are mid-handshake (the relay
    holds them all until the last has sent its ClientHello), as the informers' and the
    first execs' connections are at start-up."""
    client = client_context(files)
    async with (
        asyncio.timeout(20),
        line_server(server_context(files, version)) as port,
        HoldingRelay(port) as relay,
    ):
        async with asyncio.TaskGroup() as group:
            done = []
            for n in range(1, CONNECTIONS + 1):
                done.append(group.create_task(exchange(client, relay.port)))
                await relay.wait_hellos(n)
            relay.release()
        assert [task.result() for task in done] == [False] * CONNECTIONS
        assert client.cache.collected == 0

        assert await exchange(client, port)  # resumption works once they are done
    assert client.cache.collected >= 1  # from the finished handshakes it still kept
    assert (client.cache.offered, client.cache.unusable) == (1, 0)


LIST = RequestInfo("list", "pods", namespace="default")
PODS = "/api/v1/namespaces/default/pods"


async def test_a_client_whose_first_requests_go_out_together(tmp_path: Path) -> None:
    """The daemon's start-up: its `KubeClient` (aiohttp) sends its first requests at once
    to an HTTPS API server (the sim), each new connection wrapped while the earlier
    ones are mid-handshake; afterwards a watch, on a new connection, resumes."""
    async with (
        asyncio.timeout(30),
        SimCluster(https=True, token="t", node_names=("node-1",)) as sim,
        HoldingRelay(sim.port) as relay,
    ):
        connection = await load_kubeconfig(sim.kubeconfig_path)
        connection = dataclasses.replace(connection, server=f"https://{HOST}:{relay.port}")
        async with KubeClient(connection) as client, asyncio.TaskGroup() as group:
            lists = []
            for n in range(1, 5):
                lists.append(group.create_task(client.request("GET", PODS, info=LIST)))
                await relay.wait_hellos(n)
            relay.release()
        assert all(task.result()["kind"] == "PodList" for task in lists)
        assert client.tls_sessions.collected == 0

        async with KubeClient(connection) as client:
            await client.request("GET", PODS, info=LIST)
            params = {"watch": "1", "resourceVersion": "0", "timeoutSeconds": "1"}
            async with client.stream_lines(PODS, info=LIST, params=params, read_timeout=5) as lines:
                async for _ in lines:
                    pass
            assert (client.tls_sessions.collected, client.tls_sessions.offered) == (1, 1)
