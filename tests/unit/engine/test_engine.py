"""The engine with an injected clock and a scripted runner: exact counts for
thresholds and the initial delay, seeding, invalid markers. No sim, no sockets."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from probemarker.api.model import Handler, ProbeSpec, TCPSocketAction
from probemarker.engine.dials import EngineSettings
from probemarker.engine.engine import Engine
from probemarker.identity.commands import HeldCommand
from probemarker.kube.watch.cache import Entry, entry_of
from probemarker.kube.write.events import ObjectRef
from probemarker.probe.handler import ProbeTarget
from probemarker.probe.outcome import Outcome
from probemarker.probe.runner import ProbeRunner
from probemarker.probe.tcp import TCPSocketHandler
from probemarker.watch.markers import marker_projection
from probemarker.watch.pods import PodUID, pod_projection
from probemarker.write.patch import build_patch
from tests.fakes import FakeClock, until

START = 1_800_000_000.0  # wall-clock seconds the fake clock starts at


class Runner:
    """Answers from a script (the last answer repeats); counts runs."""

    def __init__(self, *answers: Outcome, missing: str | None = None) -> None:
        self.answers = list(answers) or [Outcome.succeeded("ok")]
        self.runs = 0
        self.missing = missing  # what `unavailable` says of every action
        self.targets: list[ProbeTarget] = []
        self.busy_probes: set[object] = set()  # whose previous command may still run
        self.holding: dict[object, HeldCommand] = {}  # what `held` answers
        self.seeded: list[tuple[object, HeldCommand, str]] = []

    async def unavailable(self, action: Handler) -> str | None:
        return self.missing

    def busy(self, action: Handler, probe: object, container_id: str) -> bool:
        return probe in self.busy_probes

    def skips(self, action: Handler, probe: object, container_id: str) -> bool:
        return probe in self.busy_probes

    def held(self, action: Handler, probe: object, container_id: str) -> HeldCommand | None:
        return self.holding.get(probe)

    def seed(self, action: Handler, probe: object, held: HeldCommand, container_id: str) -> bool:
        self.seeded.append((probe, held, container_id))
        self.busy_probes.add(probe)
        return True

    def turn(
        self, action: Handler, probe: object, container_id: str
    ) -> contextlib.AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()

    async def run(self, spec: ProbeSpec, target: ProbeTarget) -> Outcome:
        answer = self.answers[min(self.runs, len(self.answers) - 1)]
        self.runs += 1
        self.targets.append(target)
        return answer


class Sink:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def record(
        self, *, regarding: ObjectRef, type: str, reason: str, note: str, action: str
    ) -> None:
        self.events.append((regarding.kind, reason, note))


def marker_entry(*, action: dict[str, Any] | None = None, **probe: Any) -> Entry[dict[str, Any]]:
    spec = {
        **(action or {"exec": {"command": ["check"]}}),
        "periodSeconds": 1,
        "failureThreshold": probe.pop("failure", 1),
        "successThreshold": probe.pop("success", 1),
        "initialDelaySeconds": probe.pop("delay", 0),
    }
    raw = {
        "apiVersion": "probemarker.io/v1alpha1",
        "kind": "PodProbeMarker",
        "metadata": {"name": "m", "namespace": "ns", "uid": "mu", "resourceVersion": "1"},
        "spec": {
            "selector": {"matchLabels": {"app": "game"}},
            "probes": [
                {
                    "name": "p",
                    "containerName": "app",
                    "probe": spec,
                    "podConditionType": "x.io/p",
                    **probe,
                }
            ],
        },
    }
    return entry_of(raw, marker_projection)


def pod_entry(
    *,
    started_at: float = START,
    annotations: dict[str, str] | None = None,
    ports: dict[str, int] | None = None,
) -> Any:
    return entry_of(
        pod_raw(started_at=started_at, annotations=annotations, ports=ports), pod_projection
    )


def pod_raw(
    *,
    started_at: float = START,
    annotations: dict[str, str] | None = None,
    ports: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Pod g as the API server shows it (`pod_entry`: its informer entry)."""
    stamp = rfc3339(started_at)
    declared = [{"name": n, "containerPort": p} for n, p in (ports or {}).items()]
    return {
        "metadata": {
            "name": "g",
            "namespace": "ns",
            "uid": "pu",
            "resourceVersion": "5",
            "labels": {"app": "game"},
            "annotations": annotations or {},
        },
        "spec": {"nodeName": "n", "containers": [{"name": "app", "ports": declared}]},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "app",
                    "containerID": "containerd://1",
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": stamp}},
                }
            ],
        },
    }


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Rig:
    def __init__(self, runner: Runner | ProbeRunner, *, clock: FakeClock | None = None) -> None:
        self.clock = clock or FakeClock(START)
        self.runner, self.sink, self.marks = runner, Sink(), list[PodUID]()
        self.engine = Engine(
            runner=runner,  # type: ignore[arg-type]
            sink=self.sink,  # type: ignore[arg-type]
            mark=self.marks.append,
            clock=self.clock,
            wall=self.clock.now,
        )

    async def tick(self, runs: int) -> None:
        """Advance one period and wait for the runner to have run `runs` times."""
        assert isinstance(self.runner, Runner)
        runner = self.runner
        self.clock.advance(1.0)
        await until(lambda: runner.runs >= runs and self.engine.dispatcher.running == 0)

    async def periods(self, n: int) -> None:
        """Advance `n` periods, each until the engine has counted one more run (of
        any outcome, including the runs the engine did not hand to the runner)."""
        for _ in range(n):
            done = sum(self.engine.stats.runs.values()) + 1
            self.clock.advance(1.0)
            await until(
                lambda: (
                    sum(self.engine.stats.runs.values()) >= done  # noqa: B023
                    and self.engine.dispatcher.running == 0
                )
            )

    def decided(self) -> Any:
        probes = list(self.engine._probes.values())
        return probes[0].thresholds.decided if probes else None


@contextlib.asynccontextmanager
async def running(
    runner: Runner | ProbeRunner | None = None, *, clock: FakeClock | None = None
) -> AsyncIterator[Rig]:
    r = Rig(runner or Runner(), clock=clock)
    async with anyio.create_task_group() as group:
        group.start_soon(r.engine.dispatcher.run)
        yield r
        await r.engine.dispatcher.stop(grace=0)
        group.cancel_scope.cancel()


def on_grid(t: float, step: float) -> bool:
    """`t` is a whole multiple of `step`, up to float rounding (not of its magnitude)."""
    rest = t % step
    return min(rest, step - rest) < 1e-6


def stepped_engine(step: float, clock: FakeClock) -> Engine:
    return Engine(
        runner=Runner(),  # type: ignore[arg-type]
        sink=Sink(),  # type: ignore[arg-type]
        mark=lambda uid: None,
        clock=clock,
        wall=clock.now,
        settings=EngineSettings(phase_step=step),
    )


@pytest.mark.parametrize(("step", "most_moments"), [(0.25, 4), (0.5, 2), (0.0, 40)])
def test_probes_first_dues_lie_on_the_phase_steps(step: float, most_moments: int) -> None:
    # Issue 43: with steps, runs of a node come due together (at most 1/step moments a
    # second), so the daemon wakes once for a group; step 0, each probe its own moment.
    engine = stepped_engine(step, FakeClock(START))
    engine.sync_marker(marker_entry().key, marker_entry())
    for i in range(40):
        raw = pod_raw()
        raw["metadata"].update(name=f"g{i}", uid=f"pu{i}")
        pod = entry_of(raw, pod_projection)
        engine.sync_pod(pod.key, pod)
    dues = [due for key in engine._probes if (due := engine.dispatcher.due(key)) is not None]
    assert len(dues) == 40
    assert all(START <= due < START + 1 for due in dues)
    moments = set(dues)
    if step:
        assert len(moments) <= most_moments
        assert all(on_grid(due, step) for due in moments)
    else:
        assert len(moments) == most_moments  # every probe its own


def test_a_changed_period_keeps_the_probe_on_the_phase_steps() -> None:
    # A new period applies from the next run: the sooner of the old slot and the first
    # slot of the new grid, which lies on the steps too (10 s -> 1 s: the new one).
    clock = FakeClock(START + 0.1)  # off the grid
    engine = stepped_engine(0.25, clock)
    slow = marker_entry()
    slow.obj["spec"]["probes"][0]["probe"]["periodSeconds"] = 10
    slow = entry_of(slow.obj, marker_projection)
    engine.sync_marker(slow.key, slow)
    pod = pod_entry()
    engine.sync_pod(pod.key, pod)
    (key,) = engine._probes
    before = engine.dispatcher.due(key)
    assert before is not None
    assert on_grid(before, 0.25)
    engine.sync_marker(marker_entry().key, marker_entry())  # period 1 s
    assert engine._probes[key].spec.timing.period_seconds == 1
    due = engine.dispatcher.due(key)
    assert due is not None
    assert clock.now() <= due < clock.now() + 1  # the new grid's first slot
    assert on_grid(due, 0.25)


async def test_failure_threshold_decides_on_exactly_the_third_run() -> None:
    runner = Runner(Outcome.failed("a"), Outcome.failed("b"), Outcome.failed("c"))
    async with running(runner) as rig:
        rig.engine.sync_marker(marker_entry(failure=3).key, marker_entry(failure=3))
        rig.engine.sync_pod(pod_entry().key, pod_entry())
        for run in (1, 2):
            await rig.tick(run)
            assert rig.decided() is None, f"decided after {run} runs"
        await rig.tick(3)
        assert str(rig.decided().state) == "Failed"
        assert rig.sink.events == [("Pod", "ProbeFailed", "m/p on container app: Failed: c")]


async def test_periods_while_the_previous_command_may_still_run_are_skipped_not_queued() -> None:
    # Issue 23: a held exec stream means the last command still runs in the container.
    runner = Runner(Outcome.failed("timed out"), Outcome.succeeded("ok"))
    async with running(runner) as rig:
        rig.engine.sync_marker(marker_entry().key, marker_entry())
        rig.engine.sync_pod(pod_entry().key, pod_entry())
        await rig.tick(1)
        assert str(rig.decided().state) == "Failed"
        (key,) = rig.engine._probes
        runner.busy_probes.add(key)
        for skipped in (1, 2, 3):
            rig.clock.advance(1.0)
            await until(lambda: rig.engine.stats.periods_skipped >= skipped)  # noqa: B023
        assert runner.runs == 1  # nothing started beside the running command
        assert sum(rig.engine.stats.runs.values()) == 1  # and no outcome recorded
        assert str(rig.decided().state) == "Failed"  # the last one stands
        runner.busy_probes.clear()
        await rig.tick(2)  # one run, not the three skipped ones queued
        await until(lambda: rig.engine.dispatcher.due(key) is not None)
        assert runner.runs == 2
        assert str(rig.decided().state) == "Succeeded"
        assert runner.targets[0].probe == key  # handlers key their holds by the probe


async def test_alternating_outcomes_never_decide() -> None:
    runner = Runner(*[Outcome.succeeded("s"), Outcome.failed("f")] * 5, Outcome.unknown("x"))
    async with running(runner) as rig:
        entry = marker_entry(failure=2, success=2)
        rig.engine.sync_marker(entry.key, entry)
        rig.engine.sync_pod(pod_entry().key, pod_entry())
        for run in range(1, 11):
            await rig.tick(run)
        assert rig.decided() is None
        assert rig.sink.events == []


async def test_initial_delay_counts_from_the_containers_start() -> None:
    async with running() as rig:
        entry = marker_entry(delay=5)
        rig.engine.sync_marker(entry.key, entry)
        pod = pod_entry(started_at=START)
        rig.engine.sync_pod(pod.key, pod)
        for _ in range(4):  # t = START+1 .. START+4: inside the delay, no exec
            rig.clock.advance(1.0)
            for _ in range(50):
                await anyio.lowlevel.checkpoint()
        assert rig.runner.runs == 0
        await rig.tick(1)
        assert rig.runner.runs == 1


async def test_a_seeded_probe_publishes_nothing_new() -> None:
    record = '{"#uid":"pu","m#p":{"c":"x.io/p","s":"S"}}'
    pod = pod_entry(annotations={"probemarker.io/owned": record})
    pod.obj["status"]["conditions"] = [
        {"type": "x.io/p", "status": "True", "reason": "ProbeSucceeded", "message": "ok"}
    ]
    async with running(Runner(Outcome.succeeded("ok"))) as rig:
        entry = marker_entry()
        rig.engine.sync_marker(entry.key, entry)
        rig.engine.sync_pod(pod.key, pod)
        assert str(rig.decided().state) == "Succeeded"
        for run in (1, 2, 3):
            await rig.tick(run)
        assert rig.sink.events == []  # no transition: the seeded state held
        found = rig.engine.lookup(PodUID("pu"))
        assert found is not None
        view = found[0]
        patch = build_patch(pod=view, desired=rig.engine.plan(view), now="2026-11-23T00:00:00Z")
        assert patch == []


async def test_an_invalid_marker_is_skipped_with_one_warning() -> None:
    async with running() as rig:
        entry = marker_entry()
        entry.obj["spec"]["probes"][0]["podConditionType"] = "Ready"  # reserved
        for _ in range(3):  # re-lists deliver it again: still one warning
            rig.engine.sync_marker(entry.key, entry)
        rig.engine.sync_pod(pod_entry().key, pod_entry())
        assert rig.engine.probe_count == 0
        assert [e[:2] for e in rig.sink.events] == [("PodProbeMarker", "InvalidMarker")]
        assert "podConditionType" in rig.sink.events[0][2]


async def test_a_marker_writing_a_label_its_selector_reads_is_skipped() -> None:
    """Issue 15: Failed sets drained=true on pods selected by `drained DoesNotExist`,
    which would deselect and reselect the pod every period. Never probed, nothing written."""
    async with running(Runner(Outcome.failed("down"))) as rig:
        entry = marker_entry()
        spec = entry.obj["spec"]
        spec["selector"]["matchExpressions"] = [{"key": "drained", "operator": "DoesNotExist"}]
        spec["probes"][0]["markerPolicy"] = [{"state": "Failed", "labels": {"drained": "true"}}]
        rig.engine.sync_marker(entry.key, entry)
        pod = pod_entry()
        rig.engine.sync_pod(pod.key, pod)
        assert rig.engine.probe_count == 0
        assert [e[:2] for e in rig.sink.events] == [("PodProbeMarker", "InvalidMarker")]
        note = rig.sink.events[0][2]
        assert 'spec.probes[0].markerPolicy[0].labels: writes label "drained"' in note
        found = rig.engine.lookup(PodUID("pu"))
        assert found is not None
        desired = rig.engine.plan(found[0])
        assert build_patch(pod=found[0], desired=desired, now="2026-11-23T00:00:00Z") == []


NOT_RUN = "The probe decides nothing until this is fixed."


async def test_a_port_name_the_container_lacks_is_reported_once_and_decides_nothing() -> None:
    runner = Runner()
    async with running(runner) as rig:
        broken = marker_entry(action={"tcpSocket": {"port": "metrics"}})
        rig.engine.sync_marker(broken.key, broken)
        rig.engine.sync_pod(pod_entry().key, pod_entry(ports={"db": 5432}))
        await rig.periods(3)
        assert runner.runs == 0
        assert rig.decided() is None
        assert rig.engine.stats.runs == {("tcpSocket", "Unknown"): 3}
        note = f"m/p on container app: port 'metrics' is not among the ports of container app. {NOT_RUN}"
        assert rig.sink.events == [("Pod", "PortNotFound", note)]
        fixed = marker_entry(action={"tcpSocket": {"port": "db"}})
        rig.engine.sync_marker(fixed.key, fixed)
        await rig.tick(1)
        assert str(rig.decided().state) == "Succeeded"
        assert dict(runner.targets[0].ports) == {"db": 5432}
        assert [e[1] for e in rig.sink.events] == ["PortNotFound", "ProbeSucceeded"]


async def test_a_handler_this_install_lacks_is_reported_once() -> None:
    missing = "grpc probes need the optional grpc extra"
    runner = Runner(missing=missing)
    async with running(runner) as rig:
        entry = marker_entry(action={"grpc": {"port": 9000}})
        rig.engine.sync_marker(entry.key, entry)
        rig.engine.sync_pod(pod_entry().key, pod_entry())
        await rig.periods(3)
        assert runner.runs == 0
        assert rig.decided() is None
        note = f"m/p on container app: {missing}. {NOT_RUN}"
        assert rig.sink.events == [("Pod", "ProbeUnsupported", note)]


async def test_a_pod_without_an_ip_is_not_probed() -> None:
    """The real tcpSocket handler: no pod IP, no connect anywhere, nothing decided."""
    async with TCPSocketHandler() as tcp, running(ProbeRunner({TCPSocketAction: tcp})) as rig:
        entry = marker_entry(action={"tcpSocket": {"port": 5432}})
        rig.engine.sync_marker(entry.key, entry)
        rig.engine.sync_pod(pod_entry().key, pod_entry())  # running, but no status.podIP
        await rig.periods(3)
        assert rig.engine.stats.runs == {("tcpSocket", "Unknown"): 3}
        assert rig.decided() is None
        assert rig.sink.events == []


async def test_the_namespaces_with_pods_here_are_known_and_a_left_one_forgotten() -> None:
    """What the metrics label by namespace (observe/namespaced.py): only namespaces with a
    pod on this node, so a namespace whose pods all left is no longer kept."""
    async with running() as rig:
        assert rig.engine.namespaces == frozenset()
        pod = pod_entry()
        rig.engine.sync_pod(pod.key, pod)
        assert rig.engine.namespaces == {"ns"}
        rig.engine.sync_pod(pod.key, None)
        assert rig.engine.namespaces == frozenset()
