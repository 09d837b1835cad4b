"""The daemon's writes, counted by the sim's request accounting (every request the API
server answered, by verb, resource and subresource).

The sim and the real daemon (`probemarker.daemon.app.Daemon`, default write settings:
write_coalesce_seconds 0.05, write_qps 50, write_burst 100) run in this process, as in
tests/integration (whose `World`, `Script` and `running_daemon` this uses); timing does
not matter here, only counts. Containers answer from a Python exec handler the bench
flips. Probes: exec, period 1 s, thresholds 1.

1. per transition: one pod, one probe setting `ready=true|false`; the answer flips,
   the bench waits for the pod to show it and 1.5 s more, and counts what was written
   in between (target: 1 pods/status patch + 1 event write);
2. 5 probes on one pod flipping together: the five execs are held in the handler until
   all five wait, the answer flips, all five return at once (target: 1 pods/status
   patch, 5 events, one per probe); beside it the same five probes left to see the flip
   at their own phases, spread over the period (not "together": up to 5 patches);
3. steady state: nothing flips for N minutes (target: 0 writes; reads listed);
4. a daemon restart: the daemon stops (gracefully) and a new one starts on the pods it
   labelled; writes from its start until 5 s after it is ready (target: 0);
5. a daemon restart where every probe's output changes with each run (an uptime, a
   timestamp), on `--chatty-pods` pods with one condition each, default message
   refresh (10 s): the daemon runs long enough to hold a message back on every pod,
   stops, and a new one starts; writes at the stop, and from the start until 8 s
   after ready (issue 22; target: 0 and 0, the messages wait for the refresh interval).

    python bench/engine_writes.py                    # 1 minute of steady state
    python bench/engine_writes.py --steady-minutes 10 --transitions 50
    python bench/engine_writes.py --only chatty-restart --chatty-pods 200

Prints the figures and the command that reproduces them.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

Key = tuple[str, str, str]
READS = ("get", "list", "watch")
DEFAULTS = {"write_coalesce_seconds": 0.05, "write_qps": 50.0, "write_burst": 100}


def _counts(world: Any) -> Counter[Key]:
    out: Counter[Key] = Counter()
    for (verb, res, sub, _code), n in world.sim.accounting.counts().items():
        out[(verb, res, sub)] += n
    return out


def _writes(delta: Counter[Key]) -> dict[str, int]:
    """Pod status patches, event writes, and any other write (execs are not writes)."""
    pods = delta[("patch", "pods", "status")]
    events = sum(n for (verb, res, _), n in delta.items() if res == "events" and verb not in READS)
    other = sum(
        n
        for (verb, res, sub), n in delta.items()
        if verb not in READS
        and sub != "exec"
        and res != "events"
        and (res, sub) != ("pods", "status")
    )
    return {"pod_status": pods, "events": events, "other": other}


async def _quiet(seconds: float) -> None:
    await asyncio.sleep(seconds)


async def per_transition(world: Any, *, transitions: int) -> dict[str, Any]:
    from probemarker.sim.exec.runners import ExecReply
    from tests.integration.world import labels_of

    ok, bad = ExecReply(0, b"ready\n"), ExecReply(1, b"", b"not ready\n")
    rows = []
    healthy = True
    for _ in range(transitions):
        healthy = not healthy
        value = "true" if healthy else "false"
        before = _counts(world)
        world.script.set("solo", "app", "check", ok if healthy else bad)
        await world.wait_pod("solo", lambda p, v=value: labels_of(p).get("ready") == v)
        await _quiet(1.5)
        rows.append(_writes(_counts(world) - before))
    return {"rows": rows}


class Gate:
    """The five-probe pod's handler: answers from `healthy`; holds execs while closed."""

    def __init__(self) -> None:
        self.healthy = True
        self.open = asyncio.Event()
        self.open.set()
        self.waiting = 0
        self.all_waiting = asyncio.Event()
        self.probes = 5

    async def answer(self, request: Any) -> Any:
        from probemarker.sim.exec.runners import ExecReply

        if not self.open.is_set():
            self.waiting += 1
            if self.waiting >= self.probes:
                self.all_waiting.set()
            await self.open.wait()
        return ExecReply(0, b"ready\n") if self.healthy else ExecReply(1, b"", b"not ready\n")


async def five_together(world: Any, gate: Gate, *, flips: int, held: bool) -> list[dict[str, int]]:
    from tests.integration.world import labels_of

    rows = []
    for _ in range(flips):
        value = "false" if gate.healthy else "true"
        before = _counts(world)
        if held:
            gate.waiting, gate.all_waiting = 0, asyncio.Event()
            gate.open.clear()
            await asyncio.wait_for(gate.all_waiting.wait(), 10)
            gate.healthy = not gate.healthy
            gate.open.set()
        else:
            gate.healthy = not gate.healthy
        await world.wait_pod(
            "five", lambda p, v=value: all(labels_of(p).get(f"k{j}") == v for j in range(5))
        )
        await _quiet(1.5)
        rows.append(_writes(_counts(world) - before))
    return rows


class Uptime:
    """A Script's answer that changes with every run, the state staying Succeeded."""

    def __init__(self) -> None:
        self.runs = 0

    async def answer(self, request: Any) -> Any:
        from probemarker.sim.exec.runners import ExecReply

        self.runs += 1
        return ExecReply(0, b"up %d\n" % self.runs)


async def chatty_restart(*, pods: int) -> dict[str, Any]:
    """Case 5 (see the module docstring), in a sim of its own."""
    from kubernetes_asyncio import client

    from probemarker.sim import SimCluster
    from tests.integration.world import NS, Script, World, marker, probe, running_daemon

    out: dict[str, Any] = {"pods": pods}
    async with (
        SimCluster(node_names=("node-1",), kubelet_events=False) as sim,
        client.ApiClient(sim.configuration()) as api,
    ):
        world = World(sim, api, Script())
        await world.install_crd()
        uptime = Uptime()
        names = [f"c{i}" for i in range(pods)]
        for name in names:
            await world.create_pod(name, labels={"app": "chatty"})
            sim.exec_handlers.register(NS, name, "app", uptime.answer)
        selector = {"matchLabels": {"app": "chatty"}}
        await world.apply_marker(
            marker("chatty", selector=selector, probes=[probe("up", condition="x.io/up")])
        )
        async with running_daemon(sim, **DEFAULTS) as daemon:
            for name in names:
                await world.wait_pod(name, lambda p: bool(p["status"].get("conditions")))
            # Every first transition's event written, and a few runs: a new message
            # held back on every pod.
            await sim.accounting.wait_for(
                at_least=pods, verb="create", resource="events", within=60
            )
            await _quiet(3.0)
            out["held"] = daemon.writer.stats.messages_held
            before = _counts(world)
        out["stop"] = _counts(world) - before
        before = _counts(world)
        async with running_daemon(sim, **DEFAULTS) as daemon:
            await _quiet(8.0)
            out["start"] = _counts(world) - before
            out["runs"] = daemon.engine.dispatcher.stats.runs_finished
    return out


def _markers() -> list[dict[str, Any]]:
    from tests.integration.world import marker, probe

    def flipping(name: str, key: str, timeout: int = 1) -> dict[str, Any]:
        return probe(
            name,
            timeout=timeout,
            succeeded={"labels": {key: "true"}},
            failed={"labels": {key: "false"}},
        )

    return [
        marker("solo", selector={"matchLabels": {"app": "solo"}}, probes=[flipping("p", "ready")]),
        marker(
            "five",
            selector={"matchLabels": {"app": "five"}},
            probes=[flipping(f"p{j}", f"k{j}", timeout=10) for j in range(5)],
        ),
    ]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from kubernetes_asyncio import client

    from probemarker.sim import SimCluster
    from tests.integration.world import NS, Script, World, labels_of, running_daemon

    out: dict[str, Any] = {}
    if args.chatty_pods > 0:
        out["chatty"] = await chatty_restart(pods=args.chatty_pods)
    if args.only == "chatty-restart":
        return out
    async with SimCluster(node_names=("node-1",), kubelet_events=False) as sim:
        sim.kubelet.auto_finish_deletion = True
        async with client.ApiClient(sim.configuration()) as api:
            world = World(sim, api, Script())
            await world.install_crd()
            await world.create_pod("solo", labels={"app": "solo"})
            await world.create_pod("five", labels={"app": "five"})
            gate = Gate()
            sim.exec_handlers.register(NS, "five", "app", gate.answer)
            for body in _markers():
                await world.apply_marker(body)
            async with running_daemon(sim, **DEFAULTS):
                await world.wait_pod("solo", lambda p: labels_of(p).get("ready") == "true")
                await world.wait_pod("five", lambda p: labels_of(p).get("k4") == "true")
                await _quiet(2.0)
                out["transition"] = await per_transition(world, transitions=args.transitions)
                out["held"] = await five_together(world, gate, flips=args.flips, held=True)
                out["free"] = await five_together(world, gate, flips=args.flips, held=False)
                await _quiet(2.0)
                before, began = _counts(world), time.monotonic()
                await _quiet(args.steady_minutes * 60)
                out["steady"] = _counts(world) - before
                out["steady_seconds"] = time.monotonic() - began
            before = _counts(world)
            async with running_daemon(sim, **DEFAULTS) as daemon:
                await _quiet(5.0)
                out["restart"] = _counts(world) - before
                out["restart_probes"] = daemon.engine.probe_count
                out["restart_runs"] = daemon.engine.dispatcher.stats.runs_finished
    return out


def _line(label: str, rows: list[dict[str, int]]) -> None:
    n = len(rows)
    total = {k: sum(r[k] for r in rows) for k in ("pod_status", "events", "other")}
    spread = sorted({r["pod_status"] for r in rows})
    print(
        f"{label:<46} {n:>5} {total['pod_status'] / n:>11.2f} {total['events'] / n:>8.2f} "
        f"{total['other'] / n:>6.2f}   {spread}"
    )


def _print_chatty(chatty: dict[str, Any]) -> None:
    print(
        f"a daemon restart, {chatty['pods']} pods whose output changes every run "
        f"(message refresh 10 s; {chatty['held']} messages held before the stop): "
        f"writes at the stop {_writes(chatty['stop'])}, from the start until 8 s after "
        f"ready ({chatty['runs']} runs) {_writes(chatty['start'])} (target 0 and 0)"
    )


def _print(args: argparse.Namespace, out: dict[str, Any]) -> None:
    if "chatty" in out:
        _print_chatty(out["chatty"])
    if args.only == "chatty-restart":
        return
    print(
        "writes per flip (counted from the flip until 1.5 s after the pod shows it); "
        "target: 1 pods/status patch"
    )
    print(
        f"{'case':<46} {'flips':>5} {'pods/status':>11} {'events':>8} {'other':>6}   "
        "pods/status per flip seen"
    )
    _line("one probe, one pod", out["transition"]["rows"])
    _line("5 probes on one pod, flipping together", out["held"])
    _line("  the same 5, each at its own phase (not held)", out["free"])
    steady, restart = out["steady"], out["restart"]
    length = (
        "the issue's 10 minutes"
        if args.steady_minutes >= 10
        else "default length; --steady-minutes 10 for the issue's 10 minutes"
    )
    reads = {
        f"{v} {r}{'/' + s if s else ''}": n
        for (v, r, s), n in steady.items()
        if v in READS and s != "exec"
    }
    execs = sum(n for (_v, r, s), n in steady.items() if (r, s) == ("pods", "exec"))
    print(
        f"steady state, {out['steady_seconds']:.0f} s ({length}): writes {_writes(steady)} "
        f"(target 0); {execs} execs; reads {reads or 'none'}"
    )
    print(
        f"after a daemon restart (start until 5 s after ready, {out['restart_probes']} probes, "
        f"{out['restart_runs']} runs): writes {_writes(restart)} (target 0)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--transitions", type=int, default=20, help="flips of the one probe")
    parser.add_argument("--flips", type=int, default=6, help="flips of the five probes, per case")
    parser.add_argument("--steady-minutes", type=float, default=1.0)
    parser.add_argument(
        "--chatty-pods", type=int, default=60, help="pods of case 5 (0: leave it out)"
    )
    parser.add_argument("--only", choices=["chatty-restart"], help="run only this case")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from probemarker.observe.logging import configure_logging

    configure_logging(format="console", level="warning")  # the daemon's lines, not its info
    out = asyncio.run(run(args))
    print("reproduce: python bench/engine_writes.py " + " ".join(sys.argv[1:]))
    print(
        f"Python {platform.python_version()}; sim and daemon in this process; "
        "daemon write settings: " + ", ".join(f"{k}={v}" for k, v in DEFAULTS.items())
    )
    _print(args, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
