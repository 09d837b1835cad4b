"""The ownership record: what each marker's probe wrote on a pod, in one annotation.

Stage: write (pure). Input: the text of the pod annotation `probemarker.io/owned`
(or None). Output: a mapping `OwnerRef -> Owned`, and back to text. The record lets
the daemon remove exactly what it wrote when a marker is deleted, a probe removed or
a pod relabelled out, also when that happened while it was down (docs/engine.md), and seed
each probe's decided state after a restart (also for probes without a condition).

Format (compact JSON, keys sorted, no spaces, so the same record is always the same
text and an unchanged record never causes a write):

    {"#uid":"5f0c...","web#idle":{"a":{"example.com/cost":"-100"},"c":"example.com/Idle","l":{"idle":"true"},"s":"S"}}

- `#uid`: the UID of the pod the record was written for. A record whose `#uid` is
  not the pod's own (copied with a manifest, `kubectl get -o yaml | kubectl apply`,
  or from a pod template), or that has none, is not trusted at all: nothing is
  removed or seeded from it, and the daemon's next write replaces it;
- every other member name is an owner, `marker#probe` (`OwnerRef`);
- `s`: the decided state, `S` (Succeeded) or `F` (Failed); required, but in an entry
  that holds nothing but `h` (a probe not decided yet whose command may still run);
- `l`: the label keys it holds, each with the value it wrote; `a`: the annotation keys
  it holds, each with a *token* of the value it wrote (write/tokens.py: the value itself
  when it is at most 64 bytes and does not start with `#`, else `#` and 22 characters
  of its SHA-256, so a 4 KiB annotation costs 23 bytes here); `c`: the condition type
  it holds; `w`: the Warnings it stands under (`warned_slot`): a label whose value
  rendered from `{{.Result}}` is invalid (`l:KEY`, with the token of the first such
  value; `a:KEY` is read too, for room to grow) and a key it lost to another owner
  (`xl:KEY`, `xa:KEY`, `xc:TYPE`, with the token of the winner's name), so a restarted
  daemon raises no Warning again for a situation that has not changed. Each is left
  out when empty. Unknown members of an entry are ignored (room for later additions),
  and so is a malformed `w` (it only spares a repeated event; the entry's keys stand
  without it);
- `h`: the probe's command that may still run in the container (api exec backend,
  probe/holds.py, issues 30 and 40): `d` its `command_digest`, `c` the `container_mark`
  of the container instance it runs in, `t` when it was held (whole seconds since the
  epoch). The hold is the command's, whatever probe ran it: every entry of a probe
  that runs it says so. Written when a run of the command comes due while it still
  runs (that run is skipped; a command that ends before then is never written, issue
  43) and removed when the hold ends, so a daemon started meanwhile does not run the
  command again beside it, by any probe (the engine seeds a probe from any entry's
  `h` that names its command in its container). Left out when nothing is held.

Why values and the UID: a key is removed only while it still holds the value the
daemon wrote, on the pod it wrote it to (the ownership rule, write/ours.py). A record
copied onto another pod or edited by hand can then never make the daemon remove a key
it did not write (`app`, `tier`: the pod's ReplicaSet and Services).

Invariants: `parse_record` never raises. Input is untrusted (anyone who may edit the
pod may edit it): an entry is kept whole or not at all, and only if it names a valid
owner and valid keys the daemon could have written: no key with Kubernetes' reserved
prefixes, no reserved condition type (removing `Ready` would break the pod), not
the record annotation itself; an `h` of the right shape only (its time is bounded
by the reader: probe/holds.py). Everything else is reported in one error text.
Size: `render_record` is only ever handed a record that fits `RECORD_LIMIT` (64 KiB,
a quarter of a pod's 256 KiB annotation budget): `fit_record` keeps the owners, in
OwnerRef order, that fit and names the rest, whose keys are then still written but
not recorded, so they are never removed (the safe side: never remove what we cannot
prove we wrote). A typical entry is under 200 bytes, so that is hundreds of owners.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Final

import orjson

from probemarker.api import rules
from probemarker.api.fields import matches
from probemarker.api.model import ProbeState
from probemarker.api.names import (
    dns1123_subdomain_problems,
    label_value_problems,
    qualified_name_problems,
)
from probemarker.identity.commands import DIGEST_CHARS, HeldCommand
from probemarker.identity.probes import OwnerRef
from probemarker.watch.pods import OWNED_KEY, RECORD_PARSE_LIMIT, UID_MEMBER
from probemarker.write.tokens import is_token

__all__ = [
    "OWNED_KEY",
    "RECORD_LIMIT",
    "UID_MEMBER",
    "Owned",
    "OwnershipRecord",
    "fit_record",
    "owners_text",
    "parse_record",
    "render_record",
    "warned_slot",
    "with_held",
]

RECORD_LIMIT: Final = 64 * 1024  # bytes of rendered record
# The reasons of the conditions the daemon writes (desired.py); a condition with
# another reason is not ours, whatever a record says.
OUR_REASONS: Final = frozenset({"ProbeSucceeded", "ProbeFailed"})
# Nothing longer can be on a pod (all annotations together are capped at 256 KiB).
_STATES: Final = {"S": ProbeState.SUCCEEDED, "F": ProbeState.FAILED}
_CODES: Final = {state: code for code, state in _STATES.items()}
_PROBLEMS_SHOWN: Final = 3
_EMPTY: Final[Mapping[str, str]] = MappingProxyType({})
# Slots of one entry's `w`: one owner has at most 32 keys a kind in each of two
# policies and one condition (the CRD's bounds), so more is not ours.
_WARNED_LIMIT: Final = 256
_COMMAND_RE: Final = f"^[-_A-Za-z0-9]{{{DIGEST_CHARS}}}$"
_CONTAINER_RE: Final = "^[-_A-Za-z0-9]{1,16}$"
_LATEST: Final = 10**11  # seconds since the epoch: year 5138, past any real clock


@dataclass(frozen=True, slots=True)
class Owned:
    """What one owner wrote on the pod, and the state it was decided in (None: not
    decided yet; then the entry holds only `held`)."""

    state: ProbeState | None
    # key -> the value written (labels), or its token (annotations: `value_token`)
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    condition: str | None = None
    # `warned_slot` -> a token (see the module docstring): the Warnings raised for it
    warned: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    held: HeldCommand | None = None  # a command of the probe that may still run

    @property
    def empty(self) -> bool:
        """Nothing to record: no state, no key, no held command."""
        return (
            self.state is None
            and not self.labels
            and not self.annotations
            and self.condition is None
            and self.held is None
        )


OwnershipRecord = Mapping[OwnerRef, Owned]

# The first letter of a key's kind in a `warned` slot: "label" -> "l", ...
_SLOT_KINDS: Final = frozenset({"l", "a", "c"})


def warned_slot(kind: str, key: str, *, lost: bool = False) -> str:
    """The `warned` slot of an invalid value of `kind` ("label", "annotation") at `key`,
    or (`lost`) of a key of `kind` ("condition" too) lost to another owner."""
    return f"{'x' if lost else ''}{kind[0]}:{key}"


def _warned(value: Any) -> Mapping[str, str]:
    """A `w` member, or nothing when it is not one (it is advisory: never an error)."""
    if not isinstance(value, dict) or len(value) > _WARNED_LIMIT:
        return _EMPTY
    for slot, token in value.items():
        if not isinstance(slot, str) or not isinstance(token, str):
            return _EMPTY
        kind, colon, key = slot.removeprefix("x").partition(":")
        if (
            kind not in _SLOT_KINDS
            or not colon
            or qualified_name_problems(key, any_case_prefix=True)
        ):
            return _EMPTY
        if _token_problem(token, annotation=True):
            return _EMPTY
    return MappingProxyType(dict(value))


def _short(text: str) -> str:
    return repr(text if len(text) <= 64 else text[:61] + "...")


def _owner(text: str) -> OwnerRef:
    owner = OwnerRef.parse(text)  # ValueError names the text
    valid_probe = len(owner.probe) <= rules.MAX_PROBE_NAME_LENGTH and matches(
        rules.PROBE_NAME_RE, owner.probe
    )
    if dns1123_subdomain_problems(owner.marker) or not valid_probe:
        raise ValueError("not a marker name and probe name")
    return owner


def _key_problem(key: str, *, annotation: bool) -> bool:
    """A key the daemon can never have written: removing it could only do harm."""
    return bool(
        qualified_name_problems(key, any_case_prefix=annotation)
        or matches(rules.RESERVED_KEY_PREFIX_RE, key)
        # probemarker.io/ is the daemon's own prefix (the record lives there):
        # never a policy's key.
        or matches(rules.OWN_KEY_PREFIX_RE, key)
    )


def _token_problem(token: str, *, annotation: bool) -> bool:
    if not annotation:
        return bool(label_value_problems(token))
    return not is_token(token)


def _keys(value: Any, field: str, *, annotation: bool) -> Mapping[str, str]:
    if value is None:
        return _EMPTY
    if isinstance(value, list):
        raise ValueError(f"{field!r} lists keys without their values (an older format)")
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError(f"{field!r} is not an object of strings")
    for key, token in value.items():
        if _key_problem(key, annotation=annotation):
            raise ValueError(f"{field!r} holds a key probemarker cannot write: {_short(key)}")
        if _token_problem(token, annotation=annotation):
            raise ValueError(f"{field!r} holds a value probemarker cannot write: {_short(key)}")
    return MappingProxyType(dict(value))


def _condition(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or qualified_name_problems(value):
        raise ValueError("'c' is not a condition type")
    if value in rules.RESERVED_CONDITION_TYPES or matches(rules.RESERVED_KEY_PREFIX_RE, value):
        raise ValueError(f"'c' is a reserved condition type: {value!r}")
    return value


def _held(value: Any) -> HeldCommand | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("'h' is not an object")
    command, container, started = value.get("d"), value.get("c"), value.get("t")
    if not isinstance(command, str) or not matches(_COMMAND_RE, command):
        raise ValueError("'h' has no command digest 'd'")
    if not isinstance(container, str) or not matches(_CONTAINER_RE, container):
        raise ValueError("'h' has no container 'c'")
    if type(started) is not int or not 0 < started < _LATEST:
        raise ValueError("'h' has no time 't' (whole seconds since the epoch)")
    return HeldCommand(command=command, container=container, started=started)


def _entry(value: Any) -> Owned:
    if not isinstance(value, dict):
        raise ValueError("entry is not an object")
    for field_name in ("l", "a", "c", "h"):
        if field_name in value and value[field_name] is None:
            raise ValueError(f"{field_name!r} is null")
    held = _held(value.get("h"))
    state = value.get("s")
    only_held = held is not None and not {"l", "a", "c"} & value.keys()
    if state is None and only_held:
        return Owned(state=None, held=held)
    if not isinstance(state, str) or state not in _STATES:
        raise ValueError('\'s\' is not "S" or "F"')
    return Owned(
        state=_STATES[state],
        labels=_keys(value.get("l"), "l", annotation=False),
        annotations=_keys(value.get("a"), "a", annotation=True),
        condition=_condition(value.get("c")),
        warned=_warned(value.get("w")),
        held=held,
    )


def parse_record(text: str | None, *, pod_uid: str) -> tuple[dict[OwnerRef, Owned], str | None]:
    """The record in `text`, written for the pod `pod_uid`, and None; or the entries
    that could be kept and what is wrong.

    Never raises. The error text names the annotation, for one log line or event.
    """
    if text is None:
        return {}, None
    where = f"annotation {OWNED_KEY}"
    if len(text) > RECORD_PARSE_LIMIT:
        return {}, f"{where} ignored: {len(text)} characters, more than {RECORD_PARSE_LIMIT}"
    try:
        raw = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        return {}, f"{where} ignored: not JSON ({e})"
    if not isinstance(raw, dict):
        return {}, f"{where} ignored: not a JSON object"
    written_for = raw.pop(UID_MEMBER, None)
    if written_for != pod_uid:
        whose = (
            "names no pod" if written_for is None else f"is for pod UID {_short(str(written_for))}"
        )
        return {}, (
            f"{where} ignored: it {whose}, not this pod ({pod_uid}); copied from another "
            "pod? Nothing is removed on its account, and it is replaced at the next write"
        )
    record: dict[OwnerRef, Owned] = {}
    problems: list[str] = []
    for name, value in raw.items():
        try:
            record[_owner(name)] = _entry(value)
        except ValueError as e:
            problems.append(f"{_short(name)}: {e}")
    if not problems:
        return record, None
    shown = "; ".join(problems[:_PROBLEMS_SHOWN])
    more = (
        f" (and {len(problems) - _PROBLEMS_SHOWN} more)" if len(problems) > _PROBLEMS_SHOWN else ""
    )
    return record, f"{where}: dropped {len(problems)} malformed entries: {shown}{more}"


def _json_entry(owned: Owned) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if owned.state is not None:
        entry["s"] = _CODES[owned.state]
    if owned.held is not None:
        held = owned.held
        entry["h"] = {"c": held.container, "d": held.command, "t": held.started}
    if owned.labels:
        entry["l"] = dict(owned.labels)
    if owned.annotations:
        entry["a"] = dict(owned.annotations)
    if owned.condition is not None:
        entry["c"] = owned.condition
    if owned.warned:
        entry["w"] = dict(owned.warned)
    return entry


def _dumps(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def with_held(
    entries: Mapping[OwnerRef, Owned | None], held: Mapping[OwnerRef, HeldCommand]
) -> dict[OwnerRef, Owned]:
    """The record of `entries` (None: no entry) with each owner's held command as
    `held` says, and only as it says (a hold that has ended is left out); an owner with
    a held command and no entry gets one of its own. Empty entries are left out."""
    record: dict[OwnerRef, Owned] = {}
    for owner in sorted(entries.keys() | held.keys()):
        entry = entries.get(owner) or Owned(state=None)
        entry = replace(entry, held=held.get(owner))
        if not entry.empty:
            record[owner] = entry
    return record


def render_record(record: OwnershipRecord, *, pod_uid: str) -> str | None:
    """The annotation's text for the pod `pod_uid`, or None when the record is empty
    (remove the annotation)."""
    if not record:
        return None
    members: dict[str, Any] = {str(owner): _json_entry(owned) for owner, owned in record.items()}
    members[UID_MEMBER] = pod_uid
    return _dumps(members).decode()


def fit_record(
    record: OwnershipRecord, *, pod_uid: str, limit: int = RECORD_LIMIT
) -> tuple[dict[OwnerRef, Owned], tuple[OwnerRef, ...]]:
    """The owners, in OwnerRef order, whose entries fit in `limit` bytes (rendered for
    `pod_uid`); and the rest."""
    kept: dict[OwnerRef, Owned] = {}
    size = len(_dumps({UID_MEMBER: pod_uid}))  # the braces and the pod's UID
    dropped: list[OwnerRef] = []
    for owner in sorted(record):
        # `{"k":{...}}` minus the braces, plus the comma after the member before.
        part = len(_dumps({str(owner): _json_entry(record[owner])})) - 2 + 1
        if dropped or size + part > limit:
            dropped.append(owner)
        else:
            kept[owner] = record[owner]
            size += part
    return kept, tuple(dropped)


def owners_text(owners: Iterable[OwnerRef], *, shown: int = _PROBLEMS_SHOWN) -> str:
    """`a#x, b#y (and 3 more)`, for messages about many owners."""
    names = [str(o) for o in owners]
    more = f" (and {len(names) - shown} more)" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more
