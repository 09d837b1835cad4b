"""Real servers for the network handlers' tests, bound to a pod-like 127.x address.

`http_server` serves an aiohttp application whose routes are the cases of the httpGet
table (ok, redirects, errors, slow headers, slow body, header echo); it counts the
connections it accepted, so reuse is visible. `tcp_listener` is a listening socket;
`filtered_port` is a listening socket whose accept queue is full, so a further
connect gets no answer at all (Linux drops the SYN), the way a filtered port looks.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from aiohttp import web

from probemarker.sim.server.harness.tls import generate_tls

OTHER_HOST = "192.0.2.10"  # TEST-NET-1: never reached, a redirect there is not followed


@dataclass
class HTTPServer:
    host: str
    port: int
    peers: set[tuple[str, int]] = field(default_factory=set)  # connections seen
    requests: list[web.Request] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)  # ends the slow routes
    arrived: asyncio.Event = field(default_factory=asyncio.Event)  # set by each request


# A web server's error page, more than the 1 KiB a probe reads.
HTML_404 = (
    "<!DOCTYPE html>\n<html>\n<head><title>404 Not Found</title></head>\n<body>\n"
    "<center><h1>404 Not Found</h1></center>\n"
    + "<p>The page you asked for is not here.</p>\n" * 40
    + "<hr><center>nginx</center>\n</body>\n</html>\n"
)


def _app(server: HTTPServer) -> web.Application:
    async def ok(_: web.Request) -> web.Response:
        return web.Response(text="all good")

    async def status(request: web.Request) -> web.Response:
        code = int(request.match_info["code"])
        return web.Response(status=code, text=f"answer {code}")

    async def redirect(request: web.Request) -> web.Response:
        where = request.query["to"]
        return web.Response(status=302, headers={"Location": where}, text="moved")

    async def loop(_: web.Request) -> web.Response:
        return web.Response(status=307, headers={"Location": "/loop"})

    async def multiple_choices(_: web.Request) -> web.Response:
        return web.Response(status=300, headers={"Location": "/ok"}, text="choose")

    async def no_location(_: web.Request) -> web.Response:
        return web.Response(status=301, text="moved, but where")

    async def echo(request: web.Request) -> web.Response:
        pairs = [[k, v] for k, v in request.headers.items()]
        return web.Response(body=orjson.dumps(pairs), content_type="application/json")

    async def slow_headers(_: web.Request) -> web.Response:
        await server.release.wait()
        return web.Response(text="late")

    async def slow_body(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b"first part ")
        await server.release.wait()
        return response

    async def big(_: web.Request) -> web.Response:
        return web.Response(text="x" * 5000 + "END")

    async def hostile(_: web.Request) -> web.Response:
        return web.Response(text="\x1b[31mred\x1b[0m and\x00 nul \u202e")

    async def html_404(_: web.Request) -> web.Response:
        return web.Response(status=404, text=HTML_404, content_type="text/html")

    async def hostile_500(_: web.Request) -> web.Response:
        # escapes, a newline in the first 100 bytes, and megabytes after
        line = "\x1b[31mFAIL\x1b[0m\x00 " + "x" * 80 + "\r\nsecond line\n"
        return web.Response(status=500, text=line + "y\n" * 2_000_000)

    @web.middleware
    async def count(request: web.Request, handler: web.Handler) -> web.StreamResponse:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        if peer is not None:
            server.peers.add((peer[0], peer[1]))
        server.requests.append(request)
        server.arrived.set()
        return await handler(request)

    app = web.Application(middlewares=[count])
    app.router.add_get("/ok", ok)
    app.router.add_get("/status/{code}", status)
    app.router.add_get("/redirect", redirect)
    app.router.add_get("/loop", loop)
    app.router.add_get("/no-location", no_location)
    app.router.add_get("/multiple-choices", multiple_choices)
    app.router.add_get("/echo", echo)
    app.router.add_get("/slow-headers", slow_headers)
    app.router.add_get("/slow-body", slow_body)
    app.router.add_get("/big", big)
    app.router.add_get("/hostile", hostile)
    app.router.add_get("/html-404", html_404)
    app.router.add_get("/hostile-500", hostile_500)
    return app


@asynccontextmanager
async def http_server(
    host: str, *, tls_dir: Path | None = None, port: int = 0
) -> AsyncIterator[HTTPServer]:
    """An HTTP (or, with `tls_dir`, HTTPS with a self-signed certificate) server."""
    context: ssl.SSLContext | None = None
    if tls_dir is not None:
        context = generate_tls(tls_dir).server_context()
    server = HTTPServer(host, 0)
    runner = web.AppRunner(_app(server), shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=context)
    await site.start()
    server.port = runner.addresses[0][1]
    try:
        yield server
    finally:
        server.release.set()
        await runner.cleanup()


def free_port(host: str) -> int:
    """A port on `host` that nothing listens on (bound and released: a connect is
    refused, and a server may take it)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
    return port


@contextmanager
def closed_port(host: str) -> Iterator[int]:
    """`free_port`, as a context manager like the other openers."""
    yield free_port(host)


@contextmanager
def tcp_listener(host: str) -> Iterator[int]:
    with socket.socket() as listener:
        listener.bind((host, 0))
        listener.listen(16)
        yield listener.getsockname()[1]


@contextmanager
def filtered_port(host: str) -> Iterator[int]:
    """A port whose accept queue is full: Linux drops further SYNs, no answer comes."""
    with socket.socket() as listener:
        listener.bind((host, 0))
        listener.listen(0)
        port: int = listener.getsockname()[1]
        fillers = []
        try:
            for _ in range(3):
                filler = socket.socket()
                filler.setblocking(False)
                with suppress(BlockingIOError):
                    filler.connect((host, port))
                fillers.append(filler)
            yield port
        finally:
            for filler in fillers:
                filler.close()
