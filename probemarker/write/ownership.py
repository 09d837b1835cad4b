"""The ownership record: what each marker's probe wrote on a pod, in one annotation.

Stage: write (pure). Input: the text of the pod annotation `probemarker.io/owned`
(or None). Output: a mapping `OwnerRef -> Owned`, and back to text. The record lets
the daemon remove exactly what it wrote when a marker is deleted, a probe removed or
a pod relabelled out, also when that happened while it was down (SPEC §3), and seed
each probe's decided state after a restart (also for probes without a condition).

Format (compact JSON, keys sorted, no spaces, so the same record is always the same
text and an unchanged record never causes a write):

    {"web#idle":{"a":["example.com/cost"],"c":"example.com/Idle","l":["idle"],"s":"S"}}

- the member name is the owner, `marker#probe` (`OwnerRef`);
- `s`: the decided state, `S` (Succeeded) or `F` (Failed); required;
- `l`: label keys it holds, sorted; `a`: annotation keys it holds, sorted;
  `c`: the condition type it holds. Each is left out when empty.
  Unknown members of an entry are ignored (room for later additions).

Invariants: `parse_record` never raises. Input is untrusted (anyone who may edit the
pod may edit it): an entry is kept whole or not at all, and only if it names a valid
owner and valid keys the daemon could have written: no key with Kubernetes' reserved
prefixes, no reserved condition type (removing `Ready` would break the pod), not
the record annotation itself. Everything else is reported in one error text.
Size: `render_record` is only ever handed a record that fits `RECORD_LIMIT` (64 KiB,
a quarter of a pod's 256 KiB annotation budget): `fit_record` keeps the owners, in
OwnerRef order, that fit and names the rest, whose keys are then still written but
not recorded, so they are never removed (the safe side: never remove what we cannot
prove we wrote). A typical entry is under 150 bytes, so that is hundreds of owners.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from probemarker.api import rules
from probemarker.api.fields import matches
from probemarker.api.model import ProbeState
from probemarker.api.names import dns1123_subdomain_problems, qualified_name_problems
from probemarker.identity import OwnerRef

__all__ = [
    "OWNED_KEY",
    "RECORD_LIMIT",
    "Owned",
    "OwnershipRecord",
    "fit_record",
    "owners_text",
    "parse_record",
    "render_record",
]

OWNED_KEY: Final = f"{rules.GROUP}/owned"
RECORD_LIMIT: Final = 64 * 1024  # bytes of rendered record
# Nothing longer can be on a pod (all annotations together are capped at 256 KiB).
_PARSE_LIMIT: Final = rules.TOTAL_ANNOTATION_BYTES
_STATES: Final = {"S": ProbeState.SUCCEEDED, "F": ProbeState.FAILED}
_CODES: Final = {state: code for code, state in _STATES.items()}
_PROBLEMS_SHOWN: Final = 3


@dataclass(frozen=True, slots=True)
class Owned:
    """What one owner wrote on the pod, and the state it was decided in."""

    state: ProbeState
    labels: frozenset[str] = frozenset()
    annotations: frozenset[str] = frozenset()
    condition: str | None = None


OwnershipRecord = Mapping[OwnerRef, Owned]


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


def _keys(value: Any, field: str, *, annotation: bool) -> frozenset[str]:
    if value is None:
        return frozenset()
    if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
        raise ValueError(f"{field!r} is not a list of strings")
    for key in value:
        # Keys the daemon can never have written: removing them could only do harm.
        if (
            qualified_name_problems(key, any_case_prefix=annotation)
            or matches(rules.RESERVED_KEY_PREFIX_RE, key)
            or matches(rules.OWN_KEY_PREFIX_RE, key)  # the record and any key of ours
        ):
            raise ValueError(f"{field!r} holds a key probemarker cannot write: {_short(key)}")
    return frozenset(value)


def _condition(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or qualified_name_problems(value):
        raise ValueError("'c' is not a condition type")
    if value in rules.RESERVED_CONDITION_TYPES:
        raise ValueError(f"'c' is a reserved condition type: {value!r}")
    return value


def _entry(value: Any) -> Owned:
    if not isinstance(value, dict):
        raise ValueError("entry is not an object")
    state = value.get("s")
    if not isinstance(state, str) or state not in _STATES:
        raise ValueError('\'s\' is not "S" or "F"')
    for field in ("l", "a", "c"):
        if field in value and value[field] is None:
            raise ValueError(f"{field!r} is null")
    return Owned(
        state=_STATES[state],
        labels=_keys(value.get("l"), "l", annotation=False),
        annotations=_keys(value.get("a"), "a", annotation=True),
        condition=_condition(value.get("c")),
    )


def parse_record(text: str | None) -> tuple[dict[OwnerRef, Owned], str | None]:
    """The record in `text` and None, or the entries that could be kept and what is wrong.

    Never raises. The error text names the annotation, for one log line or event.
    """
    if text is None:
        return {}, None
    where = f"annotation {OWNED_KEY}"
    if len(text) > _PARSE_LIMIT:
        return {}, f"{where} ignored: {len(text)} characters, more than {_PARSE_LIMIT}"
    try:
        raw = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        return {}, f"{where} ignored: not JSON ({e})"
    if not isinstance(raw, dict):
        return {}, f"{where} ignored: not a JSON object"
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
    entry: dict[str, Any] = {"s": _CODES[owned.state]}
    if owned.labels:
        entry["l"] = sorted(owned.labels)
    if owned.annotations:
        entry["a"] = sorted(owned.annotations)
    if owned.condition is not None:
        entry["c"] = owned.condition
    return entry


def _dumps(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def render_record(record: OwnershipRecord) -> str | None:
    """The annotation's text, or None when the record is empty (remove the annotation)."""
    if not record:
        return None
    return _dumps({str(owner): _json_entry(owned) for owner, owned in record.items()}).decode()


def fit_record(
    record: OwnershipRecord, *, limit: int = RECORD_LIMIT
) -> tuple[dict[OwnerRef, Owned], tuple[OwnerRef, ...]]:
    """The owners, in OwnerRef order, whose entries fit in `limit` bytes; and the rest."""
    kept: dict[OwnerRef, Owned] = {}
    size = 2  # the braces
    dropped: list[OwnerRef] = []
    for owner in sorted(record):
        # `{"k":{...}}` minus the braces, plus a comma when not the first member.
        part = len(_dumps({str(owner): _json_entry(record[owner])})) - 2 + (1 if kept else 0)
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
