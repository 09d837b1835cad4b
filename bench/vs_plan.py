"""bench/vs_kruise.py's plan, pure: the command line, the cases, the columns and the
markers they apply (the cluster I/O is in bench/vs_kruise.py).

The cases (`--case`), each measured the same way (bench/vs_stats.py: N runs in rotated
order, median and range, CPU over a baseline run):
- a: the worst case today: period 1 s, 20 pods, 20 flips a pod at known moments; the
  start, the flips, 30 s at rest, a restart of the node agent, a marker's delete.
- b: a realistic node: period 10 s, 100 pods, nothing flipping for 10 minutes, the rates
  given per hour.
- c: pod churn: a pod created every 3 s and deleted 30 s after its create, 100 pods in
  all: writes and Events per pod lifecycle, CPU per lifecycle.
- d: each node agent restarted, on the node of case b: writes and flaps to 20 s
  after its replacement is Ready.
- bd: cases b and d in one run on their one node: at rest, then the restart (what both
  measure, for the set-up of one).

`--quiet-seconds` shortens (or lengthens) the window at rest of a case that has one; the
output says the window used beside the case's own.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench import kruise
from bench.vs_stats import BASELINE, MIN_RUNS

PROBEMARKER_SYSTEMS = ("probemarker-api", "probemarker-cri")
DEFAULT_SYSTEMS = ",".join(PROBEMARKER_SYSTEMS)
DEFAULT_RUNS = MIN_RUNS

# what a case's run goes through, in this order
PHASES = ("start", "flips", "quiet", "churn", "restart", "delete")
CPU_WINDOWS = frozenset({"flips", "quiet", "churn"})  # what the baseline run is needed for


@dataclass(frozen=True)
class Case:
    """One case: the node it makes and what each run goes through."""

    name: str
    title: str
    pods: int  # at the start (churn makes its own)
    period: int  # the probe's, s
    phases: tuple[str, ...]
    quiet_seconds: float = 30.0
    hourly: bool = False  # rates at rest per hour, not per minute
    churn_pods: int = 0  # created in all, one every churn_interval s
    churn_interval: float = 3.0
    churn_lifetime: float = 30.0  # from a pod's create to its delete

    @property
    def baseline(self) -> bool:
        """Whether a baseline run is measured: some CPU window to subtract it from."""
        return bool(CPU_WINDOWS.intersection(self.phases))


CASES: dict[str, Case] = {
    "a": Case("a", "the worst case today: period 1 s, 20 pods, flips at known moments",
              pods=20, period=1, phases=("start", "flips", "quiet", "restart", "delete")),
    "b": Case("b", "a realistic node: period 10 s, 100 pods, 10 minutes at rest, rates per hour",
              pods=100, period=10, phases=("start", "quiet"), quiet_seconds=600, hourly=True),
    "c": Case("c", "pod churn: a pod created every 3 s, deleted 30 s later, 100 in all: "
              "writes, Events and CPU per pod lifecycle",
              pods=0, period=1, phases=("start", "churn"), churn_pods=100),
    "d": Case("d", "each node agent restarted, on case b's node: writes and flaps from "
              "the restart to 20 s after Ready", pods=100, period=10, phases=("start", "restart")),
    "bd": Case("bd", "cases b and d on their one node: period 10 s, 100 pods, 10 minutes at "
               "rest (rates per hour), then each node agent restarted (writes and flaps to "
               "20 s after Ready)", pods=100, period=10, phases=("start", "quiet", "restart"),
               quiet_seconds=600, hourly=True),
}  # fmt: skip
MIN_QUIET_SECONDS, MAX_QUIET_SECONDS = 30, 3600


def case_of(args: argparse.Namespace) -> Case:
    """The case `--case` names, with the window at rest `--quiet-seconds` sets."""
    case = CASES[args.case]
    seconds = getattr(args, "quiet_seconds", None)
    return case if seconds is None else replace(case, quiet_seconds=float(seconds))


def churn_plan(pods: int, interval: float, lifetime: float) -> list[tuple[float, str, str]]:
    """The churn's steps, (seconds from its start, "create" or "delete", pod name), in
    time order: pod i created at i * interval and deleted `lifetime` s later (a delete
    before a create at the same moment)."""
    steps = []
    for i in range(pods):
        name = f"c{i:03d}"
        steps += [(i * interval, "create", name), (i * interval + lifetime, "delete", name)]
    return sorted(steps, key=lambda step: (step[0], step[1] != "delete", step[2]))


def marker_doc(system: str, name: str, namespace: str, *, selector: Mapping[str, str],
               command: Sequence[str], key: str, condition_type: str | None,
               period: int = 1) -> dict[str, Any]:  # fmt: skip
    """The same PodProbeMarker in Kruise's API group or probemarker's."""
    probe: dict[str, Any] = {
        "name": "answer",
        "containerName": "main",
        "probe": {
            "exec": {"command": list(command)},
            "periodSeconds": period, "timeoutSeconds": 1,
            "successThreshold": 1, "failureThreshold": 1,
        },
        "markerPolicy": [
            {"state": "Succeeded", "labels": {key: "yes"}},
            {"state": "Failed", "labels": {key: "no"}},
        ],
    }  # fmt: skip
    if condition_type:
        probe["podConditionType"] = condition_type
    group = "apps.kruise.io" if system == "kruise" else "probemarker.io"
    return {
        "apiVersion": f"{group}/v1alpha1",
        "kind": "PodProbeMarker",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": dict(selector)}, "probes": [probe]},
    }


@dataclass(frozen=True)
class Column:
    """One column of the table, a key of the JSON's results: a system, or the baseline."""

    name: str  # "neither", "kruise LABEL", "probemarker-api", "probemarker-cri"
    system: str  # "kruise", "probemarker" or BASELINE: whose identities, processes, API group
    namespace: str  # its pods' and markers'
    backend: str = ""  # probemarker's exec backend
    source: kruise.Source | None = None  # the Kruise the user brought


def parse_systems(text: str) -> list[str]:
    """`--systems`: which of probemarker's backends to measure (none: only Kruise)."""
    wanted = [name for name in text.split(",") if name]
    if any(name == "kruise" or name.startswith("kruise ") for name in wanted):
        raise SystemExit(
            "--systems: Kruise is measured when given, by --kruise LABEL=SOURCE; "
            f"--systems chooses among {', '.join(PROBEMARKER_SYSTEMS)}"
        )
    if unknown := sorted(set(wanted) - set(PROBEMARKER_SYSTEMS)):
        raise SystemExit(
            f"--systems: unknown {unknown}; choose from {', '.join(PROBEMARKER_SYSTEMS)}"
        )
    return [name for name in PROBEMARKER_SYSTEMS if name in wanted]


def plan(
    sources: Sequence[kruise.Source], systems: Sequence[str], *, baseline: bool = True
) -> list[Column]:
    """The columns in the table's order: the baseline (when the case needs one), each
    Kruise as given, then probemarker's (none but the baseline: nothing to measure)."""
    out = [
        Column(f"kruise {source.label}", "kruise", f"vs-kruise-{index}", source=source)
        for index, source in enumerate(sources, 1)
    ]
    for name in systems:
        backend = name.removeprefix("probemarker-")
        out.append(Column(name, "probemarker", f"vs-probemarker-{backend}", backend=backend))
    if out and baseline:
        out.insert(0, Column(BASELINE, BASELINE, f"vs-{BASELINE}"))
    return out


def parse_args(argv: Sequence[str] | None = None, *, doc: str = "") -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument(
        "--case",
        choices=sorted(CASES),
        default="a",
        help="; ".join(f"{case.name}: {case.title}" for case in CASES.values()),
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=DEFAULT_RUNS,
        help=f"rounds, each measuring every column once in rotated order (default "
        f"{DEFAULT_RUNS}; fewer ranks nothing)",
    )
    parser.add_argument("--pods", type=int, help="pods a system (default: the case's)")
    parser.add_argument("--flips", type=int, default=20, help="flips a pod (case a)")
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument(
        "--quiet-seconds",
        type=int,
        help=f"the window at rest, s ({MIN_QUIET_SECONDS}..{MAX_QUIET_SECONDS}; default: the "
        "case's: 30 for a, 600 for b and bd)",
    )
    parser.add_argument(
        "--kruise",
        action="append",
        default=[],
        metavar="LABEL=SOURCE",
        help="a Kruise release to measure, repeatable: LABEL=image:REF,config=DIR (an image "
        "in the node's containerd, the release's config/) or LABEL=DIR (a folder of its "
        "manager, kruise-daemon and config/); none: probemarker alone",
    )
    parser.add_argument(
        "--systems",
        default=DEFAULT_SYSTEMS,
        help=f"probemarker's backends to measure, of {DEFAULT_SYSTEMS} ('': none)",
    )
    parser.add_argument("--json", type=Path, help="write the figures here, every run's too")
    parser.add_argument(
        "--keep-kruise",
        action="store_true",
        help="leave the last Kruise given installed at the end (beside probemarker)",
    )
    parser.add_argument(
        "--delete-every-round",
        action="store_true",
        help="the delete phase (counts of what is left) in every round, not the first only",
    )
    args = parser.parse_args(argv)
    case = CASES[args.case]
    if args.pods is None:
        args.pods = case.pods
    if not (1 if case.pods else 0) <= args.pods <= 1000 or args.flips < 1 or args.runs < 1:
        parser.error("--pods 1..1000 (case c: 0..1000), --flips 1 or more, --runs 1 or more")
    if args.quiet_seconds is not None:
        if "quiet" not in case.phases:
            parser.error(f"--quiet-seconds: case {case.name} has no window at rest (cases "
                         f"{', '.join(n for n, c in CASES.items() if 'quiet' in c.phases)} have)")  # fmt: skip
        if not MIN_QUIET_SECONDS <= args.quiet_seconds <= MAX_QUIET_SECONDS:
            parser.error(f"--quiet-seconds {args.quiet_seconds}: give {MIN_QUIET_SECONDS}.."
                         f"{MAX_QUIET_SECONDS} s")  # fmt: skip
    return args
