"""Many daemons started at once against one API server: how many exit before they are ready.

A DaemonSet rollout starts a daemon on every node within seconds, and each opens its
informers' connections at the same moment. Issue 22 (defect 0): against a real
kube-apiserver 1.32, 9 of 144 such starts died before becoming ready with
`ValueError: i2d() failed` from the TLS session cache (kube/connect/tlsresume.py read the
session of a connection still in its handshake). This bench counts those deaths.

What runs, each a process of its own:
- the API server: the sim in HTTPS mode with a bearer token (`probemarker sim serve
  --https --token ...`, its own process), or any server given with --kubeconfig (a real
  kube-apiserver of your own); the bench installs the PodProbeMarker
  CRD where it is missing and waits until it is served;
- with --handshake-delay-ms MS, a relay (a thread of the bench) between the daemons and
  the server that holds the server's first answer on each connection for a random
  0..MS ms, as a busy API server or one a network away answers handshakes late;
- per round, --daemons N of `python -m probemarker run --kubeconfig K --node storm-<i>
  --metrics-address 127.0.0.1:0`, JSON logs to one file each, started back to back:
  1. `start`: N daemons started at once;
  2. `restart`: once those are ready, SIGTERM to all of them and N fresh ones started at
     the same moment (a rollout: the API server serves the old ones' last requests and
     the new ones' lists together);
  then SIGTERM to all.

A daemon is `ready` when its /readyz (on the port of its `metrics.serving` line)
answers 200, `crashed` when it exits before that (the last `...Error: ...` line of its
output is printed; those with `i2d() failed` in their output are counted apart),
`stuck` when neither happens within --ready-timeout. Also: seconds from start to ready
(median, max), and the exit codes of the daemons stopped with SIGTERM (0 expected).

Which starts crashed before the fix: a daemon died when the pods informer's LIST had
finished (its watch opening a new connection harvests sessions) while the markers
informer's first connection still waited for the server's answer to its ClientHello.
On one 2-core machine the loopback answers at once and the daemons' own CPU is the
bottleneck, so the window is narrow: 0 of 300 starts (30 at once) and 0 of 100 (10 at
once) crashed against a real kube-apiserver 1.32 on the loopback, but 19 of 100 with
--handshake-delay-ms 50, and 29 of 100 against the sim with it.

    python bench/startup_storm.py                               # 3 rounds of 30, the sim
    python bench/startup_storm.py --daemons 10 --rounds 5 --handshake-delay-ms 50
    python bench/startup_storm.py --kubeconfig ADMIN.kubeconfig   # a real server

Prints the figures and the command that reproduces them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
TOKEN = "storm-token"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
MARKERS_PATH = "/apis/probemarker.io/v1alpha1/podprobemarkers"


@dataclass
class Daemon:
    """`probemarker run` for one node, logging JSON to its own file."""

    kubeconfig: str
    node: str
    log: Path
    process: subprocess.Popen[bytes] = field(init=False)
    started: float = field(init=False)
    port: int | None = None
    outcome: str = ""  # "", "ready", "crashed", "stuck"
    seconds: float = 0.0  # start to ready, or to exit

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO), "PROBEMARKER_LOG_FORMAT": "json"}
        command = [PYTHON, "-m", "probemarker", "run", "--kubeconfig", self.kubeconfig]
        command += ["--node", self.node, "--metrics-address", "127.0.0.1:0"]
        with self.log.open("wb") as sink:
            self.process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env)
        self.started = time.monotonic()

    def look(self, now: float, within: float) -> None:
        """Move on one step: find the port, ask /readyz, notice an exit or the deadline."""
        if self.process.poll() is not None:
            self.outcome, self.seconds = "crashed", now - self.started
        elif self.port is None:
            self.port = _metrics_port(self.log)
        elif _ready(self.port):
            self.outcome, self.seconds = "ready", now - self.started
        if not self.outcome and now - self.started > within:
            self.outcome = "stuck"

    def last_error(self) -> str:
        """The last `SomeError: ...` line of its output (a traceback's), else its last line."""
        lines = self.log.read_text(errors="replace").strip().splitlines() or ["(no output)"]
        errors = [m.group(0) for line in lines if (m := ERROR_LINE.search(line))]
        return (errors or lines)[-1][:200]


ERROR_LINE = re.compile(r"\b\w+(Error|Exception|Group)\b: .*")


def _metrics_port(log: Path) -> int | None:
    for line in log.read_bytes().splitlines():
        if b'"metrics.serving"' in line:
            return int(json.loads(line)["port"])
    return None


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def wait_all(daemons: list[Daemon], within: float) -> None:
    while any(not d.outcome for d in daemons):
        now = time.monotonic()
        for daemon in daemons:
            if not daemon.outcome:
                daemon.look(now, within)
        time.sleep(0.05)


def terminate(daemons: list[Daemon]) -> list[Daemon]:
    """SIGTERM, once, to every one still running; those signalled."""
    running = [d for d in daemons if d.process.poll() is None]
    for daemon in running:
        daemon.process.send_signal(signal.SIGTERM)
    return running


def reap(daemons: list[Daemon]) -> list[int]:
    """Their exit codes (killed after 60 s: -9)."""
    codes = []
    for daemon in daemons:
        try:
            codes.append(daemon.process.wait(60))
        except subprocess.TimeoutExpired:
            daemon.process.kill()
            codes.append(daemon.process.wait())
    return codes


@dataclass
class Phase:
    """One phase's tally over the rounds."""

    name: str
    outcomes: Counter[str] = field(default_factory=Counter)
    i2d: int = 0
    to_ready: list[float] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)
    stop_codes: Counter[int] = field(default_factory=Counter)

    def add(self, daemons: list[Daemon]) -> None:
        for daemon in daemons:
            self.outcomes[daemon.outcome] += 1
            if daemon.outcome == "ready":
                self.to_ready.append(daemon.seconds)
            elif daemon.outcome == "crashed":
                code = daemon.process.returncode
                self.crashes.append(f"{daemon.node} exit {code}: {daemon.last_error()}")
                self.i2d += "i2d() failed" in daemon.log.read_text(errors="replace")

    def row(self) -> str:
        started = sum(self.outcomes.values())
        ready = self.to_ready or [float("nan")]
        return (
            f"{self.name:8} {started:7} {self.outcomes['ready']:6} {self.outcomes['crashed']:8}"
            f" {self.i2d:10} {self.outcomes['stuck']:6}"
            f" {statistics.median(ready):9.1f} {max(ready):8.1f}"
            f"  {dict(sorted(self.stop_codes.items()))}"
        )


def run_rounds(kubeconfig: str, args: argparse.Namespace, logs: Path) -> list[Phase]:
    start, restart = Phase("start"), Phase("restart")
    for round_ in range(args.rounds):
        nodes = [f"storm-{i}" for i in range(args.daemons)]
        first = [Daemon(kubeconfig, n, logs / f"r{round_}-start-{n}.log") for n in nodes]
        for daemon in first:
            daemon.start()
        wait_all(first, args.ready_timeout)
        start.add(first)
        second = [Daemon(kubeconfig, n, logs / f"r{round_}-restart-{n}.log") for n in nodes]
        stopping = terminate(first)  # all at once, the fresh ones right behind
        for daemon in second:
            daemon.start()
        start.stop_codes.update(reap(stopping))
        wait_all(second, args.ready_timeout)
        restart.add(second)
        restart.stop_codes.update(reap(terminate(second)))
        crashed = start.outcomes["crashed"] + restart.outcomes["crashed"]
        print(f"round {round_ + 1}/{args.rounds}: {crashed} crashed so far", flush=True)
    return [start, restart]


# --- the API server ----------------------------------------------------------------------------


class SlowHandshakes:
    """A TCP relay in front of the API server, in a thread of its own, that holds the
    server's first answer on each connection (the flight after the ClientHello) for a
    random 0..`most` seconds: a busy API server, or one a network away, answering
    handshakes late. On one machine the loopback answers at once, and the window in
    which a daemon's connections find each other mid-handshake is narrow."""

    def __init__(self, target: tuple[str, int], most: float) -> None:
        self.target, self.most = target, most
        self.port = 0
        self._up = threading.Event()
        threading.Thread(target=asyncio.run, args=(self._serve(),), daemon=True).start()
        self._up.wait(10)

    async def _serve(self) -> None:
        server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._up.set()
        await server.serve_forever()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        delay = random.uniform(0, self.most)
        with contextlib.suppress(OSError):
            up_reader, up_writer = await asyncio.open_connection(*self.target)
            async with asyncio.TaskGroup() as pipes:
                pipes.create_task(_pipe(reader, up_writer, 0.0))
                pipes.create_task(_pipe(up_reader, writer, delay))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, hold: float) -> None:
    with contextlib.suppress(OSError), contextlib.closing(writer):
        while data := await reader.read(1 << 16):
            await asyncio.sleep(hold)
            hold = 0.0
            writer.write(data)
            await writer.drain()


SERVER = re.compile(r"server: https://127\.0\.0\.1:(\d+)")


def relayed(kubeconfig: str, most: float, directory: Path) -> tuple[SlowHandshakes, str]:
    """A relay in front of `kubeconfig`'s server, and a copy of it that names the relay
    (the serving certificate holds 127.0.0.1 either way)."""
    text = Path(kubeconfig).read_text()
    match = SERVER.search(text)
    if match is None:
        raise SystemExit(f"{kubeconfig}: --handshake-delay-ms needs a server at https://127.0.0.1")
    relay = SlowHandshakes(("127.0.0.1", int(match.group(1))), most)
    copy = directory / "relayed.kubeconfig"
    copy.write_text(text.replace(match.group(0), f"server: https://127.0.0.1:{relay.port}"))
    return relay, str(copy)


def serve_sim(directory: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`probemarker sim serve --https --token` in its own process; its kubeconfig."""
    kubeconfig = directory / "sim.kubeconfig"
    command = [PYTHON, "-m", "probemarker", "sim", "serve", "--https", "--token", TOKEN]
    command += ["--kubeconfig-out", str(kubeconfig)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with (directory / "sim.log").open("wb") as log:
        sim = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, env=env)
    assert sim.stdout is not None
    while b"kubeconfig written" not in sim.stdout.readline():
        if sim.poll() is not None:
            raise SystemExit(f"the sim exited {sim.returncode}: see {directory / 'sim.log'}")
    return sim, str(kubeconfig)


async def install_crd(kubeconfig: str) -> None:
    """Create the CRD where it is missing; wait until its resource is served."""
    import orjson

    from probemarker.api.crd import build_crd
    from probemarker.kube.connect.client import KubeClient
    from probemarker.kube.connect.config import load_kubeconfig
    from probemarker.kube.connect.errors import ApiConflict, ApiNotFound, RequestInfo

    async with KubeClient(await load_kubeconfig(kubeconfig)) as client:
        info = RequestInfo("create", "customresourcedefinitions", group="apiextensions.k8s.io")
        try:
            body = orjson.dumps(build_crd())
            await client.request(
                "POST", CRD_PATH, info=info, body=body, content_type="application/json"
            )
        except ApiConflict:
            pass  # installed already
        listing = RequestInfo("list", "podprobemarkers", group="probemarker.io")
        for _ in range(120):
            try:
                await client.request("GET", MARKERS_PATH, info=listing)
                return
            except ApiNotFound:
                await asyncio.sleep(0.5)  # a real server establishes a new CRD in a moment
        raise SystemExit("the PodProbeMarker CRD was not served within 60 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--daemons", type=int, default=30, help="daemons started at once")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ready-timeout", type=float, default=180.0, metavar="SECONDS")
    parser.add_argument("--kubeconfig", help="a real API server (default: an HTTPS sim)")
    parser.add_argument(
        "--handshake-delay-ms",
        type=float,
        default=0.0,
        metavar="MS",
        help="relay the daemons' connections, holding each server's first answer 0..MS ms",
    )
    parser.add_argument("--keep-logs", action="store_true", help="keep the daemons' logs")
    args = parser.parse_args()

    directory = Path(tempfile.mkdtemp(prefix="startup-storm-"))
    sim = None
    try:
        if args.kubeconfig:
            kubeconfig, server = args.kubeconfig, "kubeconfig " + args.kubeconfig
        else:
            sim, kubeconfig = serve_sim(directory)
            server = "sim (probemarker sim serve --https --token)"
        asyncio.run(install_crd(kubeconfig))
        if args.handshake_delay_ms > 0:
            _, kubeconfig = relayed(kubeconfig, args.handshake_delay_ms / 1000, directory)
            server += f", handshakes answered 0-{args.handshake_delay_ms:g} ms late (relay)"
        began = time.monotonic()
        phases = run_rounds(kubeconfig, args, directory)
        took = time.monotonic() - began
    finally:
        if sim is not None:
            sim.send_signal(signal.SIGTERM)
            sim.wait(30)
    print()
    print(f"server: {server}; {args.rounds} rounds of {args.daemons} daemons, {took:.0f} s")
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, load {os.getloadavg()}")
    print()
    print(
        "phase    started  ready  crashed  i2d-failed  stuck  ready-p50  ready-max  SIGTERM exit codes"
    )
    for phase in phases:
        print(phase.row())
    for phase in phases:
        for crash in phase.crashes[:10]:
            print(f"  {phase.name} crash: {crash}")
    if args.keep_logs:
        print(f"\nlogs: {directory}")
    else:
        shutil.rmtree(directory, ignore_errors=True)
    print("\nreproduce: python bench/startup_storm.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
