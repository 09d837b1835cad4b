"""Idle connections to the health and metrics port against a daemon with a container's
open-files limit (issue 22: defects 3 and 4).

The sim runs in this process with one pod and a marker of one exec probe (period 1 s)
that sets `idle=yes|no`; `probemarker run` runs in a child process whose open-files
limit is set to `--limit` (soft and hard, as `prlimit --nofile=1024:1024`). Once the
label is written, `--connections` connections from `--sources` pod-like addresses
(127.0.0.2, ...) each send half a request line and then nothing; the probe's answer
flips at once. For `--seconds` from the flood's start it measures:

- how long the flipped label took to be written (or that it was not);
- /healthz from the node's address (127.0.0.1): the status and how long it took, or
  the error, right after the flip; then every 0.5 s until the end, how many answered;
- with `--reconnect`, each flooding connection comes back as soon as the server
  closes it (a flood that does not end), and how many times they did;
- the daemon's open descriptors (/proc/PID/fd), at most, sampled every 0.1 s;
- the daemon's log: lines and bytes written from the flood's start to the end (at
  least `--seconds`; longer when the label or /healthz keep it waiting, as printed).

    python bench/port_flood.py                                  # 1100 from one address
    python bench/port_flood.py --sources 20
    python bench/port_flood.py --sources 20 --reconnect --seconds 20
    python bench/port_flood.py --connections 1100 --limit 1024 --seconds 10

Run it in another checkout to compare (the daemon is imported from the current
directory). Prints the figures and the command that reproduces them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import resource
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from kubernetes_asyncio import client

from probemarker.sim import SimCluster
from probemarker.sim.exec.runners import ExecReply
from tests.integration.world import Script, World, flag, labels_of, marker

NODE = "127.0.0.1"


def launch(limit: int) -> str:
    return (
        "import resource, sys; "
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, {limit})); "
        "from probemarker.cli import main; sys.exit(main())"
    )


def read(log: Path) -> bytes:
    """The daemon's log so far (a small file but for the flood being measured)."""
    return log.read_bytes()


async def metrics_port(log: Path, *, within: float = 20.0) -> int:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for raw in read(log).splitlines():
            with contextlib.suppress(orjson.JSONDecodeError):
                line = orjson.loads(raw)
                if isinstance(line, dict) and line.get("event") == "metrics.serving":
                    return int(line["port"])
        await asyncio.sleep(0.05)
    raise SystemExit(f"the daemon did not listen within {within:g}s; its log: {log}")


async def half_a_request(port: int, source: str) -> socket.socket:
    sock = socket.socket()
    sock.setblocking(False)
    sock.bind((source, 0))
    loop = asyncio.get_running_loop()
    with contextlib.suppress(OSError):
        await asyncio.wait_for(loop.sock_connect(sock, (NODE, port)), 10)
        await loop.sock_sendall(sock, b"GET /metr")
    return sock


async def keep_flooding(port: int, source: str, stop: asyncio.Event, count: list[int]) -> None:
    """Half a request, wait until the server closes it, again: until `stop`."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        sock = await half_a_request(port, source)
        count[0] += 1
        with sock, contextlib.suppress(OSError, TimeoutError):
            while await asyncio.wait_for(loop.sock_recv(sock, 4096), 1.0):
                pass


async def healthz(port: int) -> str:
    started = time.monotonic()
    connector = aiohttp.TCPConnector(local_addr=(NODE, 0), force_close=True)
    try:
        async with (
            aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=5)
            ) as session,
            session.get(f"http://{NODE}:{port}/healthz") as response,
        ):
            await response.read()
            return f"{response.status} in {time.monotonic() - started:.2f}s"
    except (aiohttp.ClientError, TimeoutError) as err:
        return f"no answer after {time.monotonic() - started:.2f}s ({type(err).__name__})"


async def sample_fds(pid: int, peak: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(OSError):
            peak[0] = max(peak[0], len(os.listdir(f"/proc/{pid}/fd")))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.1)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # this side's sockets
    sources = [f"127.0.0.{i}" for i in range(2, 2 + args.sources)]
    async with SimCluster(node_names=("node-1",)) as sim:
        sim.kubelet.auto_finish_deletion = True
        async with client.ApiClient(sim.configuration()) as api:
            world = World(sim, api, Script())
            await world.install_crd()
            await world.create_pod("gs-1", labels={"app": "game"})
            await world.apply_marker(marker("m", probes=[flag("idle")]))
            env = {k: v for k, v in os.environ.items() if not k.startswith("PROBEMARKER_")}
            env["PROBEMARKER_METRICS_ADDRESS"] = f"{NODE}:0"
            with tempfile.TemporaryDirectory() as tmp:
                log = Path(tmp) / "daemon.log"
                with log.open("wb") as out:
                    child = await asyncio.create_subprocess_exec(
                        sys.executable, "-c", launch(args.limit), "run",
                        "--kubeconfig", str(sim.kubeconfig_path), "--node", "node-1",
                        "--log-format", "json",
                        stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out, env=env,
                    )  # fmt: skip
                try:
                    return await measure(args, world, child.pid, log, sources)
                finally:
                    child.kill()
                    await child.wait()


async def measure(
    args: argparse.Namespace, world: World, pid: int, log: Path, sources: list[str]
) -> dict[str, Any]:
    port = await metrics_port(log)
    await world.wait_pod("gs-1", lambda p: labels_of(p).get("idle") == "yes", within=20)
    before = read(log)
    size, lines = len(before), len(before.splitlines())
    peak, stop = [0], asyncio.Event()
    sampler = asyncio.create_task(sample_fds(pid, peak, stop))
    started = time.monotonic()
    flood = await asyncio.gather(
        *(half_a_request(port, sources[i % len(sources)]) for i in range(args.connections))
    )
    opened = time.monotonic() - started
    reconnects, attackers = [0], []
    if args.reconnect:
        # every flooding connection comes back as soon as it is closed
        attackers = [
            asyncio.create_task(keep_flooding(port, sources[i % len(sources)], stop, reconnects))
            for i in range(args.connections)
        ]
    world.script.set("gs-1", "app", "check", ExecReply(1, b"busy\n"))
    flipped = time.monotonic()
    try:
        await world.wait_pod("gs-1", lambda p: labels_of(p).get("idle") == "no", within=15)
        flip = f"written after {time.monotonic() - flipped:.2f}s"
    except TimeoutError:
        flip = "not written within 15s"
    health = await healthz(port)
    answers = []
    while time.monotonic() - started < args.seconds:
        answers.append(await healthz(port))
        await asyncio.sleep(0.5)
    stop.set()
    await sampler
    await asyncio.gather(*attackers)
    for sock in flood:
        sock.close()
    data = read(log)
    window = time.monotonic() - started
    return {
        "connections": args.connections,
        "sources": args.sources,
        "reconnect": args.reconnect,
        "limit": args.limit,
        "seconds": args.seconds,
        "flood_sent_in": round(opened, 2),
        "label_flip": flip,
        "healthz_during_flood": health,
        "healthz_after_flip": f"{sum(a.startswith('200') for a in answers)} of {len(answers)}"
        " answered 200",
        "reconnects": reconnects[0],
        "daemon_fds_max": peak[0],
        "measured_over_s": round(window, 1),
        "log_lines": len(data.splitlines()) - lines,
        "log_bytes": len(data) - size,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=1100)
    parser.add_argument("--sources", type=int, default=1, help="pod-like addresses (1-200)")
    parser.add_argument("--limit", type=int, default=1024, help="the daemon's open files")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument(
        "--reconnect", action="store_true", help="each connection comes back once closed"
    )
    args = parser.parse_args()
    if not 1 <= args.sources <= 200 or args.connections < 1 or args.limit < 16:
        parser.error("--sources 1-200, --connections >= 1, --limit >= 16")
    figures = asyncio.run(run(args))
    print(
        f"# {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs"
    )
    width = max(map(len, figures))
    for name, value in figures.items():
        print(f"{name:<{width}}  {value}")
    command = (
        f"python bench/port_flood.py --connections {args.connections} --sources {args.sources}"
        f" --limit {args.limit} --seconds {args.seconds:g}"
        + (" --reconnect" if args.reconnect else "")
    )
    print(f"# reproduce: {command}")


if __name__ == "__main__":
    main()
