"""`probemarker check` plans what the daemon would, for record entries that hold a command (issues 29/30, found in review)."""

from __future__ import annotations

from typing import Any

from probemarker.api.model import MarkerPolicy, MarkerRef, ProbeState
from probemarker.check import plan
from probemarker.identity import HeldCommand, OwnerRef, ProbeKey
from probemarker.pods import pod_view
from probemarker.probe.outcome import Outcome
from probemarker.write.ownership import OWNED_KEY, Owned, render_record
from tests.unit.check.test_plan import UID, marker, pod, spec

ROLE = spec(
    "role",
    policies=(
        MarkerPolicy(ProbeState.SUCCEEDED, labels={"role": "{{.Result}}"}),
        MarkerPolicy(ProbeState.FAILED, labels={"role": "{{.Result}}"}),
    ),
)
ROLE_KEY = ProbeKey(UID, "app", MarkerRef("default", "m"), "role")


def test_a_record_entry_holding_only_a_command_is_a_first_decision() -> None:
    """A probe whose first run timed out on the api backend has a record entry with
    only `h` (no state). The daemon's first decision of a run with no answer renders
    an empty Result (decide.step: nothing decided, so ""), and writes `role: ""`.
    check takes "the owner is in the record" for "there is something to keep", hands
    desired_state a None result, and shows the key untouched."""
    held = HeldCommand(command="A" * 16, container="0123456789ab", started=1_700_000_000)
    record = {OwnerRef("m", "role"): Owned(state=None, held=held)}
    meta: dict[str, Any] = {
        "labels": {"app": "game"},
        "annotations": {OWNED_KEY: render_record(record, pod_uid=UID)},
    }
    view = pod_view(pod(**meta))
    found = plan.plan_pod(view, marker("m", ROLE), {ROLE_KEY: Outcome.failed("timed out")}, now="t")
    assert found.desired.labels.get("role", "(untouched)") == ""


def test_a_removed_probes_held_command_is_dropped_as_the_daemon_drops_it() -> None:
    """The daemon records a hold only for a probe it runs (`Engine._held_commands`
    iterates the pod's live probes): the `h` of a probe removed from the marker leaves
    the record at the next write. check hands desired_state every `h` of the record,
    and `with_held` gives an owner with a hold an entry of its own: check's patch
    keeps the removed probe's entry, which the daemon's removes."""
    held = HeldCommand(command="A" * 16, container="0123456789ab", started=1_700_000_000)
    record = {OwnerRef("m", "gone"): Owned(state=None, held=held)}
    meta: dict[str, Any] = {
        "labels": {"app": "game"},
        "annotations": {OWNED_KEY: render_record(record, pod_uid=UID)},
    }
    view = pod_view(pod(**meta))
    found = plan.plan_pod(view, marker("m", ROLE), {ROLE_KEY: Outcome.failed("timed out")}, now="t")
    assert OwnerRef("m", "gone") not in found.desired.record
