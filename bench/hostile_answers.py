"""What a hostile or broken probe answer costs, with `{{.Result}}` values (issue 29).

The sim and the real daemon (`probemarker.daemon.app.Daemon`, default settings) run in this
process, as in tests/integration (whose `World`, `Script` and `running_daemon` this
uses); the sim's request accounting counts what was written. Three cases, each on one
pod in a sim of its own:

1. `changing`: an answer that is a new invalid label value every period (a clock in a
   sentence), period 1 s, for `--seconds`: InvalidResultValue events written (creates
   and series updates), as events per pod per hour;
2. `timeout`: the database example of docs/api.md (`role: "{{.Result}}"` in both
   states, `replica` with exit 1, failureThreshold 3): one run times out (no answer);
   pod writes and label values stored from the timeout until two answered runs later;
3. `room`: two rendered annotations on a pod with room for one: 422 answers to the
   daemon's pod writes, WriteRefused and InvalidResultValue events, over `--seconds`.

    python bench/hostile_answers.py               # 30 s for cases 1 and 3
    python bench/hostile_answers.py --seconds 120

Prints the figures and the command that reproduces them. It runs on any checkout that
has tests/integration/world.py (to compare with an older one, run it from there).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import platform
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

ROLE, EVENTS = "db.io/role", "events"


@contextlib.asynccontextmanager
async def _world() -> AsyncIterator[Any]:
    from kubernetes_asyncio import client

    from probemarker.sim import SimCluster
    from tests.integration.world import Script, World

    async with (
        SimCluster(node_names=("node-1",), kubelet_events=False) as sim,
        client.ApiClient(sim.configuration()) as api,
    ):
        world = World(sim, api, Script())
        await world.install_crd()
        yield world


def _event_writes(world: Any, reason: str) -> int:
    """Event writes for `reason`: the events' series counts add up the updates."""
    total = 0
    for event in world.events(reason):
        series = event.get("series") or {}
        total += max(1, int(series.get("count", 1)) if series else 1)
    return total


async def changing(seconds: float) -> dict[str, Any]:
    from probemarker.sim.exec.runners import ExecReply
    from tests.integration.world import NS, marker, probe, running_daemon

    async with _world() as world:
        runs = 0

        async def clock(request: Any) -> ExecReply:
            nonlocal runs
            runs += 1
            return ExecReply(0, f"at 12:{runs // 60:02d}:{runs % 60:02d} UTC\n".encode())

        await world.create_pod("g", labels={"app": "game"})
        world.sim.exec_handlers.register(NS, "g", "app", clock)
        labels = {"labels": {"game.io/time": "{{.Result}}"}}
        await world.apply_marker(marker("game", probes=[probe("time", succeeded=labels)]))
        async with running_daemon(world.sim):
            started = time.monotonic()
            await asyncio.sleep(seconds)
            elapsed = time.monotonic() - started
        created = len(world.events("InvalidResultValue"))
        writes = world.sim.accounting.count(
            resource=EVENTS, verb="create"
        ) + world.sim.accounting.count(resource=EVENTS, verb="patch")
        return {
            "seconds": elapsed,
            "runs": runs,
            "events": created,
            "event_writes": writes,
            "pod_writes": world.pod_writes(),
            "per_hour": created * 3600 / elapsed,
        }


async def timeout() -> dict[str, Any]:
    from probemarker.sim.exec.runners import ExecIO, ExecRequest
    from tests.integration.world import (
        NS,
        eventually,
        history,
        labels_of,
        marker,
        probe,
        running_daemon,
    )

    async with _world() as world:
        state = {"hang": 0.0, "runs": 0}

        async def role(request: ExecRequest, io: ExecIO) -> int:
            state["runs"] += 1
            hang, state["hang"] = state["hang"], 0.0
            if hang:
                await asyncio.sleep(hang)
            await io.write_stdout(b"replica\n")
            return 1

        both = {"labels": {ROLE: "{{.Result}}"}}
        await world.create_pod("db-1", labels={"app": "game"})
        world.sim.exec_handlers.register_stream(NS, "db-1", "app", role)
        body = marker("db", probes=[probe("role", failure=3, succeeded=both, failed=both)])
        await world.apply_marker(body)
        async with running_daemon(world.sim) as daemon:
            await world.wait_pod("db-1", lambda p: labels_of(p).get(ROLE) == "replica")
            await eventually(lambda: daemon.writer.depth == 0)
            writes = world.pod_writes()
            async with history(world, "db-1") as seen:
                state["hang"] = 2.5
                runs = state["runs"]
                await eventually(lambda: state["runs"] >= runs + 3, within=15)
                await eventually(lambda: daemon.writer.depth == 0)
            shown = [labels_of(p).get(ROLE) for p in seen]
            return {"writes": world.pod_writes() - writes, "values": shown}


async def room(seconds: float) -> dict[str, Any]:
    from probemarker.sim.exec.runners import ExecReply
    from tests.integration.world import marker, probe, running_daemon

    async with _world() as world:
        world.script.set("g", "app", "note", ExecReply(0, b"y" * 1000))
        big = "x" * (256 * 1024 - 1600)
        await world.create_pod("g", labels={"app": "game"}, annotations={"big": big})
        notes = {"annotations": {"game.io/a": "{{.Result}}", "game.io/b": "{{.Result}}"}}
        await world.apply_marker(
            marker("game", probes=[probe("note", command="note", succeeded=notes)])
        )
        async with running_daemon(world.sim):
            await asyncio.sleep(seconds)
        shown = world.pod("g")["metadata"].get("annotations", {})
        return {
            "refused_422": world.sim.accounting.count(verb="patch", resource="pods", code=422),
            "write_refused": len(world.events("WriteRefused")),
            "invalid_result_value": len(world.events("InvalidResultValue")),
            "written": sorted(k for k in shown if k.startswith("game.io/")),
        }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "changing": await changing(args.seconds),
        "timeout": await timeout(),
        "room": await room(args.seconds),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=30.0, help="length of cases 1 and 3")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from probemarker.observe.logging import configure_logging

    configure_logging(format="console", level="error")
    out = asyncio.run(run(args))
    print("reproduce: python bench/hostile_answers.py " + " ".join(sys.argv[1:]))
    print(f"Python {platform.python_version()}; sim and daemon in this process")
    c = out["changing"]
    print(
        f"1. a new invalid value every period: {c['events']} InvalidResultValue events in "
        f"{c['seconds']:.0f} s ({c['runs']} runs) = {c['per_hour']:.0f} per pod per hour; "
        f"{c['event_writes']} event writes, {c['pod_writes']} pod writes"
    )
    t = out["timeout"]
    print(
        f"2. one timed-out run of the database role: {t['writes']} pod writes; "
        f"role values stored meanwhile: {t['values']}"
    )
    r = out["room"]
    print(
        f"3. room for one of two rendered annotations: {r['refused_422']} answers 422, "
        f"{r['write_refused']} WriteRefused, {r['invalid_result_value']} InvalidResultValue; "
        f"written: {r['written']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
