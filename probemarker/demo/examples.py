"""The example markers the demo applies, and what each probe state writes onto a pod.

Stage: demo data (pure, but for reading the example files). Input: the YAML files of
`manifests/examples/` (in a wheel: package data at `probemarker/demo/examples/`, put
there by pyproject.toml's force-include). Output: `Example` values (the body as applied and the
parsed `Marker`), the pod fields a probe state sets (`marks_for`; a value holding
`{{.Result}}` rendered with the probe's answer, as the daemon renders it; `answered`
says which), the columns of a namespace (`columns_of`), how long the daemon may take
to decide a state (`decide_bound`) and how that pace reads (`pace_text`).

The demo plays one marker per namespace (`DEMO_MARKERS`): the game servers' idle check,
the databases' role as the probe's answer (`db.example.com/role: "{{.Result}}"`, from
result-values.yaml, which also holds a marker the demo does not play), and the web
pods' readiness gate.

`fast=True` gives copies with `periodSeconds: 1` and `initialDelaySeconds: 0` (the
thresholds and timeouts unchanged): the same decisions, in seconds instead of a minute.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml

from probemarker.api.model import Marker, ProbeSpec, ProbeState, Timing
from probemarker.api.parse import parse_marker
from probemarker.api.template import render, uses_result

# (file, marker name) of each marker the demo applies, one per namespace.
DEMO_MARKERS = (
    ("game-server-idle.yaml", "game-server-idle"),
    ("result-values.yaml", "database-role-value"),
    ("readiness-gate.yaml", "upstream-gate"),
)
FILES = tuple(file for file, _ in DEMO_MARKERS)
READY = "Ready"  # the kubelet's condition: a readiness gate holds it False until True

MarkKind = Literal["label", "annotation", "condition"]


@dataclass(frozen=True, slots=True, order=True)
class Mark:
    """One field of a pod the demo shows: a label, an annotation or a condition."""

    kind: MarkKind
    key: str

    def __str__(self) -> str:
        return f"{self.kind} {self.key}"


@dataclass(frozen=True, slots=True)
class Example:
    """One example marker: its file name, the body applied, and the parsed marker."""

    file: str
    body: Mapping[str, Any]
    marker: Marker

    @property
    def namespace(self) -> str:
        return self.marker.ref.namespace

    @property
    def name(self) -> str:
        return self.marker.ref.name


# A checkout (an editable install, the tests) reads manifests/examples/ itself; a wheel
# carries the same files as package data (pyproject.toml: force-include), because an
# installed probemarker has no manifests/.
CHECKOUT_EXAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "examples"


def example_text(file: str) -> str:
    """The text of an example file: manifests/examples/ as shipped in the wheel, or in
    the checkout this module runs from."""
    packaged = resources.files("probemarker.demo").joinpath("examples", file)
    if packaged.is_file():
        return packaged.read_text("utf-8")
    return (CHECKOUT_EXAMPLES / file).read_text("utf-8")


def load_examples(*, fast: bool = False) -> tuple[Example, ...]:
    """The demo's three markers (`DEMO_MARKERS`), parsed and validated."""
    found = []
    for file, name in DEMO_MARKERS:
        (body,) = [
            doc
            for doc in yaml.safe_load_all(example_text(file))
            if doc and (doc.get("metadata") or {}).get("name") == name
        ]
        if fast:
            body = quicken(body)
        found.append(Example(file=file, body=body, marker=parse_marker(body)))
    return tuple(found)


def quicken(body: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a marker body whose probes run every second, with no initial delay."""
    out = copy.deepcopy(dict(body))
    for entry in out["spec"]["probes"]:
        entry["probe"]["periodSeconds"] = 1
        entry["probe"]["initialDelaySeconds"] = 0
    return out


def find_probe(examples: Iterable[Example], marker: str, probe: str) -> ProbeSpec:
    """The probe `probe` of the example named `marker`; KeyError names what is missing."""
    for example in examples:
        if example.name == marker:
            for spec in example.marker.probes:
                if spec.name == probe:
                    return spec
            raise KeyError(f"marker {marker} has no probe {probe}")
    raise KeyError(f"no example marker named {marker}")


def marks_for(probe: ProbeSpec, state: ProbeState, *, answer: str | None = None) -> dict[Mark, str]:
    """What the daemon writes onto a pod when `probe` is decided `state`; a value with
    `{{.Result}}` rendered with `answer` (what it stands for: the answer's first line,
    trimmed, `probe.output.result_text`), or left as the template without one."""

    def shown(value: str) -> str:
        return value if answer is None else render(value, answer)

    out: dict[Mark, str] = {}
    for policy in probe.policies:
        if policy.state is state:
            out.update({Mark("label", k): shown(v) for k, v in policy.labels.items()})
            out.update({Mark("annotation", k): shown(v) for k, v in policy.annotations.items()})
    if probe.condition_type:
        out[Mark("condition", probe.condition_type)] = (
            "True" if state is ProbeState.SUCCEEDED else "False"
        )
    return out


def answered(probe: ProbeSpec, state: ProbeState) -> frozenset[Mark]:
    """The marks whose value, in `state`, comes from the probe's answer (`{{.Result}}`)."""
    found: set[Mark] = set()
    for policy in probe.policies:
        if policy.state is state:
            found.update(Mark("label", k) for k, v in policy.labels.items() if uses_result(v))
            found.update(
                Mark("annotation", k) for k, v in policy.annotations.items() if uses_result(v)
            )
    return frozenset(found)


def columns_of(examples: Iterable[Example], namespace: str) -> tuple[Mark, ...]:
    """The fields the markers of `namespace` write, in the order they declare them,
    then the pod's Ready condition (which a readiness gate holds)."""
    seen: dict[Mark, None] = {}
    for example in examples:
        if example.namespace != namespace:
            continue
        for probe in example.marker.probes:
            for state in (ProbeState.SUCCEEDED, ProbeState.FAILED):
                seen.update(dict.fromkeys(marks_for(probe, state)))
    seen[Mark("condition", READY)] = None
    return tuple(seen)


def _threshold(timing: Timing, state: ProbeState) -> int:
    if state is ProbeState.SUCCEEDED:
        return timing.success_threshold
    return timing.failure_threshold


def decide_bound(timing: Timing, state: ProbeState, *, slack: float = 10.0) -> float:
    """Seconds within which a change of answer must be decided `state`: the initial
    delay, one period before the first run, then `threshold` runs, each of which may
    take its timeout, and `slack` for the writes (a generous bound, not a forecast)."""
    runs = _threshold(timing, state)
    return (
        timing.initial_delay_seconds
        + timing.period_seconds
        + runs * (timing.period_seconds + timing.timeout_seconds)
        + slack
    )


def pace_text(timing: Timing, state: ProbeState, *, first: bool = False) -> str:
    """How the decision is paced, e.g. `3 failures, every 10 s`; `first`: a probe's first
    decision, which also waits for the initial delay (`..., after 10 s initial delay`)."""
    runs = _threshold(timing, state)
    word = "success" if state is ProbeState.SUCCEEDED else "failure"
    plural = "es" if word == "success" else "s"
    text = f"{runs} {word}{plural if runs != 1 else ''}, every {timing.period_seconds} s"
    if first and timing.initial_delay_seconds:
        text += f", after a {timing.initial_delay_seconds} s initial delay"
    return text
