"""The probe table: what the engine keeps of each pod it watches and each probe it runs.

Stage: engine (the hub's own values; no I/O). Input: what the engine learns (a pod's
view as its informer stores it, a probe's spec and thresholds, its last run) and what it
says of a pod (engine/report.py). Output: a row per pod (`PodEntry`) and per probe
(`ProbeEntry`), which the hub (engine/engine.py) updates and the inspection
(engine/inspection.py) reads; a new probe's state, seeded from the pod's ownership
record and condition (`ProbeEntry.seeded`), and carried across an edit of its spec
(`ProbeEntry.respec`); and which of a plan's invalid values are Warnings to raise
(`PodEntry.invalid_to_report`).

Invariants:
- a pod's row remembers what was said of it, so that each thing is said once: the
  conflicts standing on it, its record's problem as last logged, and the invalid values
  reported per key (the newest `_TOKENS_KEPT`), kept while a probe of the pod renders
  the key, so bounded by the markers' keys;
- a key's first invalid value is always reported (a situation of its own); a new value
  of a key reported already waits for the pod's `warning_refresh`: one such Warning per
  pod per interval, however many keys change every run. A key that the pod's record
  notes as warned of (`InvalidValue.recorded`, a predecessor warned) takes the value it
  finds as reported: a restart warns of nothing anew.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from probemarker.api.model import ProbeSpec
from probemarker.decide.decide import Decision, ThresholdState, observe, seed
from probemarker.engine.seen import LastRun
from probemarker.identity.probes import OwnerRef, ProbeKey
from probemarker.kube.watch.cache import ObjectKey
from probemarker.watch.pods import ContainerFacts, PodView
from probemarker.write.desired import InvalidValue
from probemarker.write.ownership import Owned

__all__ = ["PodEntry", "ProbeEntry"]

# Invalid values remembered per key: an answer that cycles through more is reported
# again, at most once per pod per `warning_refresh`.
_TOKENS_KEPT = 16


@dataclass(slots=True)
class ProbeEntry:
    """One probe the engine runs on one container of one pod."""

    spec: ProbeSpec
    thresholds: ThresholdState
    unknown_streak: int = 0
    blocked: str | None = None  # why it cannot run, as last reported on the pod
    last: LastRun | None = None  # read by `probemarker status` only (Engine.inspect)

    @classmethod
    def seeded(
        cls, spec: ProbeSpec, owned: Owned | None, view: PodView, facts: ContainerFacts | None
    ) -> ProbeEntry:
        """A probe started on `view`'s pod, seeded from its owner's entry in the pod's
        record (`owned`) and its condition, and from its container (`facts`)."""
        thresholds = ThresholdState()
        if owned is not None and owned.state is not None:
            message = _condition_message(view, owned.condition)
            # A result is not known until a run: the pod's values stand till then.
            result = None if spec.uses_result else ""
            thresholds = seed(Decision(owned.state, message, result))
        if facts is not None:
            thresholds = observe(thresholds, facts)
        return cls(spec, thresholds)

    def respec(self, spec: ProbeSpec) -> None:
        """The probe's spec is now `spec`: a decided result stays as it is, unless
        `{{.Result}}` came into its policies (not known until the next run: the pod's
        values stand) or went out of them (nothing shown is made of it)."""
        decided = self.thresholds.decided
        if decided is not None and self.spec.uses_result != spec.uses_result:
            result = None if spec.uses_result else ""
            self.thresholds = replace(self.thresholds, decided=replace(decided, result=result))
        self.spec = spec


@dataclass(slots=True)
class PodEntry:
    """One pod the engine watches: its view, its probes, and what was said of it."""

    key: ObjectKey
    view: PodView
    resource_version: str
    probes: dict[ProbeKey, ProbeSpec] = field(default_factory=dict)
    # the conflicts (`Conflict.identity`) standing on this pod, each reported once
    conflicts: frozenset[tuple[str, str, OwnerRef, OwnerRef]] = frozenset()
    record_problem: str | None = None  # as last logged
    # per (owner, kind, key) with an invalid rendered value: the tokens of the values
    # reported (the newest `_TOKENS_KEPT`); kept while a probe of the pod renders the
    # key, so bounded by the markers' keys
    invalid_reported: dict[tuple[OwnerRef, str, str], list[str]] = field(default_factory=dict)
    # when a new value of a key reported already was last reported (clock seconds)
    invalid_again_at: float = -math.inf

    def invalid_to_report(
        self,
        invalid: Iterable[InvalidValue],
        live: Mapping[OwnerRef, ProbeSpec | None],
        *,
        now: float,
        refresh: float,
    ) -> tuple[list[InvalidValue], int]:
        """The values of `invalid` (a plan of this pod, whose probes run `live`) to raise
        a Warning for, in order, remembered as reported (see the module docstring); and
        how many new values of keys reported already wait for `refresh`."""
        memory = self.invalid_reported
        for slot in [s for s in memory if not _renders(live.get(s[0]), s[1], s[2])]:
            del memory[slot]
        report: list[InvalidValue] = []
        kept = 0
        for bad in invalid:
            token = bad.token
            seen = memory.get(bad.slot)
            if seen is None and bad.recorded:
                memory[bad.slot] = [token]
                continue
            if seen is not None and token in seen:
                continue
            if seen is not None and now - self.invalid_again_at < refresh:
                kept += 1
                continue
            if seen is None:
                memory[bad.slot] = [token]
            else:
                seen.append(token)
                del seen[:-_TOKENS_KEPT]
            self.invalid_again_at = now
            report.append(bad)
        return report, kept


def _renders(spec: ProbeSpec | None, kind: str, key: str) -> bool:
    """Whether `spec` has a policy that sets `key` (of `kind`: label or annotation)."""
    if spec is None:
        return False
    return any(
        key in (policy.labels if kind == "label" else policy.annotations)
        for policy in spec.policies
    )


def _condition_message(view: PodView, condition: str | None) -> str:
    found = None if condition is None else view.condition(condition)
    message = None if found is None else found.get("message")
    return message if isinstance(message, str) else ""
