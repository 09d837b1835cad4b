"""The status document (`build_snapshot`): engine state in, a versioned dict out."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
import pytest

from probemarker.api import rules
from probemarker.api.model import ExecAction, MarkerPolicy, MarkerRef, ProbeSpec, ProbeState, Timing
from probemarker.decide.decide import Decision, ThresholdState
from probemarker.engine.seen import LastRun, PodSeen, ProbeSeen, Waiting
from probemarker.identity.probes import ProbeKey
from probemarker.kit.text import SHOWN_LIMIT
from probemarker.observe.snapshot import PROBE_BYTES, SNAPSHOT_VERSION, build_snapshot, time_text
from probemarker.probe.outcome import Outcome, Result
from probemarker.watch.pods import PodUID, pod_projection, pod_view
from probemarker.write.desired import DesiredPod, InvalidValue
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
        node="n1", ready=True, pods=[(pod, write)], wall_now=WALL, clock_now=CLOCK
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


def shown_value(text: str) -> dict[str, Any]:
    return {
        "value": text,
        "bytes": len(text.encode()),
        "sha256": hashlib.sha256(text.encode()).hexdigest()[:12],
    }


def test_the_last_run_renders_its_values_and_names_what_is_refused() -> None:
    last = LastRun(WALL - 3, 0.0123456, Outcome.succeeded("Idle Now\x1b[31m", answer="bad value!"))
    thresholds = ThresholdState(
        last=Result.SUCCEEDED, run=2, decided=Decision(ProbeState.SUCCEEDED, "ok", "bad value!")
    )
    refused = InvalidValue(KEY.owner, "label", "idle", "bad value!", "must be a label value")
    other = InvalidValue(KEY.owner, "label", "gone", "was bad", "must be a label value")
    desired = DesiredPod({}, {}, {}, {}, (), invalid=(refused, other))
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
        "values": {"labels": {"idle": shown_value("bad value!")}, "annotations": {}},
        "refused": [
            # the value `values` shows is not repeated
            {"kind": "label", "key": "idle", "problem": "must be a label value", "value": None},
            {
                "kind": "label",
                "key": "gone",
                "problem": "must be a label value",
                "value": shown_value("was bad"),
            },
        ],
    }


def test_a_run_without_an_answer_keeps_the_states_value() -> None:
    last = LastRun(WALL, 1.0, Outcome.succeeded("", answer=None))
    decided = Decision(ProbeState.SUCCEEDED, "ok", "yes")
    probe = ProbeSeen(KEY, SPEC, "exec", ThresholdState(decided=decided), last=last)
    (row,) = snapshot(probe)["pods"][0]["probes"]
    assert row["last"]["values"] == {"labels": {"idle": shown_value("yes")}, "annotations": {}}


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


def largest_row() -> dict[str, Any]:
    """The largest row there is: names at their bounds (a probe's name escaped), one
    policy's 32 labels and 32 annotations with 317-character keys and values that
    render 380 KB, shown; the other policy's 64 keys refused with values of their own;
    messages of 1 KiB that JSON escapes twice over; counts of 20 digits."""
    keys = [f"{'k' * 253}/{state}{i:02}{'n' * 60}" for state in "sf" for i in range(64)]
    assert all(len(k) == rules.MAX_QUALIFIED_NAME_LENGTH for k in keys)
    template = "\x01{{.Result}}" * 341  # 4092 bytes; a control character costs 6 as JSON

    def policy(state: ProbeState, mine: list[str]) -> MarkerPolicy:
        return MarkerPolicy(
            state,
            labels=dict.fromkeys(mine[:32], template),
            annotations=dict.fromkeys(mine[32:], template),
        )

    key = ProbeKey(PodUID("pu"), "c" * 63, MarkerRef("n" * 63, "m" * 253), "\x01" * 63)
    spec = ProbeSpec(
        name=key.probe,
        container_name=key.container,
        handler=ExecAction(("check",)),
        timing=Timing(),
        policies=(
            policy(ProbeState.SUCCEEDED, keys[:64]),
            policy(ProbeState.FAILED, keys[64:]),
        ),
    )
    message = '"' * 1024
    answer = "\u00e9" * 512  # 1 KiB of UTF-8: what {{.Result}} stands for at most
    problem = "p" * 1000
    refused = tuple(
        InvalidValue(key.owner, "label" if i < 32 else "annotation", k, "\x02" * 9000, problem)
        for i, k in enumerate(keys[64:])
    )
    thresholds = ThresholdState(
        last=Result.SUCCEEDED,
        run=10**19,
        decided=Decision(ProbeState.FAILED, message, "x"),
    )
    probe = ProbeSeen(
        key,
        spec,
        "tcpSocket",
        thresholds,
        last=LastRun(WALL, 123456.789, Outcome.succeeded(message, answer=answer)),
        due=CLOCK + 1,
        running=True,
        waiting=Waiting.CONTAINER_NOT_STARTED,
        detail=message,
        unknown_runs=10**19,
    )
    desired = DesiredPod({}, {}, {}, {}, (), invalid=refused)
    (row,) = snapshot(probe, desired=desired)["pods"][0]["probes"]
    return dict(row)


def test_a_row_takes_at_most_probe_bytes_whatever_its_marker_renders() -> None:
    row = largest_row()
    size = len(orjson.dumps(row))
    assert size <= PROBE_BYTES
    assert size > PROBE_BYTES * 0.85  # the bound is the largest row, not a guess far above it
    values = row["last"]["values"]["annotations"]
    assert len(values) == 32
    for value in values.values():
        assert value["bytes"] == 341 * (1 + 1024)  # the whole value, never built
        assert len(orjson.dumps(value["value"])) - 2 <= SHOWN_LIMIT
    assert len(row["last"]["refused"]) == 64
