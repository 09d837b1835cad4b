"""The report of `probemarker check`: exit codes, the JSON shape, the text."""

from __future__ import annotations

import json
import unicodedata

import pytest

from probemarker.check.report import (
    API_VERSION,
    CheckReport,
    PodCheck,
    ProbeCheck,
    Status,
    exit_code,
    render_json,
    render_text,
    to_json,
)


def probe(status: Status, **over: object) -> ProbeCheck:
    fields: dict[str, object] = {
        "probe": "idle",
        "container": "app",
        "kind": "exec",
        "via": "pods/exec",
        "status": status,
        "message": "ok",
        "threshold": 3,
        **over,
    }
    return ProbeCheck(**fields)  # type: ignore[arg-type]


def report(*statuses: Status, skipped: int = 0) -> CheckReport:
    pods = [PodCheck(pod="default/p", probes=tuple(probe(s) for s in statuses))]
    pods += [PodCheck(pod=f"default/s{i}", skipped="gone") for i in range(skipped)]
    return CheckReport(marker="default/m", source="from m.yaml", pods=tuple(pods))


@pytest.mark.parametrize(
    ("statuses", "skipped", "code"),
    [
        pytest.param((Status.SUCCEEDED, Status.SUCCEEDED), 0, 0, id="all-succeeded"),
        pytest.param((Status.SUCCEEDED,), 2, 0, id="skipped-pods-do-not-count"),
        pytest.param((Status.SUCCEEDED, Status.FAILED), 0, 1, id="one-failed"),
        pytest.param((Status.UNKNOWN,), 0, 1, id="unknown"),
        pytest.param((Status.NOT_REACHABLE,), 0, 1, id="not-reachable"),
        pytest.param((), 1, 1, id="nothing-ran"),
    ],
)
def test_exit_code(statuses: tuple[Status, ...], skipped: int, code: int) -> None:
    assert exit_code(report(*statuses, skipped=skipped)) == code


def test_json_shape() -> None:
    found = to_json(report(Status.SUCCEEDED, Status.NOT_REACHABLE, skipped=1))
    assert set(found) == {
        "apiVersion",
        "kind",
        "marker",
        "source",
        "namespace",
        "namespaceFrom",
        "wrote",
        "asIfDecided",
        "viaApiProxy",
        "direct",
        "pods",
        "summary",
        "exitCode",
    }
    assert (found["apiVersion"], found["kind"], found["wrote"]) == (
        API_VERSION,
        "CheckReport",
        False,
    )
    pod = found["pods"][0]
    assert set(pod) == {
        "pod",
        "uid",
        "skipped",
        "probes",
        "patch",
        "conflicts",
        "recordProblem",
        "heldMarkers",
    }
    assert set(pod["probes"][0]) == {
        "probe",
        "container",
        "kind",
        "via",
        "status",
        "message",
        "decided",
        "threshold",
        "values",
        "condition",
        "result",
        "invalid",
        "readinessGate",
    }
    assert [p["decided"] for p in pod["probes"]] == [True, False]
    assert found["summary"] == {
        "pods": 2,
        "skipped": 1,
        "probes": 2,
        "Succeeded": 1,
        "Failed": 0,
        "Unknown": 0,
        "NotReachable": 1,
    }
    assert found["exitCode"] == 1


def test_text_says_nothing_is_written_and_what_a_patch_means() -> None:
    text = render_text(
        CheckReport(
            marker="default/m",
            source="from m.yaml",
            pods=(
                PodCheck(
                    pod="default/p",
                    probes=(
                        probe(Status.FAILED, message="busy", values={"labels": {"idle": "false"}}),
                        probe(Status.NOT_REACHABLE, probe="web", kind="httpGet", via=None),
                    ),
                    patch=({"op": "add", "path": "/metadata/labels/idle", "value": "false"},),
                ),
            ),
        )
    )
    assert "Nothing is written to the cluster: no patch, no event." in text
    assert "as if decided" in text
    assert "probe idle (container app, exec, via pods/exec): Failed" in text
    assert "    would set label idle=false" in text
    assert "the daemon waits for 3 consecutive Failed results" in text
    assert "probe web (container app, httpGet): Unknown (not reachable from here)" in text
    assert "not decided: changes nothing on the pod" in text
    assert '{"op": "add", "path": "/metadata/labels/idle", "value": "false"}' in text
    assert text.endswith("1 Failed, 0 Unknown, 1 not reachable from here; wrote nothing; exit 1\n")


def test_a_pod_that_already_shows_it_has_no_patch() -> None:
    text = render_text(report(Status.SUCCEEDED))
    assert "patch: none (the pod already shows this)" in text


def test_a_refused_rendered_value_is_shown_with_its_problem() -> None:
    refused = {"kind": "label", "key": "map", "value": "de dust", "problem": "not a label value"}
    text = render_text(
        CheckReport(
            marker="default/m",
            source="from m.yaml",
            pods=(
                PodCheck(
                    pod="default/p",
                    probes=(
                        probe(
                            Status.SUCCEEDED,
                            result="de dust",
                            values={"labels": {"map": "de dust", "up": "yes"}},
                            invalid=(refused,),
                        ),
                    ),
                ),
            ),
        )
    )
    assert "    {{.Result}}: 'de dust'" in text
    assert "    would set label up=yes" in text
    assert (
        "    would NOT set label map='de dust': not a label value (within the pod's state" in text
    )


# What a marker author or a pod controls, with what a terminal must not get raw: ESC
# (a colour, a screen clear), OSC 52 (writes the clipboard), the one-byte C1 CSI, a raw
# newline (a forged line of the report), and bidi marks, overrides and isolates.
HOSTILE = (
    "x\x1b[2J\x1b]52;c;cm0gLXJmIC8=\x07\x9b31m\n  probe forged: Succeeded\t"
    "\u202e\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069\u2028\x7f"
)


def hidden(text: str) -> list[str]:
    """The characters of `text` a terminal must not get from a value: every control
    and format character but the report's own newlines, and the line separators."""
    return sorted(
        {
            c
            for c in text
            if c != "\n" and (unicodedata.category(c)[0] == "C" or c in "\u2028\u2029")
        }
    )


def hostile_report() -> CheckReport:
    h = HOSTILE
    invalid = {"kind": "annotation", "key": "a" + h, "value": "v" + h, "problem": "p" + h}
    return CheckReport(
        marker="default/m" + h,
        source="from m.yaml" + h,
        notes=("note" + h,),
        pods=(
            PodCheck(pod="default/gone" + h, skipped="gone" + h),
            PodCheck(
                pod="default/p" + h,
                probes=(
                    probe(
                        Status.SUCCEEDED,
                        probe="idle" + h,
                        container="app" + h,
                        message="ok" + h,
                        result="r" + h,
                        values={
                            "labels": {"l" + h: "lv" + h},
                            "annotations": {"a" + h: "v" + h, "b" + h: "bv" + h},
                        },
                        condition={
                            "type": "t" + h,
                            "status": "True",
                            "reason": "ProbeSucceeded",
                            "message": "m" + h,
                        },
                        invalid=(invalid,),
                    ),
                ),
                patch=({"op": "add", "path": "/metadata/annotations/b", "value": "bv" + h},),
                conflicts=("conflict" + h,),
                record_problem="record" + h,
                frozen_markers=("default/other" + h,),
            ),
        ),
    )


def test_the_text_shows_hostile_values_escaped_and_nothing_raw() -> None:
    text = render_text(hostile_report())
    assert hidden(text) == []
    # A value's newline cannot start a line of the report: every line is the report's.
    assert not [line for line in text.splitlines() if line.startswith("  probe forged")]
    shown = "x\\x1b[2J\\x1b]52;c;cm0gLXJmIC8=\\x07\\x9b31m\\n  probe forged: Succeeded\\t\\u202e"
    for expected in (
        f"PodProbeMarker default/m{shown}",
        f"pod default/gone{shown}",
        f": skipped: gone{shown}",
        f"note{shown}",
        f"  probe idle{shown}",
        f"(container app{shown}",
        f"    message: ok{shown}",
        f"    {{{{.Result}}}}: 'r{shown}",
        f"    would set label l{shown}",
        f"=lv{shown}",
        f"    would NOT set annotation a{shown}",
        f"='v{shown}",
        f": p{shown}",
        f"    would set annotation b{shown}",
        f"    would set condition t{shown}",
        f": m{shown}",
        f"  conflict: conflict{shown}",
        f"  ownership record: record{shown}",
        f"default/other{shown}",
    ):
        assert expected in text, expected
    (patch_line,) = [line for line in text.splitlines() if '"op": "add"' in line]
    assert json.loads(patch_line)["value"] == "bv" + HOSTILE  # the same op, escaped as JSON


def test_the_json_text_is_the_same_document_with_nothing_raw() -> None:
    document = render_json(hostile_report())
    assert hidden(document) == []
    assert json.loads(document) == to_json(hostile_report())
    assert "\\u009b31m" in document
    assert "\\u202e" in document


def test_printable_unicode_is_shown_as_it_is() -> None:
    pod = PodCheck(pod="default/p", probes=(probe(Status.SUCCEEDED, message="café 東京 ✓"),))
    text = render_text(CheckReport(marker="default/m", source="from m.yaml", pods=(pod,)))
    assert "    message: café 東京 ✓" in text


def test_the_text_and_the_json_say_which_namespace_and_why() -> None:
    found = CheckReport(
        marker="game/m",
        source="from m.yaml",
        namespace="game",
        namespace_from="the namespace of kubeconfig context dev",
    )
    assert "Namespace game: the namespace of kubeconfig context dev.\n" in render_text(found)
    document = to_json(found)
    assert (document["namespace"], document["namespaceFrom"]) == (
        "game",
        "the namespace of kubeconfig context dev",
    )


def test_a_probe_condition_says_whether_the_pod_gates_on_it() -> None:
    gated = probe(Status.SUCCEEDED, gate=("example.com/ready", True))
    open_ = probe(Status.SUCCEEDED, probe="other", gate=("example.com/other", False))
    plain = probe(Status.SUCCEEDED, probe="label-only")
    checked = CheckReport(
        marker="default/m",
        source="cluster",
        pods=(PodCheck(pod="default/p", probes=(gated, open_, plain)),),
    )
    text = render_text(checked)
    assert (
        "    readiness gate: the pod's spec.readinessGates lists example.com/ready: the kubelet "
        "counts this condition towards the pod's Ready\n"
    ) in text
    assert (
        "    no readiness gate: the pod's spec.readinessGates does not list example.com/other, so "
        "this condition does not affect the pod's Ready;"
    ) in text
    assert "probemarker.io/inject-readiness-gates" in text
    assert text.count("readiness gate") == 2  # nothing for the probe without a condition
    probes = to_json(checked)["pods"][0]["probes"]
    assert [p["readinessGate"] for p in probes] == [
        {"conditionType": "example.com/ready", "gated": True},
        {"conditionType": "example.com/other", "gated": False},
        None,
    ]


def test_a_hostile_condition_type_reaches_the_terminal_escaped() -> None:
    checked = CheckReport(
        marker="default/m",
        source="cluster",
        pods=(PodCheck(pod="default/p", probes=(probe(Status.FAILED, gate=("a\x1b[2J", False)),)),),
    )
    assert "\x1b" not in render_text(checked)
