"""The informer's contract under faults: its store, and the replay of every change it
delivered, equal a fresh LIST after a long random sequence of creates, label changes,
status changes and deletes, while the sim closes watches (clean and abrupt), forgets
its history (410), answers 429 and 500 for a share of requests, and goes down for 30 s.

Per object (uid), the resourceVersions of its changes strictly increase (compared as
the sim's integers: only a test may, the product treats them as opaque), an object is
ADDED only when absent and MODIFIED or DELETED only when present: no change is
delivered twice or out of order, and none is lost (the replay ends at the LIST).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass

import anyio
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from probemarker.kit.backoff import BackoffSettings
from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.config import load_kubeconfig
from probemarker.kube.watch.cache import Change, ChangeKind, ObjectKey
from probemarker.kube.watch.informer import InformerSettings
from probemarker.sim import SimCluster
from tests.kube.informer_world import Collector, Projection, SimWorld, pods_informer

NAMESPACES = ("ns-0", "ns-1", "ns-2")
SOME = ("ns-0", "ns-2")  # the second informer's set of namespaces
NAMES = 6  # names are reused: a delete and a create again give another uid

SETTINGS = InformerSettings(
    watch_timeout_min=2.0,
    watch_timeout_max=4.0,
    read_margin=1.0,
    page_size=3,
    backoff=BackoffSettings(initial=0.05, maximum=1.0, factor=2.0, jitter=0.5),
)


@dataclass(frozen=True, slots=True)
class Write:
    namespace: int
    name: int
    action: str  # label | status | noise | delete (a missing pod is created instead)
    value: int


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str  # close | close_abrupt | drop_history | pause


Op = Write | Fault


def apply_write(world: SimWorld, op: Write) -> None:
    ns, name = NAMESPACES[op.namespace], f"p{op.name}"
    if not world.exists(ns, name):
        world.create(ns, name, labels={"v": str(op.value)})
    elif op.action == "delete":
        world.delete(ns, name)
    elif op.action == "label":
        world.label(ns, name, v=str(op.value), w=str(op.value % 2))
    elif op.action == "status":
        conditions = [{"type": "probemarker.io/x", "status": "True" if op.value % 2 else "False"}]
        world.change(
            ns,
            name,
            lambda pod: pod.setdefault("status", {}).update(
                phase=("Pending", "Running")[op.value % 2],
                podIP=f"10.0.0.{op.value}",
                conditions=conditions,
            ),
            status=True,
        )
    else:  # a write to a field no projection keeps: the informer emits nothing for it
        world.change(
            ns,
            name,
            lambda pod: pod.setdefault("status", {}).update(hostIP=f"192.0.2.{op.value}"),
            status=True,
        )


async def apply_fault(world: SimWorld, op: Fault) -> None:
    faults = world.sim.faults
    if op.kind == "close":
        faults.close_watches()
    elif op.kind == "close_abrupt":
        faults.close_watches(abrupt=True)
    elif op.kind == "drop_history":
        faults.drop_history()
    else:
        await asyncio.sleep(0.05)  # let the informers catch up for a while


def check_order(changes: Sequence[Change[Projection]]) -> None:
    """No change twice, none out of order (see the module docstring)."""
    last_rv: dict[str, int] = {}
    present: dict[ObjectKey, str] = {}
    for change in changes:
        uid, rv = change.obj["metadata"]["uid"], int(change.resource_version)
        assert rv > last_rv.get(uid, 0), f"{change} repeats or goes back (last {last_rv[uid]})"
        last_rv[uid] = rv
        if change.kind is ChangeKind.ADDED:
            assert change.key not in present, f"{change}: already present"
            present[change.key] = uid
        else:
            assert present.get(change.key) == uid, f"{change}: not present"
            if change.kind is ChangeKind.DELETED:
                del present[change.key]


@dataclass(frozen=True, slots=True)
class Outage:
    """Go down before op `start`, forget the history after op `back - 1` (a 410 for
    every watch that resumes), then wait to be back up before op `back`."""

    start: int
    back: int
    seconds: float = 30.0


async def run_scenario(
    ops: Sequence[Op], *, outage: Outage | None = None, retry_after: int = 0, pace: float = 0.005
) -> list[Collector]:
    """Run `ops` against two informers (all namespaces, a set of two) under faults;
    check both against a fresh LIST at the end; return their collectors."""
    async with SimCluster(node_names=("node-1",)) as sim:
        world = SimWorld(sim)
        for ns in NAMESPACES:
            world.namespace(ns)
        faults = sim.faults
        async with KubeClient(await load_kubeconfig(sim.kubeconfig_path)) as client:
            everywhere = pods_informer(client, settings=SETTINGS, rng=random.Random(1))
            some = pods_informer(client, namespaces=SOME, settings=SETTINGS, rng=random.Random(2))
            collectors = [Collector(everywhere), Collector(some)]
            # Only the first matching rule is drawn from: each verb gets its own.
            faults.fail_requests(code=429, share=0.2, verb="watch", retry_after=retry_after)
            faults.fail_requests(code=500, share=0.2, verb="list")
            back_up = anyio.Event()

            async def go_down(seconds: float) -> None:
                await faults.outage(seconds)
                back_up.set()

            async with anyio.create_task_group() as group:
                for collector in collectors:
                    group.start_soon(collector.informer.run)
                    group.start_soon(collector.run)
                for index, op in enumerate(ops):
                    if outage is not None and index == outage.start:
                        group.start_soon(go_down, outage.seconds)
                    if outage is not None and index == outage.back:
                        faults.drop_history()
                        await back_up.wait()
                        faults.clear()  # now the other way round
                        faults.fail_requests(code=500, share=0.2, verb="watch")
                        faults.fail_requests(code=429, share=0.2, verb="list", retry_after=1)
                    if isinstance(op, Write):
                        apply_write(world, op)
                    else:
                        await apply_fault(world, op)
                    await asyncio.sleep(pace)
                faults.clear()
                await collectors[0].converge(world.projected(), within=20)
                await collectors[1].converge(world.projected(namespaces=SOME), within=20)
                group.cancel_scope.cancel()
    for collector in collectors:
        check_order(collector.changes)
        assert collector.informer.counters.lists >= len(collector.informer.namespaces)
    return collectors


# -- a long seeded sequence with a 30 s outage -----------------------------------------


def seeded_ops(seed: int, count: int) -> list[Op]:
    rng = random.Random(seed)
    ops: list[Op] = []
    for _ in range(count):
        if rng.random() < 0.06:
            ops.append(Fault(rng.choice(("close", "close_abrupt", "drop_history", "pause"))))
        else:
            ops.append(
                Write(
                    rng.randrange(len(NAMESPACES)),
                    rng.randrange(NAMES),
                    rng.choice(("label", "status", "noise", "delete")),
                    rng.randrange(8),
                )
            )
    return ops


@pytest.mark.timeout(120)
async def test_store_equals_a_fresh_list_after_faults_and_an_outage() -> None:
    # 1,300 writes and faults: ~4 s of them before the outage, ~3 s while the server is
    # down (written to its store, as other API servers would), ~6 s after it is back.
    ops = seeded_ops(7, 1300)
    collectors = await run_scenario(
        ops, outage=Outage(start=400, back=700), retry_after=1, pace=0.01
    )
    for collector in collectors:
        counters = collector.informer.counters
        assert counters.errors["ApiUnreachable"] > 0  # the outage was seen
        assert counters.gone >= len(collector.informer.namespaces)  # the history was gone
        assert counters.lists > len(collector.informer.namespaces)  # and re-listed


# -- a property test: many shorter random sequences ------------------------------------

writes = st.builds(
    Write,
    st.integers(0, len(NAMESPACES) - 1),
    st.integers(0, NAMES - 1),
    st.sampled_from(("label", "status", "noise", "delete")),
    st.integers(0, 7),
)
fault_ops = st.builds(Fault, st.sampled_from(("close", "close_abrupt", "drop_history", "pause")))


@pytest.mark.timeout(120)
@settings(
    max_examples=8,
    deadline=None,
    derandomize=True,
    phases=(Phase.explicit, Phase.generate),  # no shrinking: every example costs seconds
    suppress_health_check=(HealthCheck.too_slow,),
)
@given(ops=st.lists(st.one_of(writes, writes, writes, fault_ops), min_size=30, max_size=120))
def test_random_sequences_under_faults(ops: list[Op]) -> None:
    asyncio.run(run_scenario(ops))
