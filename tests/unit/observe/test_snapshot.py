"""The status document (`build_snapshot`): engine state in, a versioned dict out."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from probemarker.api.model import ExecAction, MarkerPolicy, MarkerRef, ProbeSpec, ProbeState, Timing
from probemarker.decide.decide import Decision, ThresholdState
from probemarker.engine.seen import LastRun, PodSeen, ProbeSeen, Waiting
from probemarker.match.identity import ProbeKey
from probemarker.observe.snapshot import SNAPSHOT_VERSION, build_snapshot, time_text
from probemarker.probe.outcome import Outcome, Result
from probemarker.watch.pods import PodUID, pod_view
from probemarker.write.desired import DesiredPod, InvalidValue
from probemarker.write.ownership import pod_projection
from probemarker.write.pending import PendingWrite, WriteWait
from tests.unit.engine.test_engine import pod_raw

WALL = 1_800_000_000.0  # the wall clock at the snapshot
CLOCK = 500.0  # the engine's clock at the same moment
REF = MarkerRef("ns", "m")
KEY = ProbeKey(PodUID("pu"), "app", REF, "idle")
SPEC = ProbeSpec(
    name="idle",
    container_name="app",
    handler=ExecAction(("check",)),
    timing=Timing(failure_threshold=3, success_threshold=2),
    policies=(
        MarkerPolicy(ProbeState.SUCCEEDED, labels={"idle": "{{.Result}}"}),
        MarkerPolicy(ProbeState.FAILED, labels={"idle": "no"}),
    ),
    condition_type="x.io/idle",
)
VIEW = pod_view(pod_projection(pod_raw()))


def snapshot(probe: ProbeSeen, *, write: PendingWrite | None = None, desired: Any = None) -> Any:
    pod = PodSeen(VIEW, (probe,), desired)
    return build_snapshot(
        node="n1", ready=True, pods=[pod], writes={VIEW.uid: write}, wall_now=WALL, clock_now=CLOCK
    )


def test_the_document_is_versioned_and_names_node_and_pod() -> None:
    doc = snapshot(ProbeSeen(KEY, SPEC, "exec", ThresholdState()))
    assert doc["apiVersion"] == SNAPSHOT_VERSION
    assert (doc["node"], doc["ready"], doc["time"]) == ("n1", True, time_text(WALL))
    (pod,) = doc["pods"]
    assert {k: pod[k] for k in ("namespace", "name", "uid", "phase", "deleting", "write")} == {
        "namespace": "ns",
        "name": "g",
        "uid": "pu",
        "phase": "Running",
        "deleting": False,
        "write": None,
    }
    (row,) = pod["probes"]
    assert row == {
        "marker": "ns/m",
        "probe": "idle",
        "container": "app",
        "kind": "exec",
        "state": None,
        "message": None,
        "count": {"result": None, "runs": 0, "threshold": None},
        "unknownRuns": 0,
        "last": None,
        "next": None,
        "running": False,
        "waiting": None,
    }
    orjson.dumps(doc)  # JSON values only


@pytest.mark.parametrize(
    ("thresholds", "count"),
    [
        (
            ThresholdState(last=Result.FAILED, run=2),
            {"result": "Failed", "runs": 2, "threshold": 3},
        ),
        (
            ThresholdState(last=Result.SUCCEEDED, run=1),
            {"result": "Succeeded", "runs": 1, "threshold": 2},
        ),
    ],
)
def test_the_count_is_towards_the_threshold_of_its_result(
    thresholds: ThresholdState, count: dict[str, Any]
) -> None:
    (row,) = snapshot(ProbeSeen(KEY, SPEC, "exec", thresholds))["pods"][0]["probes"]
    assert row["count"] == count


def test_the_last_run_renders_its_values_and_names_what_is_refused() -> None:
    last = LastRun(WALL - 3, 0.0123456, Outcome.succeeded("Idle Now\x1b[31m", answer="bad value!"))
    thresholds = ThresholdState(
        last=Result.SUCCEEDED, run=2, decided=Decision(ProbeState.SUCCEEDED, "ok", "bad value!")
    )
    refused = InvalidValue(KEY.owner, "label", "idle", "bad value!", "must be a label value")
    desired = DesiredPod({}, {}, {}, {}, (), invalid=(refused,))
    probe = ProbeSeen(KEY, SPEC, "exec", thresholds, last=last, due=CLOCK + 7)
    (row,) = snapshot(probe, desired=desired)["pods"][0]["probes"]
    assert row["state"] == "Succeeded"
    assert row["message"] == "ok"
    assert row["next"] == time_text(WALL + 7)
    assert row["last"] == {
        "time": time_text(WALL - 3),
        "result": "Succeeded",
        "duration": 0.012,
        "message": "Idle Now",  # cleaned as a condition message is
        "values": {"labels": {"idle": "bad value!"}, "annotations": {}},
        "refused": [
            {
                "kind": "label",
                "key": "idle",
                "value": "bad value!",
                "problem": "must be a label value",
            }
        ],
    }


def test_a_run_without_an_answer_keeps_the_states_value() -> None:
    last = LastRun(WALL, 1.0, Outcome.succeeded("", answer=None))
    decided = Decision(ProbeState.SUCCEEDED, "ok", "yes")
    probe = ProbeSeen(KEY, SPEC, "exec", ThresholdState(decided=decided), last=last)
    (row,) = snapshot(probe)["pods"][0]["probes"]
    assert row["last"]["values"] == {"labels": {"idle": "yes"}, "annotations": {}}


def test_an_unknown_run_renders_no_values() -> None:
    last = LastRun(WALL, 1.0, Outcome.unknown("exec stream broken"))
    (row,) = snapshot(ProbeSeen(KEY, SPEC, "exec", ThresholdState(), last=last, unknown_runs=4))[
        "pods"
    ][0]["probes"]
    assert (row["last"]["result"], row["last"]["values"], row["unknownRuns"]) == (
        "Unknown",
        None,
        4,
    )


def test_messages_are_bounded_and_cleaned() -> None:
    long = "x" * 5000
    decided = Decision(ProbeState.FAILED, long + "\x07", "")
    last = LastRun(WALL, 0.0, Outcome.failed("\u202e" + long))
    probe = ProbeSeen(
        KEY,
        SPEC,
        "exec",
        ThresholdState(decided=decided),
        last=last,
        waiting=Waiting.CANNOT_RUN,
        detail="port \x1b]0;evil\x07 missing " + long,
    )
    (row,) = snapshot(probe)["pods"][0]["probes"]
    for text in (row["message"], row["last"]["message"], row["waiting"]["message"]):
        assert len(text.encode()) <= 1024
        assert not any(c in text for c in "\x07\x1b\u202e")
    assert row["waiting"]["reason"] == "CannotRun"


def test_a_pending_write_says_what_and_until_when() -> None:
    write = PendingWrite({"labels_set": {"idle": "yes"}}, WriteWait.MESSAGE_REFRESH, CLOCK + 9.5)
    doc = snapshot(ProbeSeen(KEY, SPEC, "exec", ThresholdState()), write=write)
    assert doc["pods"][0]["write"] == {
        "changes": {"labels_set": {"idle": "yes"}},
        "waits": "MessageRefresh",
        "until": time_text(WALL + 9.5),
        "scope": "FULL",
    }
