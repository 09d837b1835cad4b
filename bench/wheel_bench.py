"""Benchmark the schedule stage: our timer wheel + one dispatcher against one asyncio
task per probe (the kubelet's goroutine-per-probe model), at 100,000 probes.

Both models get the same work, on the same real clock, in fresh child processes:

- the same N probe identities, each with period P (10 s) and its first due from
  `first_due(identity, P, t0 + lead, step)` (the daemon's default phase step), so
  starts are spread over the period the same way
  and nothing fires before both models have finished creating their entries;
- the same callback per run (count it, record how late it started), and the same next
  due, `next_due(due, P, now)`: the wheel's callback reschedules its key with it, as the
  engine does; the task's loop sleeps until it, as a kubelet worker's ticker does;
- the wheel model: `Dispatcher(max_concurrent=1000)` with a `TimerWheel` (tick 50 ms,
  1024 slots), one asyncio task per run (only while it runs);
- the task model: N tasks, each `while True: await asyncio.sleep(due - now); run`.

Figures, per model:
- memory of the N entries (after creating them, once every task sleeps): bytes still
  allocated (tracemalloc, in its own child process, since tracing slows everything) and
  the RSS growth (in the timing child, without tracemalloc);
- CPU (user+sys of the child) to create the N entries, and per run while firing for S
  seconds of real time from the first due; memory again at the end of firing (steady
  state, with every entry rescheduled a few times); runs counted, late runs (> 1 s) and
  the largest lateness.

The probe callback does nothing, so the CPU figures are the scheduling overhead alone.
The two differ in what they buy with it: the wheel starts a run up to one tick (50 ms)
after its due and wakes at most once per tick; a task wakes at each due exactly, so the
event loop wakes for nearly every run. The wheel pays one short-lived task per run; a
sleeping task pays a timer handle and a future per run.

    python bench/wheel_bench.py                          # 100,000 probes, 10 s, 30 s
    python bench/wheel_bench.py --probes 20000 --seconds 10

Prints one line per figure and the command that reproduces them.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import multiprocessing.connection
import resource
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass

MODELS = ("wheel", "tasks")
LABELS = {
    "wheel": "TimerWheel + one Dispatcher",
    "tasks": "one asyncio task per probe",
}


@dataclass
class Figures:
    traced_create_bytes: int = 0
    traced_fire_bytes: int = 0
    rss_create_bytes: int = 0
    rss_fire_bytes: int = 0
    create_cpu: float = 0.0
    fire_cpu: float = 0.0
    runs: int = 0
    late: int = 0
    lateness_max: float = 0.0


@dataclass
class Tally:
    runs: int = 0
    late: int = 0
    lateness_max: float = 0.0

    def record(self, lateness: float) -> None:
        self.runs += 1
        if lateness > 1.0:
            self.late += 1
        if lateness > self.lateness_max:
            self.lateness_max = lateness


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _rss() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _memory(traced: bool) -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0] if traced else _rss()


# --- the two models ----------------------------------------------------------------


async def _wheel_model(
    probes: list[tuple[str, float]], period: float, tally: Tally
) -> Callable[[], Awaitable[None]]:
    """Create the entries; return how to stop."""
    from probemarker.kit.clock import MONOTONIC
    from probemarker.schedule.dispatcher import Dispatcher
    from probemarker.schedule.timing import next_due

    async def probe(key: str, due: float) -> None:
        now = MONOTONIC.now()
        tally.record(now - due)
        dispatcher.schedule(key, next_due(due, period, now)[0])

    dispatcher: Dispatcher[str] = Dispatcher(run=probe, clock=MONOTONIC, max_concurrent=1000)
    for key, due in probes:
        dispatcher.schedule(key, due)
    runner = asyncio.create_task(dispatcher.run())
    await asyncio.sleep(0)  # the dispatcher asleep until the first due

    async def stop() -> None:
        await dispatcher.stop(grace=0)
        await runner

    return stop


async def _tasks_model(
    probes: list[tuple[str, float]], period: float, tally: Tally
) -> Callable[[], Awaitable[None]]:
    from probemarker.schedule.timing import next_due

    loop = asyncio.get_running_loop()

    async def probe(key: str, due: float) -> None:
        tally.record(loop.time() - due)

    async def worker(key: str, due: float) -> None:
        while True:
            await asyncio.sleep(due - loop.time())
            await probe(key, due)
            due = next_due(due, period, loop.time())[0]

    tasks = [asyncio.create_task(worker(key, due)) for key, due in probes]
    await asyncio.sleep(0)  # every task asleep until its first due

    async def stop() -> None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    return stop


_BUILD = {"wheel": _wheel_model, "tasks": _tasks_model}


async def _child_async(model: str, args: argparse.Namespace, traced: bool) -> Figures:
    from probemarker.daemon.settings import RunSettings
    from probemarker.schedule.timing import first_due

    step = RunSettings().probe_phase_step_seconds  # the daemon's phases
    loop = asyncio.get_running_loop()
    start_at = loop.time() + args.lead  # loop.time() is time.monotonic(): one time line
    keys = [f"ns-{i % 50}/marker#probe@pod-uid-{i:06d}/app" for i in range(args.probes)]
    probes = [(key, first_due(key, args.period, start_at, step)) for key in keys]
    tally = Tally()
    figures = Figures()
    if traced:
        tracemalloc.start()
    before = _memory(traced)
    cpu = _cpu()
    stop = await _BUILD[model](probes, args.period, tally)
    figures.create_cpu = _cpu() - cpu
    created = _memory(traced)
    if loop.time() > start_at:
        print(f"warning: creating took longer than --lead {args.lead}", file=sys.stderr)
    await asyncio.sleep(start_at - loop.time())  # nothing is due before: both idle
    cpu = _cpu()
    await asyncio.sleep(start_at + args.seconds - loop.time())
    figures.fire_cpu = _cpu() - cpu
    fired = _memory(traced)
    if traced:
        figures.traced_create_bytes, figures.traced_fire_bytes = created - before, fired - before
    else:
        figures.rss_create_bytes, figures.rss_fire_bytes = created - before, fired - before
        figures.runs, figures.late = tally.runs, tally.late
        figures.lateness_max = tally.lateness_max
    await stop()
    return figures


def _child(
    conn: multiprocessing.connection.Connection,
    model: str,
    args: argparse.Namespace,
    traced: bool,
) -> None:
    import probemarker.schedule.dispatcher  # noqa: F401  (imports before the baseline)

    conn.send(asdict(asyncio.run(_child_async(model, args, traced))))


def _run_child(model: str, args: argparse.Namespace, *, traced: bool) -> Figures:
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_child, args=(child, model, args, traced))
    process.start()
    try:
        if not parent.poll(args.lead + args.seconds + 600):
            raise RuntimeError(f"the {model} child gave no answer")
        return Figures(**parent.recv())
    finally:
        process.join(timeout=30)
        if process.is_alive():
            process.kill()


# --- the report --------------------------------------------------------------------


def _report(name: str, value: float, unit: str) -> None:
    print(f"  {name:<58} {value:>12,.1f} {unit}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--probes", type=int, default=100_000)
    parser.add_argument("--period", type=float, default=10.0, help="seconds between runs")
    parser.add_argument("--seconds", type=float, default=30.0, help="real seconds of firing")
    parser.add_argument("--lead", type=float, default=5.0, help="seconds before the first due")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    args = parser.parse_args()
    print(
        f"{args.probes:,} probes, period {args.period:g} s, {args.seconds:g} s of firing "
        f"(each model in fresh child processes; python {sys.version.split()[0]})"
    )
    results: dict[str, Figures] = {}
    for model in args.models:
        started = time.monotonic()
        figures = _run_child(model, args, traced=False)
        traced = _run_child(model, args, traced=True)
        figures.traced_create_bytes = traced.traced_create_bytes
        figures.traced_fire_bytes = traced.traced_fire_bytes
        results[model] = figures
        print(f"{LABELS[model]}  ({time.monotonic() - started:.0f} s)")
        for when in ("create", "fire"):
            traced_bytes = getattr(figures, f"traced_{when}_bytes")
            rss_bytes = getattr(figures, f"rss_{when}_bytes")
            after = "creating" if when == "create" else "firing"
            _report(f"memory after {after}: allocated, per probe", traced_bytes / args.probes, "B")
            _report(f"memory after {after}: RSS growth, total", rss_bytes / 2**20, "MiB")
        _report("CPU: create, per probe", figures.create_cpu / args.probes * 1e6, "us")
        _report("CPU: firing, per run", figures.fire_cpu / max(figures.runs, 1) * 1e6, "us")
        _report("CPU: firing, share of one core", figures.fire_cpu / args.seconds * 100, "%")
        _report("runs", figures.runs, "")
        _report("runs started > 1 s late", figures.late, "")
        _report("lateness, max", figures.lateness_max * 1000, "ms")
    if set(results) == set(MODELS):
        wheel, tasks = results["wheel"], results["tasks"]
        print("ratios (tasks / wheel; above 1 means the wheel uses less)")
        for name in ("traced_fire_bytes", "rss_fire_bytes"):
            label = "allocated" if name.startswith("traced") else "RSS growth"
            ratio = getattr(tasks, name) / max(getattr(wheel, name), 1)
            _report(f"memory after firing: {label}", ratio, "x")
        per_run = [f.fire_cpu / max(f.runs, 1) for f in (tasks, wheel)]
        _report("CPU per run", per_run[0] / per_run[1], "x")
    print("reproduce: python bench/wheel_bench.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
