"""One node, many tenants (issue 40): a namespace that floods the status writes' budget
and the events' budget never makes another namespace's writes and events wait behind
its own. The real daemon against the sim.

Tenant A: pods whose probe flips every run with a new answer, so every run wants a
status write (`{{.Result}}` in a label) and an event (a transition with a new note),
far more than the budgets give. Tenant B: one pod whose probe the test flips. Measured
by order, in the sim's request log: how many of A's writes (and events) the API server
takes between the moment B's container answers differently and B's own write (and
event). Before the fix, B's write waited behind every A pod due before it, and B's
event behind A's whole queue of events.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from probemarker.sim.exec.runners import ExecReply, ExecRequest
from probemarker.sim.server.harness.accounting import RequestRecord
from tests.integration.world import (
    World,
    eventually,
    flag,
    labels_of,
    marker,
    probe,
    running_daemon,
)

A, B = "tenant-a", "tenant-b"
A_PODS = 20
BUDGETS = {"write_qps": 8.0, "write_burst": 1, "event_qps": 4.0, "event_burst": 1}
# One share for two namespaces is one write in every two. B's write may also find one of
# A's already picked (its token taken), one on its way, and one sent during B's own
# coalescing window (0.02 s).
AHEAD_AT_MOST = 3


class Flood:
    """One of A's containers: Succeeded with a new answer, then Failed with a new
    message, and so on."""

    def __init__(self) -> None:
        self.runs = itertools.count()

    async def answer(self, request: ExecRequest) -> ExecReply:
        n = next(self.runs)
        if n % 2:
            return ExecReply(0, f"{n}\n".encode())
        return ExecReply(1, b"", f"down {n}\n".encode())


class Tenant:
    """B's container: answers `yes` or `no`; notes where the request log stood when it
    first answered differently."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.idle = True
        self.flipped_at: int | None = None

    async def answer(self, request: ExecRequest) -> ExecReply:
        if self.flipped_at is None:
            self.flipped_at = len(self.world.sim.accounting)
        return ExecReply(0 if self.idle else 1, b"ok\n" if self.idle else b"", b"busy\n")

    def flip(self) -> None:
        self.idle, self.flipped_at = not self.idle, None


Match = Callable[[RequestRecord], bool]


def status_write(ns: str) -> Match:
    return lambda r: (
        (r.verb, r.resource, r.subresource, r.namespace)
        == (
            "patch",
            "pods",
            "status",
            ns,
        )
    )


def event_write(ns: str) -> Match:
    return lambda r: r.resource == "events" and r.namespace == ns


def ahead(world: World, since: int, mine: Match, theirs: Match) -> int | None:
    """How many `theirs` records came after `since` and before the first `mine` (None:
    no `mine` yet)."""
    count = 0
    for record in world.sim.accounting.records[since:]:
        if mine(record):
            return count
        count += theirs(record)
    return None


async def test_a_flooding_namespace_never_makes_another_wait_behind_its_writes(
    world: World,
) -> None:
    await world.create_namespace(A)
    await world.create_namespace(B)
    for i in range(A_PODS):
        world.sim.exec_handlers.register(A, f"a{i}", "app", Flood().answer)
        await world.create_pod_in(A, f"a{i}")
    b = Tenant(world)
    world.sim.exec_handlers.register(B, "b0", "app", b.answer)
    await world.create_pod_in(B, "b0")
    load = probe(
        "load",
        succeeded={"labels": {"load": "{{.Result}}"}},
        failed={"labels": {"load": "down"}},
    )
    await world.create_marker_in(A, marker("flood", probes=[load]))
    await world.create_marker_in(B, marker("quiet", probes=[flag("idle")]))

    async with running_daemon(world.sim, **BUDGETS) as daemon:
        await world.sim.kubelet.wait_for_pod(
            B, "b0", lambda p: labels_of(p).get("idle") == "yes", within=10
        )
        # A's flood is on: more of A's pods due than the budget writes.
        await eventually(lambda: daemon.writer.depth >= A_PODS // 2)
        writes_ahead, events_ahead = [], []
        for want in ("no", "yes", "no"):
            b.flip()
            await world.sim.kubelet.wait_for_pod(
                B, "b0", lambda p, want=want: labels_of(p).get("idle") == want, within=10
            )
            since = b.flipped_at
            assert since is not None
            writes_ahead.append(ahead(world, since, status_write(B), status_write(A)))
            await eventually(
                lambda since=since: ahead(world, since, event_write(B), event_write(A)) is not None
            )
            events_ahead.append(ahead(world, since, event_write(B), event_write(A)))
        # Before the fix: 8 to 17 of A's writes ahead of B's, and B's event behind every
        # event A had queued (tens, growing with each flip).
        assert max(n or 0 for n in writes_ahead) <= AHEAD_AT_MOST, writes_ahead
        assert max(n or 0 for n in events_ahead) <= AHEAD_AT_MOST, events_ahead
        # A was flooding all along (its writes still wait), and B lost no event.
        assert daemon.writer.depth > 0
        assert daemon.events.stats.dropped_by_namespace.get(B, 0) == 0
