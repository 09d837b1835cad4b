"""The cost of one `probemarker status` answer on a node of 110 pods x 3 probes: the
daemon's CPU and the bytes it sends, beside its CPU over the same time with nobody
asking.

Three processes, the children of bench/engine_idle.py: the sim (HTTPS + token, its CPU
not counted; every exec answers exit 0), the daemon (`app.Daemon` with
`--status-socket`, default settings otherwise, JSON logs to /dev/null) and this one,
which asks. After the warm-up (every pod labelled, then no write for 5 s), two windows
of --seconds each, in turn --rounds times: `quiet` (nobody asks) and `asked` (--calls
answers, evenly spread over the window, each a fresh connection reading the whole
answer, as `probemarker status --local` does). The daemon's CPU is user+sys of its
process (`time.process_time`, every thread); a status answer costs the difference
between an `asked` window and the `quiet` one beside it, divided by the answers.

    python bench/status_cost.py                     # 110 pods x 3 probes, 3 rounds
    python bench/status_cost.py --pods 250 --calls 50

Prints the figures and the command that reproduces them.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import platform
import statistics
import sys
import time
from pathlib import Path


async def ask(path: str) -> tuple[int, float]:
    """One answer's size in bytes and how long it took (seconds)."""
    began = time.perf_counter()
    reader, writer = await asyncio.open_unix_connection(path)
    writer.write(b"\n")
    await writer.drain()
    size = 0
    while chunk := await reader.read(1 << 16):
        size += len(chunk)
    writer.close()
    await writer.wait_closed()
    return size, time.perf_counter() - began


async def asked(path: str, *, calls: int, seconds: float) -> list[tuple[int, float]]:
    gap = seconds / calls
    start, out = time.monotonic(), []
    for i in range(calls):
        await asyncio.sleep(max(0.0, start + i * gap - time.monotonic()))
        out.append(await ask(path))
    await asyncio.sleep(max(0.0, start + seconds - time.monotonic()))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=110)
    parser.add_argument("--period", type=int, default=10, help="probe period, seconds")
    parser.add_argument("--seconds", type=float, default=20.0, help="each window")
    parser.add_argument("--calls", type=int, default=40, help="answers in an asked window")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=float, default=15.0)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.engine_idle import Child, _label, marker_body, serve_daemon, settle, start_sim

    print("reproduce: python bench/status_cost.py " + " ".join(sys.argv[1:]))
    print(
        f"machine: {multiprocessing.cpu_count()} cores, Python {platform.python_version()}; "
        f"{args.pods} pods x 3 exec probes, period {args.period} s; sim and daemon each in a "
        "child process"
    )
    sim, info = start_sim()
    socket = str(Path(info["kubeconfig"]).parent / f"status-{os.getpid()}.sock")
    try:
        sim.call("pods", count=args.pods)
        sim.call("marker", body=marker_body(probes=3, period=args.period, policies=_label))
        daemon = Child(serve_daemon, info, True, {"status_socket": socket})
        try:
            daemon.receive(120)
            sim.call("wait_labels", pods=args.pods, label="p2", value="ok")
            settle(sim, at_least=args.warmup)
            quiet, busy, answers = [], [], []
            for _ in range(args.rounds):
                before = daemon.call("sample")["cpu"]
                time.sleep(args.seconds)
                middle = daemon.call("sample")["cpu"]
                answers += asyncio.run(asked(socket, calls=args.calls, seconds=args.seconds))
                after = daemon.call("sample")["cpu"]
                quiet.append(middle - before)
                busy.append(after - middle)
            probes = daemon.call("sample")["probes"]
        finally:
            daemon.close()
    finally:
        sim.close()
    per = [(b - q) / args.calls for q, b in zip(quiet, busy, strict=True)]
    sizes = [size for size, _ in answers]
    took = sorted(t for _, t in answers)
    print(f"probes held: {probes}; answers: {len(answers)} in {args.rounds} rounds")
    print(f"{'round':<6} {'quiet CPU s':>11} {'asked CPU s':>11} {'ms CPU / answer':>15}")
    for i, (q, b, p) in enumerate(zip(quiet, busy, per, strict=True)):
        print(f"{i + 1:<6} {q:>11.3f} {b:>11.3f} {p * 1000:>15.2f}")
    print(
        f"daemon CPU per answer: median {statistics.median(per) * 1000:.2f} ms "
        f"(min {min(per) * 1000:.2f}, max {max(per) * 1000:.2f}); answer "
        f"{statistics.median(sizes) / 1024:.1f} KiB ({statistics.median(sizes) / probes:.0f} "
        f"bytes a probe); wall time per answer p50 {took[len(took) // 2] * 1000:.1f} ms, "
        f"max {took[-1] * 1000:.1f} ms"
    )
    print(
        f"quiet windows: {statistics.mean(quiet) / args.seconds * 100:.2f}% CPU (the daemon "
        "probing, nobody asking)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
