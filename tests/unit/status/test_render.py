"""`probemarker status`'s output: the table, JSON, exit codes, escaping, bad answers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from probemarker.observe.snapshot import SNAPSHOT_VERSION
from probemarker.status.render import (
    CELL,
    LIST_VERSION,
    NodeStatus,
    document_problem,
    exit_code,
    render_json,
    render_text,
    select,
)

T0 = "2026-11-28T10:00:00.000Z"


def row(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "marker": "game/idle",
        "probe": "p",
        "container": "app",
        "kind": "exec",
        "state": "Succeeded",
        "message": "ok",
        "count": {"result": "Succeeded", "runs": 1, "threshold": 1},
        "unknownRuns": 0,
        "last": {
            "time": "2026-11-28T09:59:50.000Z",
            "result": "Succeeded",
            "duration": 0.01,
            "message": "ok",
            "values": None,
            "refused": [],
        },
        "next": "2026-11-28T10:00:07.000Z",
        "running": False,
        "waiting": None,
    }
    return {**base, **over}


def doc(*probes: dict[str, Any], write: Any = None, name: str = "g-0", **over: Any) -> Any:
    pod = {"namespace": "game", "name": name, "uid": "u", "phase": "Running", "deleting": False}
    body = {"apiVersion": SNAPSHOT_VERSION, "node": "n1", "ready": True, "time": T0}
    return {**body, "pods": [{**pod, "write": write, "probes": list(probes)}], **over}


def node(document: Any, name: str = "n1") -> NodeStatus:
    return NodeStatus.answered(name, "probemarker-system/pm-x", document)


def test_one_row_a_probe_like_kubectl_get() -> None:
    waiting = row(
        probe="q",
        state=None,
        count={"result": "Failed", "runs": 2, "threshold": 3},
        last=None,
        waiting={"reason": "CommandHeld", "message": "the previous command may still run"},
    )
    lines = render_text([node(doc(row(), waiting))]).splitlines()
    assert lines[0].split() == ["POD", "MARKER/PROBE", "STATE", "COUNT", "LAST", "NEXT", "MESSAGE"]
    assert lines[1].split() == [
        *("game/g-0", "idle/p", "Succeeded", "-", "Succeeded", "10s", "ago"),
        *("in", "7s", "ok"),
    ]
    assert lines[2].split()[:6] == ["game/g-0", "idle/q", "<none>", "2/3", "Failed", "-"]
    assert "CommandHeld   the previous command may still run" in lines[2]


def test_count_shows_only_results_counted_toward_a_change() -> None:
    # results that agree with the decided state count toward no threshold: 57 of them
    # are not "57/1"; results against it are what the operator waits on
    agree = row(count={"result": "Succeeded", "runs": 57, "threshold": 1})
    against = row(probe="q", count={"result": "Failed", "runs": 2, "threshold": 3})
    undecided = row(probe="r", state=None, count={"result": "Failed", "runs": 1, "threshold": 3})
    lines = render_text([node(doc(agree, against, undecided))]).splitlines()
    assert [line.split()[3] for line in lines[1:4]] == ["-", "2/3", "1/3"]


def test_several_nodes_get_a_node_column_and_problems_are_named() -> None:
    nodes = [
        node(doc(row()), "n1"),
        node(doc(row(), name="g-1"), "n2"),
        NodeStatus("n3", "probemarker-system/pm-z", problem="the daemon is not running"),
    ]
    text = render_text(nodes)
    assert text.splitlines()[0].split()[:2] == ["NODE", "POD"]
    assert "  n3 (probemarker-system/pm-z): the daemon is not running" in text
    assert exit_code(nodes) == 1
    assert exit_code(nodes[:2]) == 0


def waits(reason: str) -> dict[str, Any]:
    """An undecided row that does not run, for `reason` (engine/seen.py `Waiting`)."""
    return row(
        state=None,
        last=None,
        count={"result": None, "runs": 0, "threshold": None},
        waiting={"reason": reason, "message": "why"},
    )


@pytest.mark.parametrize(
    ("document", "code"),
    [
        pytest.param(doc(row()), 0, id="decided-and-written"),
        pytest.param(doc(row(state=None)), 1, id="counting-toward-a-threshold"),
        pytest.param(
            doc(row(), write={"changes": {}, "waits": "WriteBudget"}), 1, id="pending-write"
        ),
        pytest.param(doc(row(), ready=False), 1, id="daemon-not-synced"),
        pytest.param(doc(), 0, id="nothing-shown"),
        # A pod whose spec lacks the container: only a new pod changes that (issue 40).
        pytest.param(doc(row(), waits("ContainerMissing")), 0, id="container-missing-settled"),
        pytest.param(doc(waits("PodTerminating")), 0, id="terminating-settled"),
        pytest.param(doc(waits("PodFinished")), 0, id="finished-settled"),
        pytest.param(doc(waits("CannotRun")), 0, id="cannot-run-until-the-marker-changes"),
        pytest.param(doc(waits("ContainerNotCreated")), 1, id="container-not-created-yet"),
        pytest.param(doc(waits("ContainerNotStarted")), 1, id="container-not-started-yet"),
        pytest.param(doc(waits("InitialDelay")), 1, id="initial-delay"),
        pytest.param(doc(waits("CommandHeld")), 1, id="command-held"),
        pytest.param(
            doc(row(), omitted=[{"namespace": "hog", "pods": 3, "probes": 9}]),
            1,
            id="rows-not-shown",
        ),
    ],
)
def test_exit_codes(document: Any, code: int) -> None:
    assert exit_code([node(document)]) == code


def test_a_pod_no_longer_probed_says_so_in_state() -> None:
    """A terminating or finished pod keeps what it shows and gets no write (docs/engine.md):
    its rows say so, not `<none>` (nothing decided yet)."""
    text = render_text(
        [node(doc(waits("PodTerminating"))), node(doc(waits("PodFinished"), name="g-1"), "n2")]
    )
    states = [line.split()[3] for line in text.splitlines()[1:3]]
    assert states == ["Terminating", "Finished"]
    assert "<none>" not in text


def test_rows_the_daemon_left_out_are_named_with_the_way_to_see_them() -> None:
    omitted = [{"namespace": "hog", "pods": 40, "probes": 1280}]
    nodes = [node(doc(row(), omitted=omitted))]
    text = render_text(nodes)
    assert "  n1: namespace hog: 40 pods, 1280 probes; see them with -n hog" in text
    assert json.loads(render_json(nodes))["nodes"][0]["omitted"] == omitted


def test_a_pending_write_says_what_and_why() -> None:
    write = {
        "changes": {"labels_set": {"idle": "yes"}, "conditions": {"x.io/idle": "True"}},
        "waits": "MessageRefresh",
        "until": "2026-11-28T10:00:09.000Z",
    }
    text = render_text([node(doc(row(), write=write))])
    assert "Pending writes:\n  game/g-0: labels_set idle=yes; conditions x.io/idle=True; " in text
    assert "waits: MessageRefresh (for 9s)" in text


def test_values_from_pods_and_markers_are_escaped_and_cut() -> None:
    hostile = row(
        probe="p\x1b[2J",
        last={**row()["last"], "message": "\u202eevil\x07" + "x" * 500},
        marker="game/m\r\nFAKE ROW",
    )
    text = render_text([node(doc(hostile, name="g\x1b]0;t\x07"))])
    assert not any(c in text for c in "\x1b\x07\u202e\r")
    assert "\\x1b[2J" in text
    assert len(text.splitlines()) == 2  # no line broken in two
    assert max(len(line) for line in text.splitlines()) < 4 * CELL + 60
    out = render_json([node(doc(hostile))])
    assert "\x1b" not in out
    assert json.loads(out)["nodes"][0]["pods"][0]["probes"][0]["probe"] == "p\x1b[2J"


def test_json_is_versioned_and_carries_each_nodes_answer() -> None:
    nodes = [node(doc(row())), NodeStatus("n2", problem="no daemon pod on node n2")]
    body = json.loads(render_json(nodes))
    assert body["apiVersion"] == LIST_VERSION
    assert [(n["node"], n["problem"], n["ready"]) for n in body["nodes"]] == [
        ("n1", None, True),
        ("n2", "no daemon pod on node n2", None),
    ]
    assert body["nodes"][0]["pods"][0]["probes"][0]["state"] == "Succeeded"


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ([], "not a JSON object"),
        ({"error": "pod must be NAMESPACE/NAME"}, "refused the request: pod must be"),
        (
            {"apiVersion": "probemarker.io/status/v9", "pods": []},
            "answered 'probemarker.io/status/v9'",
        ),
        ({"apiVersion": SNAPSHOT_VERSION}, "no pods list"),
        (doc(row()), None),
    ],
)
def test_answers_that_cannot_be_read_say_why(document: Any, problem: str | None) -> None:
    found = document_problem(document)
    assert found == problem if problem is None else problem in (found or "")


def test_filters_keep_the_pod_and_the_markers_probes() -> None:
    pods = doc(row(), row(marker="game/other", probe="o"))["pods"]
    assert [p["probe"] for p in select(pods, pod="game/g-0", marker="game/other")[0]["probes"]] == [
        "o"
    ]
    assert select(pods, pod="game/g-1", marker=None) == ()
    assert select(pods, pod=None, marker="game/none") == ()
    assert len(select(pods, pod=None, marker=None, namespace="game")) == 1
    assert select(pods, pod=None, marker=None, namespace="other") == ()


def test_filters_that_match_nothing_are_not_a_success() -> None:
    """A script waiting for `status --pod NS/NAME` to exit 0 must not pass before the
    daemon has seen the pod (or on a misspelt name): nothing shown is not decided."""
    empty = node({**doc(row()), "pods": []})
    assert exit_code([empty]) == 0  # no filter: an empty node is not an error
    assert exit_code([empty], asked="--pod game/g-9") == 1
    text = render_text([empty], asked="--pod game/g-9")
    assert "No probes of --pod game/g-9 on the nodes asked" in text
    assert exit_code([node(doc(row()))], asked="--pod game/g-0") == 0


@pytest.mark.parametrize(
    "answer",
    [
        {"error": "e" * 1_000_000},  # a daemon's refusal
        {"apiVersion": "v" * 1_000_000, "pods": []},  # another version, or garbage
    ],
)
def test_a_daemons_problem_is_cut_on_the_terminal_and_in_json(answer: Any) -> None:
    """What a daemon (or its reader's stderr) says of itself reaches the terminal cut:
    a daemon answering too much cannot flood the operator's screen."""
    problem = document_problem(answer)
    assert problem is not None
    nodes = [NodeStatus("n1", "probemarker-system/pm-x", problem=problem)]
    assert len(render_text(nodes)) < 1000
    assert len(render_json(nodes)) < 1000
    stderr = NodeStatus("n1", "pm", problem="probemarker status --local: " + "\x1b" * 100_000)
    assert len(render_text([stderr])) < 1000
