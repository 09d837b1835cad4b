"""What a wake-up costs: the daemon's CRI client making the same calls one at a time or
in groups, side by side in one run (issue 43: why --probe-phase-step-seconds exists).

    python bench/wakeups.py --cri-endpoint unix:///run/containerd/containerd.sock
    python bench/wakeups.py --cri-endpoint unix:///tmp/probemarker-cluster/cri/run/containerd.sock \\
        --rate 20 --groups 1,2,5,10 --seconds 8 --rounds 3

One process, `probemarker.cri.client.RuntimeClient` on a real runtime's socket (the
daemon's client, its grpc.aio channel), making CRI `Version` calls (no container, so
the runtime's own work is the same small answer every time) at --rate calls a second
in all, started in groups of G calls every G / rate seconds: the rate is the same for
every variant, only how many calls start at the same moment differs (G = 1: each call
at a moment of its own, as probes with phases of their own; G = 5: what 20 probes a
second on a 0.25 s phase step do). The variants take turns (--rounds rounds, the order
rotated by one each round), each turn a window of --seconds.

Per variant: the process's CPU per call (user+sys of every thread, grpc's own
included: `time.process_time`) and its context switches per call (voluntary and not,
of every thread: /proc/self/task/*/status), as median (min-max) over the rounds. The
calls' own work is the same in every variant, so what differs is what waking for them
costs: the event loop leaving its wait and grpc's threads handing the answer over.
What it does not show: the runtime's side (only this client's CPU is counted) and an
ExecSync's (a Version call starts no process); bench/cri_exec.py --phase-steps
measures the whole daemon and the runtime with real execs.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

REPO = Path(__file__).resolve().parent.parent


def context_switches(task_dir: Path = Path("/proc/self/task")) -> int:
    """Voluntary and involuntary context switches of every thread of this process."""
    total = 0
    for status in task_dir.glob("*/status"):
        try:
            text = status.read_text()
        except OSError:  # a thread that ended meanwhile
            continue
        for line in text.splitlines():
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                total += int(line.split()[1])
    return total


def parse_groups(text: str) -> list[int]:
    """`--groups`: comma-separated group sizes, each 1 or more, none twice."""
    try:
        groups = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as err:
        raise SystemExit(f"--groups: whole numbers, comma-separated, not {text!r}") from err
    if not groups or len(set(groups)) != len(groups) or min(groups) < 1:
        raise SystemExit(f"--groups: distinct sizes of 1 or more, not {text!r}")
    return groups


def rotated(items: Sequence[int], r: int) -> list[int]:
    """Round `r`'s order: `items` rotated by `r` (bench/vs_stats.rotation)."""
    from bench.vs_stats import rotation

    return [items[i] for i in rotation(len(items), r)]


async def window(
    client: object, *, rate: float, group: int, seconds: float
) -> tuple[int, float, int]:
    """Calls made in groups of `group` at `rate` a second for `seconds`: (calls, CPU s,
    context switches), counted until the last call has answered."""
    from probemarker.cri.client import RuntimeClient, RuntimeInfo

    assert isinstance(client, RuntimeClient)
    failed = 0

    async def one() -> None:
        nonlocal failed
        if not isinstance(await client.version(wait=5.0), RuntimeInfo):
            failed += 1

    loop = asyncio.get_running_loop()
    cpu, switches = time.process_time(), context_switches()
    tasks: list[asyncio.Task[None]] = []
    start = loop.time()
    groups = max(1, round(seconds * rate / group))
    for i in range(groups):
        await asyncio.sleep(max(0.0, start + i * group / rate - loop.time()))
        tasks += [asyncio.create_task(one()) for _ in range(group)]
    await asyncio.gather(*tasks)
    if failed:
        raise SystemExit(f"{failed} of {len(tasks)} Version calls failed: is the runtime up?")
    return len(tasks), time.process_time() - cpu, context_switches() - switches


async def run(args: argparse.Namespace) -> None:
    from bench.vs_stats import spread
    from probemarker.cri.client import RuntimeClient, RuntimeInfo
    from probemarker.cri.endpoint import socket_path

    client = RuntimeClient(socket_path(args.cri_endpoint))
    try:
        first = await client.version(wait=5.0)
        if not isinstance(first, RuntimeInfo):
            raise SystemExit(f"{args.cri_endpoint}: {first}")
        print(f"runtime: {first.name} {first.version}")
        for _ in range(20):  # the code paths warm
            await client.version(wait=5.0)
        cpu: dict[int, list[float]] = {g: [] for g in args.groups}
        switches: dict[int, list[float]] = {g: [] for g in args.groups}
        for r in range(args.rounds):
            for group in rotated(args.groups, r):
                calls, used, woke = await window(
                    client, rate=args.rate, group=group, seconds=args.seconds
                )
                cpu[group].append(used / calls * 1e6)
                switches[group].append(woke / calls)
    finally:
        await client.aclose()
    print(
        f"\n{args.rate:g} Version calls a second, {args.rounds} window(s) of {args.seconds:g} s each"
    )
    print(f"{'group':>6}  {'CPU µs a call, median (min-max)':<34}{'context switches a call':<26}")
    for group in args.groups:
        c, s = spread(cpu[group]), spread(switches[group])
        print(
            f"{group:>6}  {f'{c.median:.0f} ({c.low:.0f}-{c.high:.0f})':<34}"
            f"{f'{s.median:.1f} ({s.low:.1f}-{s.high:.1f})':<26}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cri-endpoint", required=True, help="unix:///... of a running runtime")
    parser.add_argument("--rate", type=float, default=20.0, help="calls a second, every variant")
    parser.add_argument("--groups", type=parse_groups, default=[1, 2, 5, 10], help="e.g. 1,5")
    parser.add_argument("--seconds", type=float, default=8.0, help="each window")
    parser.add_argument("--rounds", type=int, default=4, help="windows per variant")
    args = parser.parse_args()
    if args.rate <= 0 or args.seconds <= 0 or args.rounds < 1:
        parser.error("--rate and --seconds above 0, --rounds 1 or more")
    if args.rounds % len(args.groups):
        print(
            f"note: {args.rounds} rounds for {len(args.groups)} groups: not every group goes "
            "first equally often (a multiple of the groups' count balances the order)"
        )
    sys.path.insert(0, str(REPO))
    print("reproduce: python bench/wakeups.py " + " ".join(sys.argv[1:]))
    print(f"Python {platform.python_version()}, {platform.machine()}, kernel {platform.release()}")
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
