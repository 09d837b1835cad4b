"""`probemarker check` plans what the daemon would for record entries that hold a
command (issues 29 and 30, found in review)."""

from __future__ import annotations

from typing import Any

from probemarker.check import plan
from probemarker.identity.commands import HeldCommand
from probemarker.identity.probes import OwnerRef
from probemarker.probe.outcome import Outcome
from probemarker.watch.pods import PodView, pod_projection, pod_view
from probemarker.write.ownership import OWNED_KEY, Owned, render_record
from tests.unit.check.test_plan import ROLE, ROLE_KEY, UID, marker, pod

HELD = HeldCommand(command="A" * 16, container="0123456789ab", started=1_700_000_000)


def holding(probe: str) -> PodView:
    """Pod p whose record has an entry for `probe` of marker m holding only `h`."""
    record = {OwnerRef("m", probe): Owned(state=None, held=HELD)}
    meta: dict[str, Any] = {
        "labels": {"app": "game"},
        "annotations": {OWNED_KEY: render_record(record, pod_uid=UID)},
    }
    return pod_view(pod_projection(pod(**meta)))


def test_a_record_entry_holding_only_a_command_is_a_first_decision() -> None:
    """A probe whose first run timed out on the api backend has a record entry with
    only `h` (no state). The daemon's first decision of a run with no answer renders
    an empty Result (decide.step: nothing decided, so ""), and writes `role: ""`.
    check takes "the owner is in the record" for "there is something to keep", hands
    desired_state a None result, and shows the key untouched."""
    found = plan.plan_pod(
        holding("role"), marker("m", ROLE), {ROLE_KEY: Outcome.failed("timed out")}, now="t"
    )
    assert found.desired.labels.get("role", "(untouched)") == ""


def test_a_removed_probes_held_command_is_dropped_as_the_daemon_drops_it() -> None:
    """The daemon records a hold only for a probe it runs (`Engine._held_commands`
    iterates the pod's live probes): the `h` of a probe removed from the marker leaves
    the record at the next write. check hands desired_state every `h` of the record,
    and `with_held` gives an owner with a hold an entry of its own: check's patch
    keeps the removed probe's entry, which the daemon's removes."""
    found = plan.plan_pod(
        holding("gone"), marker("m", ROLE), {ROLE_KEY: Outcome.failed("timed out")}, now="t"
    )
    assert OwnerRef("m", "gone") not in found.desired.record
