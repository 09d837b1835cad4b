"""Real TLS peers for the session resumption tests, with the handshake under the test's control.

`tls_files` makes a CA and a 127.0.0.1/localhost server certificate (the sim's
`generate_tls`). `server_context(files, version)` serves TLS 1.3 or TLS 1.2 only.

`MemoryPair`: a client `SSLObject` (from the context under test, through its
`wrap_bio`, as asyncio calls it) and a server one joined by memory BIOs, moved a
flight at a time: `hello()` writes the ClientHello, `answer()` has the server answer
it and the client take the answer in (TLS 1.3: the client is done, the server waits
for its Finished; TLS 1.2: the client waits for the server's Finished), `finish()`
completes the handshake, `data()` sends a line from the server so the client reads
the TLS 1.3 tickets. No sockets, no loop: every interleaving is exact.

`HoldingRelay`: a TCP relay in front of a TLS server that holds every connection's
bytes until `release()`, so each client's handshake stays unfinished (its ClientHello
sent, no answer) while the next ones connect; `hellos` counts the connections whose
first bytes arrived, and `wait_hellos(n)` waits for the n-th.

`line_server`: an asyncio TLS server that answers every line with `pong`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

from probemarker.sim.server.harness.tls import TlsMaterial, generate_tls

HOST = "127.0.0.1"
NAME = "localhost"  # the server name the client verifies (on the certificate)


def tls_files(directory: Path) -> TlsMaterial:
    return generate_tls(directory)


def server_context(files: TlsMaterial, version: ssl.TLSVersion) -> ssl.SSLContext:
    context = files.server_context()
    context.minimum_version = version
    context.maximum_version = version
    return context


def _step(obj: ssl.SSLObject) -> None:
    with contextlib.suppress(ssl.SSLWantReadError):
        obj.do_handshake()


class MemoryPair:
    """One connection's two ends, joined by memory BIOs."""

    def __init__(self, client: ssl.SSLContext, server: ssl.SSLContext) -> None:
        self._to_server, self._from_client = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._to_client, self._from_server = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.client = client.wrap_bio(self._to_client, self._from_client, server_hostname=NAME)
        self.server = server.wrap_bio(self._to_server, self._from_server, server_side=True)

    def _carry(self) -> None:
        self._to_server.write(self._from_client.read())
        self._to_client.write(self._from_server.read())

    def hello(self) -> MemoryPair:
        _step(self.client)
        self._carry()
        return self

    def answer(self) -> MemoryPair:
        _step(self.server)
        self._carry()
        _step(self.client)
        self._carry()
        return self

    def finish(self) -> MemoryPair:
        for _ in range(4):
            _step(self.client)
            _step(self.server)
            self._carry()
        assert self.client.version() is not None, "the handshake did not finish"
        return self

    def data(self) -> bytes:
        """A line from the server, read by the client (which takes TLS 1.3 tickets in)."""
        self.server.write(b"pong\n")
        self._carry()
        return self.client.read(64)


class HoldingRelay:
    """Forwards connections to `target`, holding every byte until `release()`."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = 0
        self.hellos = 0
        self._arrived = asyncio.Condition()
        self._released = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []
        self._closing = False

    async def __aenter__(self) -> HoldingRelay:
        self._server = await asyncio.start_server(self._relay, HOST, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()
        self._closing = True  # a test that failed may leave connections held: end them
        self.release()
        for writer in self._writers:
            writer.close()
        await asyncio.gather(*self._handlers)
        await self._server.wait_closed()

    def release(self) -> None:
        self._released.set()

    async def wait_hellos(self, count: int) -> None:
        async with self._arrived:
            await self._arrived.wait_for(lambda: self.hellos >= count)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handler = asyncio.current_task()
        assert handler is not None
        self._handlers.add(handler)
        handler.add_done_callback(self._handlers.discard)
        self._writers.append(writer)
        with contextlib.suppress(ConnectionError), contextlib.closing(writer):
            first = await reader.read(65536)
            async with self._arrived:
                self.hellos += 1
                self._arrived.notify_all()
            await self._released.wait()
            if self._closing:
                return
            up_reader, up_writer = await asyncio.open_connection(HOST, self.target)
            up_writer.write(first)
            async with asyncio.TaskGroup() as pipes:
                pipes.create_task(_pipe(reader, up_writer))
                pipes.create_task(_pipe(up_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


@contextlib.asynccontextmanager
async def line_server(context: ssl.SSLContext) -> AsyncIterator[int]:
    """A TLS server answering each line with `pong`; yields its port."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            while await reader.readline():
                writer.write(b"pong\n")
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, HOST, 0, ssl=context)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()
