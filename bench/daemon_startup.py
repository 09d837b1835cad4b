"""How long `probemarker run` takes from its process start to listening on its health
port, to /healthz 200 and to /readyz 200: the figures behind the DaemonSet's probe
delays (manifests/daemonset.yaml, docs/operations.md "The daemon's own probes").

The kubelet starts probing a container the moment it runs: it triggers a readiness
probe at once when the container is started and not ready (prober_manager.go,
UpdatePodStatus), and a liveness tick can land at any phase. Every failed probe is a
Warning `Unhealthy` event (prober.go), so a probe that comes before the daemon listens
(connection refused) or before its informers synced (/readyz 503) warns on every
start. `initialDelaySeconds` must be above these times, with room for a slower node.

Processes:
- the sim (HTTPS with a bearer token; bench/engine_idle.py's child) in a child
  process: --pods pods on node-1 and one marker with 3 exec probes over them, so the
  daemon's first LISTs carry a node's worth of pods;
- the daemon: `python -m probemarker run --kubeconfig <the sim's> --node node-1
  --metrics-address 127.0.0.1:PORT`, JSON logs to a file, a fresh process per round.
  t=0 is taken just before the fork (`subprocess.Popen` returns once the program is
  exec'd), as the kubelet's `startedAt` is the container process's start.

Each round polls every --poll-ms ms: a TCP connect to the port (listening), then GET
/healthz until 200, then GET /readyz until 200 (counting the 503s before it); then
SIGTERM and the time to exit. Also timed: `python -c "import probemarker.daemon.app"`, the
imports alone, in fresh processes. Prints min / median / max over --rounds, the
machine's load, and the command.

    python bench/daemon_startup.py                 # 110 pods, 10 rounds
    python bench/daemon_startup.py --pods 500 --rounds 20
"""

from __future__ import annotations

import argparse
import http.client
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.engine_idle import NODE, marker_body, start_sim  # noqa: E402

RUN = (sys.executable, "-m", "probemarker", "run")


@dataclass(frozen=True, slots=True)
class Round:
    listening: float  # seconds from the fork to a TCP connect that succeeded
    healthz: float  # to the first /healthz 200
    readyz: float  # to the first /readyz 200
    not_ready: int  # /readyz answers before it (503)
    exit: float  # seconds from SIGTERM to the process's exit
    code: int


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(port: int, path: str) -> int | None:
    """The status of GET path, or None when nothing answers."""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            conn.request("GET", path)
            return conn.getresponse().status
        finally:
            conn.close()
    except OSError:
        return None


def listens(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def one_round(kubeconfig: str, log: Path, poll: float, within: float = 120) -> Round:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "PROBEMARKER_LOG_FORMAT": "json"}
    args = [*RUN, "--kubeconfig", kubeconfig, "--node", NODE]
    with log.open("ab") as sink:
        began = time.monotonic()
        process = subprocess.Popen(
            [*args, "--metrics-address", f"127.0.0.1:{port}"],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        marks: dict[str, float] = {}
        not_ready = 0
        while "readyz" not in marks:
            if time.monotonic() - began > within or process.poll() is not None:
                raise RuntimeError(f"no /readyz 200 within {within:g} s (see {log})")
            if "listening" not in marks:
                if listens(port):
                    marks["listening"] = time.monotonic() - began
            elif "healthz" not in marks:
                if get(port, "/healthz") == 200:
                    marks["healthz"] = time.monotonic() - began
            elif get(port, "/readyz") == 200:
                marks["readyz"] = time.monotonic() - began
            else:
                not_ready += 1
            time.sleep(poll)
        stopped = time.monotonic()
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
        return Round(
            marks["listening"],
            marks["healthz"],
            marks["readyz"],
            not_ready,
            time.monotonic() - stopped,
            code,
        )
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def import_seconds() -> float:
    began = time.monotonic()
    subprocess.run(
        [sys.executable, "-c", "import probemarker.daemon.app"],
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    return time.monotonic() - began


def spread(values: list[float]) -> str:
    return (
        f"{min(values):6.3f} {statistics.median(values):6.3f} {max(values):6.3f}" if values else "-"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=110, help="pods on the node (default 110)")
    parser.add_argument("--rounds", type=int, default=10, help="daemon starts (default 10)")
    parser.add_argument("--poll-ms", type=float, default=10, help="poll interval (default 10)")
    args = parser.parse_args()

    sim, info = start_sim()
    try:
        sim.call("pods", count=args.pods)
        sim.call(
            "marker",
            body=marker_body(
                probes=3, period=10, policies=lambda j: {"succeeded": {"labels": {f"p{j}": "ok"}}}
            ),
        )
        imports = [import_seconds() for _ in range(args.rounds)]
        with tempfile.TemporaryDirectory() as tmp:
            log = Path(tmp) / "daemon.log"
            rounds = [
                one_round(info["kubeconfig"], log, args.poll_ms / 1000) for _ in range(args.rounds)
            ]
    finally:
        sim.close()

    load = os.getloadavg()
    print(
        f"probemarker run start-up, {args.pods} pods on the node, {args.rounds} rounds "
        f"(Python {platform.python_version()}, {os.cpu_count()} CPUs, load "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end)"
    )
    print("seconds from the process's start       min    median max")
    print(f"  imports alone (import probemarker.daemon.app) {spread(imports)}")
    print(f"  listening on the health port          {spread([r.listening for r in rounds])}")
    print(f"  /healthz 200                          {spread([r.healthz for r in rounds])}")
    print(f"  /readyz 200 (informers synced)        {spread([r.readyz for r in rounds])}")
    print(f"  SIGTERM to exit                       {spread([r.exit for r in rounds])}")
    print(
        f"  /readyz 503 answers seen before ready: {sum(r.not_ready for r in rounds)}; "
        f"exit codes: {sorted({r.code for r in rounds})}"
    )
    command = f"python bench/daemon_startup.py --pods {args.pods} --rounds {args.rounds}"
    print(f"reproduce: {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
