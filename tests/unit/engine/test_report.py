"""The engine's log lines and notes carry what a template renders cut (issue 40): a
4 KiB annotation value that repeats `{{.Result}}` 372 times renders 380 KB, which
neither `write.invalid_result_value` nor `write.conflict` nor their notes repeat."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from structlog.testing import capture_logs

from probemarker.engine.report import Reporter
from probemarker.identity.probes import OwnerRef
from probemarker.kit.text import SHOWN_LIMIT
from probemarker.watch.pods import pod_projection, pod_view
from probemarker.write.desired import Conflict, InvalidValue
from tests.unit.engine.test_engine import Sink, pod_raw

HUGE = "r" * 1024 * 372  # "{{.Result}}" * 372 with a 1 KiB answer
OWNER, OTHER = OwnerRef("ns/m", "p"), OwnerRef("ns/n", "p")
LINE = 2048  # bytes of a whole log line as JSON, its fields' names included


def invalid(reporter: Reporter, view: Any) -> None:
    problem = "the pod's annotations would take 381000 bytes with it, over the API server's limit"
    reporter.invalid_value(view, InvalidValue(OWNER, "annotation", "a.io/k", HUGE, problem))


def conflict(reporter: Reporter, view: Any) -> None:
    reporter.conflict(view, Conflict("annotation", "a.io/k", OWNER, OTHER, HUGE, HUGE + "x"))


@pytest.mark.parametrize(
    ("report", "event", "reason", "ending"),
    [
        pytest.param(
            invalid,
            "write.invalid_result_value",
            "InvalidResultValue",
            "Make the probe answer a valid value, or change the markerPolicy value.",
            id="invalid",
        ),
        pytest.param(
            conflict,
            "write.conflict",
            "ConflictingMarkers",
            "Make the markers agree.",
            id="conflict",
        ),
    ],
)
def test_a_value_a_template_renders_reaches_a_log_line_and_a_note_cut(
    report: Any, event: str, reason: str, ending: str
) -> None:
    sink = Sink()
    view = pod_view(pod_projection(pod_raw()))
    with capture_logs() as logs:
        report(Reporter(sink), view)
    (line,) = [entry for entry in logs if entry["event"] == event]
    assert len(orjson.dumps(line)) <= LINE
    ((_, why, note),) = sink.events
    assert why == reason
    # What the value is, told apart: its size and digest (`kit.text.Shown`).
    assert f"({len(HUGE)} bytes, sha256 " in note
    # The note keeps what follows the value (the problem, the fix) within an event's 1 KiB.
    assert len(note.encode()) <= 1024
    assert note.endswith(ending)
    assert "r" * (SHOWN_LIMIT + 1) not in note
