"""desired_state with commands that may still run (issue 30): the record's member `h`
is written when a hold starts, removed when it ends, and nothing else changes."""

from __future__ import annotations

from typing import Any

from probemarker.identity.commands import HeldCommand, command_digest
from probemarker.watch.pods import pod_projection, pod_view
from probemarker.write.desired import desired_state
from probemarker.write.ownership import OWNED_KEY, Owned, parse_record
from probemarker.write.patch import build_patch
from tests.unit.write.helpers import NOW, UID, F, apply, decided, owner, raw_pod, spec

HELD = HeldCommand(
    command=command_digest(["sleep", "3600"]), container="abc", started=1_800_000_000
)
FLAG = spec(ok={"idle": "yes"}, bad={"idle": "no"})


def plan(pod: dict[str, Any], *, decided_state: bool, held: bool) -> list[dict[str, Any]]:
    view = pod_view(pod_projection(pod))
    desired = desired_state(
        pod=view,
        decided=[decided("w#p", F, FLAG)] if decided_state else [],
        live={owner("w#p"): FLAG},
        held_commands={owner("w#p"): HELD} if held else {},
    )
    return build_patch(pod=view, desired=desired, now=NOW)


def record_of(pod: dict[str, Any]) -> dict[Any, Owned]:
    text = pod["metadata"].get("annotations", {}).get(OWNED_KEY)
    record, problem = parse_record(text, pod_uid=UID)
    assert problem is None
    return record


def test_a_hold_is_written_once_when_it_starts_and_once_when_it_ends() -> None:
    pod = raw_pod()
    pod = apply(pod, plan(pod, decided_state=True, held=True))  # the run timed out
    assert record_of(pod) == {owner("w#p"): Owned(F, labels={"idle": "no"}, held=HELD)}
    assert plan(pod, decided_state=True, held=True) == []  # held: nothing more
    pod = apply(pod, plan(pod, decided_state=True, held=False))  # the command ended
    assert record_of(pod) == {owner("w#p"): Owned(F, labels={"idle": "no"})}
    assert pod["metadata"]["labels"] == {"idle": "no"}
    assert plan(pod, decided_state=True, held=False) == []


def test_a_probe_not_decided_yet_gets_an_entry_of_its_hold_alone() -> None:
    # failureThreshold 3: the first run timed out, the next periods are skipped
    pod = raw_pod()
    pod = apply(pod, plan(pod, decided_state=False, held=True))
    assert record_of(pod) == {owner("w#p"): Owned(None, held=HELD)}
    assert "labels" not in pod["metadata"]
    pod = apply(pod, plan(pod, decided_state=False, held=False))
    assert OWNED_KEY not in pod["metadata"].get("annotations", {})  # nothing left to record


def test_a_restarted_daemon_seeded_with_the_hold_writes_nothing() -> None:
    pod = raw_pod(labels={"idle": "no"}, record={"w#p": Owned(F, labels={"idle": "no"}, held=HELD)})
    # not decided yet in the new daemon (seeded: a holding owner), the hold seeded
    assert plan(pod, decided_state=False, held=True) == []


def test_a_departed_probes_hold_goes_with_its_entry() -> None:
    pod = raw_pod(record={"w#p": Owned(None, held=HELD)})
    view = pod_view(pod_projection(pod))
    desired = desired_state(pod=view, decided=[], live={}, held_commands={})
    assert desired.annotations == {OWNED_KEY: None}
