"""engine/report.py: what a marker author controls reaches a log line or an event note
only cut (issue 40): a conflict's values, an invalid `{{.Result}}`, an invalid marker's
error (values as `kit.text.shown` shows them, tested in tests/unit/kit/test_text.py).
A hand-written sink; structlog's captured lines."""

from __future__ import annotations

from typing import Any

from structlog.testing import capture_logs

from probemarker.api.model import MarkerRef
from probemarker.engine.report import SHOWN_TEXT, Reporter
from probemarker.identity.probes import OwnerRef
from probemarker.kit.text import SHOWN_LIMIT as SHOWN_VALUE
from probemarker.kube.write.events import ObjectRef
from probemarker.watch.pods import pod_projection, pod_view
from probemarker.write.desired import Conflict, InvalidValue
from tests.unit.write.helpers import raw_pod

HUGE = "v" * 200_000  # an annotation value in a markerPolicy may be this long


class Sink:
    def __init__(self) -> None:
        self.notes: list[str] = []

    def record(
        self, *, regarding: ObjectRef, type: str, reason: str, note: str, action: str
    ) -> None:
        self.notes.append(note)


def lines(captured: list[dict[str, Any]]) -> int:
    """The longest captured line's length, as its values would be printed."""
    return max(len(repr(line)) for line in captured)


def test_a_conflict_over_huge_values_makes_a_bounded_line_and_note() -> None:
    sink = Sink()
    pod = pod_view(pod_projection(raw_pod()))
    conflict = Conflict(
        "annotation", "x.io/a", OwnerRef.parse("a#p"), OwnerRef.parse("b#p"), HUGE, HUGE + "w"
    )
    with capture_logs() as captured:
        Reporter(sink).conflict(pod, conflict)  # type: ignore[arg-type]
    assert lines(captured) < 2 * SHOWN_VALUE + 1024
    assert len(sink.notes[0]) < 2 * SHOWN_VALUE + 1024


def test_an_invalid_result_value_is_logged_cut() -> None:
    sink = Sink()
    pod = pod_view(pod_projection(raw_pod()))
    bad = InvalidValue(OwnerRef.parse("a#p"), "label", "x.io/a", HUGE, "too long")
    with capture_logs() as captured:
        Reporter(sink).invalid_value(pod, bad)  # type: ignore[arg-type]
    [line] = captured
    assert len(line["value"].encode()) == SHOWN_VALUE
    assert line["value_bytes"] == len(HUGE)
    assert len(sink.notes[0]) < SHOWN_VALUE + 1024


def test_an_invalid_markers_error_is_logged_cut() -> None:
    with capture_logs() as captured:
        Reporter(Sink()).invalid_marker(  # type: ignore[arg-type]
            MarkerRef("ns", "m"), "uid", "probemarker.io/v1alpha1", "bad: " + HUGE, kept=None
        )
    [line] = captured
    assert len(line["error"].encode()) == SHOWN_TEXT
