"""bench/vs_kruise.py's method, pure: what is counted and how runs are compared.

Nothing here touches the cluster; bench/vs_kruise.py reads the counters and the audit
log and hands them over. tests/unit/test_bench_vs_kruise.py checks every function here
on made-up inputs.

- Whose requests: the audit log's events of a system's identities (IDENTITIES: for
  Kruise its manager's and its daemon's ServiceAccounts), each request once, the writes
  (a write verb on a stored object) by resource.
- Whose CPU and memory: the cgroups of a system's processes (AGENTS: for Kruise its
  manager and its daemon), the API server's process, and the whole node (/proc/stat's
  busy time, every process on it).
- One run of one column gives a `Run`: two `Window`s (the flips, the quiet after them)
  with their lengths and counters, the delays seen, and the counts of its other phases.
  `figures` turns a run into its figures, the CPU ones over the same round's baseline
  run (the column `neither`: the same pods and flips, no marker).
- Over N runs: every figure as median and range (`spread`), the delays pooled over all
  runs' flips (`pooled_ms`), and a verdict per row that calls overlapping ranges a tie.
- The order: round r measures the columns starting at column r mod k (`rotation`).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bench import kruise
from tests.cluster.kube import DAEMON_USER
from tests.podfields import condition, labels_of

KEY = "vs.bench/answer"
BASELINE = "neither"  # the column, and the `system`, with no marker of either system
IDENTITIES: dict[str, tuple[str, ...]] = {
    "kruise": (kruise.MANAGER_USER, kruise.DAEMON_USER),
    "probemarker": (DAEMON_USER,),
    BASELINE: (),
}
# Each agent of a system: a process whose argv starts so (its cgroups are the system's)
AGENTS: dict[str, tuple[tuple[str, ...], ...]] = {
    "kruise": (("/manager",), ("/kruise-daemon",)),
    "probemarker": (("/opt/probemarker/bin/python3", "/opt/probemarker/bin/probemarker", "run"),),
    BASELINE: (),
}
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
NOT_STORED = frozenset({"exec", "attach", "portforward", "proxy"})  # requests, not writes
OBJECT_RESOURCES = frozenset({"pods", "nodepodprobes"})
MISSED_AFTER = 10.0  # s: a flip not seen on the pod by then is missed
MIN_RUNS = 3  # fewer: the ranges are a look, not a ranking

T = TypeVar("T")


# -- the audit log -----------------------------------------------------------------------


def _resource(key: str) -> str:
    return key.split("/")[0]


def object_writes(writes: Mapping[str, int]) -> int:
    """Writes to pods (any subresource) and NodePodProbes: what a transition needs."""
    return sum(n for key, n in writes.items() if _resource(key) in OBJECT_RESOURCES)


def pod_writes(writes: Mapping[str, int]) -> int:
    return sum(n for key, n in writes.items() if _resource(key) == "pods")


def event_writes(writes: Mapping[str, int]) -> int:
    return sum(n for key, n in writes.items() if _resource(key) == "events")


def all_writes(writes: Mapping[str, int]) -> int:
    return sum(writes.values())


@dataclass
class Requests:
    """What one set of identities asked of the API server in a window."""

    writes: dict[str, int] = field(default_factory=dict)  # resource[/subresource] -> count
    by_verb: dict[str, int] = field(default_factory=dict)

    def object_writes(self) -> int:
        return object_writes(self.writes)

    def pod_writes(self) -> int:
        return pod_writes(self.writes)

    def event_writes(self) -> int:
        return event_writes(self.writes)

    def all_writes(self) -> int:
        return all_writes(self.writes)


def count_requests(
    events: Iterable[Mapping[str, Any]], users: Sequence[str], *, namespaces: Sequence[str] = ()
) -> Requests:
    """The requests of `users` in audit `events` (audit.k8s.io/v1, any stages): each
    request once (by auditID; a watch logs ResponseStarted and ResponseComplete), by
    verb; the writes (a write verb on a stored object: not exec, attach, portforward or
    proxy) by resource. `namespaces`, when given, keeps only writes to those namespaces
    or to cluster-scoped objects (a NodePodProbe is one)."""
    seen: set[str] = set()
    out = Requests()
    for event in events:
        if event.get("user", {}).get("username") not in users:
            continue
        audit_id = str(event.get("auditID", ""))
        if audit_id in seen:
            continue
        seen.add(audit_id)
        verb = str(event.get("verb", ""))
        ref = event.get("objectRef") or {}
        sub = ref.get("subresource")
        out.by_verb[verb] = out.by_verb.get(verb, 0) + 1
        if verb not in WRITE_VERBS or sub in NOT_STORED:
            continue
        namespace = ref.get("namespace")
        if namespaces and namespace and namespace not in namespaces:
            continue
        key = str(ref.get("resource", "?")) + (f"/{sub}" if sub else "")
        out.writes[key] = out.writes.get(key, 0) + 1
    return out


def system_requests(
    events: Iterable[Mapping[str, Any]], system: str, namespaces: Sequence[str] = ()
) -> Requests:
    """`count_requests` of a system's identities (IDENTITIES)."""
    return count_requests(events, IDENTITIES[system], namespaces=namespaces)


# -- the node: processes, cgroups, /proc/stat --------------------------------------------


def agent_pids(system: str, cmdlines: Mapping[int, bytes]) -> list[int]:
    """The one process of each of the system's agents (AGENTS), from /proc/PID/cmdline
    contents by PID; none for the baseline."""
    pids = []
    for argv0 in AGENTS[system]:
        wanted = "\0".join(argv0).encode()
        found = sorted(pid for pid, cmdline in cmdlines.items() if cmdline.startswith(wanted))
        if len(found) != 1:
            raise SystemExit(
                f"{system}: {len(found)} processes {' '.join(argv0)} on the node, expected 1"
            )
        pids.append(found[0])
    return pids


def busy_seconds(proc_stat: str, hz: int) -> float:
    """Every CPU's busy time from /proc/stat's `cpu` line, in seconds: user, nice,
    system, irq, softirq and steal (guest time is inside user); not idle nor iowait."""
    first = proc_stat.splitlines()[0].split()
    if first[0] != "cpu":
        raise ValueError(f"/proc/stat starts with {first[0]!r}, not the `cpu` line")
    user, nice, system, _idle, _iowait, irq, softirq, steal = (
        int(x) for x in [*first[1:9], *["0"] * (9 - len(first))]
    )
    return (user + nice + system + irq + softirq + steal) / hz


def working_set_mib(usage: int, memory_stat: str) -> float:
    """The kubelet's working set: usage minus inactive file pages (cgroup v1 names)."""
    inactive = 0
    for line in memory_stat.splitlines():
        name, _, number = line.partition(" ")
        if name == "total_inactive_file":
            inactive = int(number)
    return max(0, usage - inactive) / 2**20


# -- the flips and what the pod watch saw ------------------------------------------------


def schedule(flips: int, seed: int) -> list[list[int]]:
    """Per pod slot (up to 1000), the flips' offsets in centiseconds from the round's
    start: 4 to 8 s apart (so that each system has settled one before the next), at
    any centisecond (so that they fall at a uniform phase of any probe schedule)."""
    rng = random.Random(seed)
    out = []
    for _ in range(1000):
        at, times = rng.randint(0, 300), []
        for _ in range(flips):
            at += rng.randint(400, 800)
            times.append(at)
        out.append(times)
    return out


def uptime_cs(text: str) -> int:
    """/proc/uptime's first number in centiseconds, as SCRIPT reads it."""
    whole, _, fraction = text.split()[0].partition(".")
    return int(whole + fraction)


def answer_after(flip_index: int) -> str:
    """The label value once flip number `flip_index` (0-based) has happened."""
    return "no" if flip_index % 2 == 0 else "yes"


def condition_expected(index: int) -> str:
    return "False" if index % 2 == 0 else "True"


def label_value(obj: Mapping[str, Any]) -> str | None:
    return labels_of(dict(obj)).get(KEY)


def condition_value(obj: Mapping[str, Any]) -> str | None:
    found = condition(dict(obj), KEY)
    return None if found is None else str(found.get("status"))


def delays(
    seen: Sequence[tuple[float, Mapping[str, Any]]],
    pod: str,
    flips_at: Sequence[float],
    value: Callable[[Mapping[str, Any]], str | None],
    expected: Callable[[int], str],
    *,
    within: float = MISSED_AFTER,
) -> tuple[list[float], int]:
    """For each flip of `pod` (monotonic times), the delay to the first object seen
    after it with the value that flip brings; (delays, flips missed). A flip counts as
    seen only before the next flip and within `within` seconds."""
    mine = [(at, obj) for at, obj in seen if obj["metadata"]["name"] == pod]
    found, missed = [], 0
    for index, flip in enumerate(flips_at):
        until = flips_at[index + 1] if index + 1 < len(flips_at) else float("inf")
        until = min(until, flip + within)
        want = expected(index)
        hit = next((at for at, obj in mine if flip <= at < until and value(obj) == want), None)
        if hit is None:
            missed += 1
        else:
            found.append(hit - flip)
    return found, missed


def sequences(
    seen: Sequence[tuple[float, Mapping[str, Any]]],
    since: float,
    value: Callable[[Mapping[str, Any]], str | None],
) -> dict[str, list[str | None]]:
    """Per pod, the values of `value` seen from `since` on, repeats folded."""
    out: dict[str, list[str | None]] = {}
    for at, obj in seen:
        if at >= since:
            values = out.setdefault(obj["metadata"]["name"], [])
            now = value(obj)
            if not values or values[-1] != now:
                values.append(now)
    return out


def flaps(
    seen: Sequence[tuple[float, Mapping[str, Any]]],
    since: float,
    value: Callable[[Mapping[str, Any]], str | None],
) -> int:
    """Changes of `value` per pod among the objects seen from `since` on (the first
    object of each pod sets its value; each change after it is a flap)."""
    return sum(len(values) - 1 for values in sequences(seen, since, value).values())


# -- statistics --------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile (q in 0..100) of `values` (not empty)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n * q / 100), at least 1
    return ordered[int(rank) - 1]


def pooled_ms(seconds: Iterable[float]) -> dict[str, float] | None:
    """Delays pooled over every run's flips, in ms: p50, p90, p99, max and how many."""
    ms = [s * 1000 for s in seconds]
    if not ms:
        return None
    return {
        "p50": round(percentile(ms, 50), 1),
        "p90": round(percentile(ms, 90), 1),
        "p99": round(percentile(ms, 99), 1),
        "max": round(max(ms), 1),
        "flips": len(ms),
    }


@dataclass(frozen=True)
class Spread:
    """One figure over N runs: the median and the range."""

    median: float
    low: float
    high: float
    runs: int

    def as_json(self) -> dict[str, float | int]:
        return {"median": self.median, "min": self.low, "max": self.high, "runs": self.runs}


def spread(values: Sequence[float]) -> Spread:
    """The median and range of one figure's values, one a run (not empty)."""
    return Spread(round(statistics.median(values), 2), min(values), max(values), runs=len(values))


def is_spread(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"median", "min", "max", "runs"}


def as_spread(value: Mapping[str, Any]) -> Spread:
    return Spread(value["median"], value["min"], value["max"], value["runs"])


def compare(a: Spread, b: Spread) -> str:
    """Lower is better: "a" or "b" when its whole range lies below the other's, "tie"
    when the ranges overlap (a difference inside the runs' own spread is no win)."""
    if a.high < b.low:
        return "a"
    if b.high < a.low:
        return "b"
    return "tie"


def verdict(spreads: Mapping[str, Spread], runs: int) -> str:
    """Which column is lowest: its name when its range lies below every other's; "tie:
    A, B" naming the lowest and every column whose range overlaps it; "-" with fewer
    than two columns or fewer than MIN_RUNS runs (no ranking from so few)."""
    if len(spreads) < 2 or runs < MIN_RUNS:
        return "-"
    best = min(spreads, key=lambda name: spreads[name].median)
    tied = [n for n in spreads if n != best and compare(spreads[best], spreads[n]) == "tie"]
    return f"tie: {', '.join([best, *tied])}" if tied else best


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def summarize(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One column's figures over its runs, key by key in the first run's order: numbers
    as a spread (JSON); a mapping of numbers as a spread per key (a key absent from a
    run counts 0 there); anything else as the distinct values seen, in order."""
    keys: dict[str, None] = {}
    for run in runs:
        keys.update(dict.fromkeys(run))
    out: dict[str, Any] = {}
    for key in keys:
        values = [run[key] for run in runs if run.get(key) is not None]
        if not values:
            out[key] = None
        elif all(_is_number(v) for v in values):
            out[key] = spread(values).as_json()
        elif all(isinstance(v, dict) and all(_is_number(x) for x in v.values()) for v in values):
            inner: dict[str, None] = {}
            for v in values:
                inner.update(dict.fromkeys(v))
            out[key] = {k: spread([v.get(k, 0) for v in values]).as_json() for k in inner}
        else:
            distinct: list[Any] = []
            for v in values:
                if v not in distinct:
                    distinct.append(v)
            out[key] = distinct
    return out


# -- one run, and its figures over the baseline --------------------------------------------


@dataclass(frozen=True)
class Window:
    """A window of one run: its length and what was used and asked in it."""

    seconds: float
    apiserver_cpu: float  # s, the API server's process
    node_cpu: float  # s, every CPU of the node busy (/proc/stat)
    system_cpu: float | None = None  # s, the system's cgroups (none for the baseline)
    writes: Mapping[str, int] = field(default_factory=dict)  # the system's, by resource
    by_verb: Mapping[str, int] = field(default_factory=dict)  # the system's requests


@dataclass(frozen=True)
class Run:
    """One column measured once: the raw figures, kept in the JSON as they were read."""

    column: str
    round: int  # 0-based
    position: int  # its place in the round's order, 0-based
    transitions: int  # flips scheduled (pods x flips)
    flips: Window  # from the first flip to SETTLE s after the last: the fixed workload
    quiet: Window  # after the flips, nothing flipping
    label_delays: Sequence[float] = ()  # s, each flip seen
    condition_delays: Sequence[float] = ()
    missed_labels: int | None = None  # flips never labelled within MISSED_AFTER
    missed_conditions: int | None = None
    memory_mib: float | None = None
    phases: Mapping[str, Any] = field(default_factory=dict)  # start, restart, delete


def per_minute(count: float, seconds: float) -> float:
    return count * 60 / seconds


def mcores(cpu_seconds: float, seconds: float) -> float:
    return cpu_seconds / seconds * 1000


def over_baseline(used: float, seconds: float, base_used: float, base_seconds: float) -> float:
    """CPU seconds used in a window of `seconds` beyond the baseline's use over the same
    length (the baseline's rate in its own window of the same workload)."""
    return used - base_used / base_seconds * seconds


def writes_over_rest(flips: Window, quiet: Window) -> float:
    """Object writes in the flips' window beyond what the system writes at rest over
    the same length (its quiet window's rate)."""
    rest = object_writes(quiet.writes) / quiet.seconds * flips.seconds
    return object_writes(flips.writes) - rest


def figures(run: Run, baseline: Run | None) -> dict[str, Any]:
    """One run's figures. The CPU ones over `baseline` (the same round's run of the
    column `neither`) where given; the baseline's own run gives its absolute rates."""
    flips, quiet, n = run.flips, run.quiet, run.transitions
    out: dict[str, Any] = {
        "latency_median_ms": (
            round(statistics.median(run.label_delays) * 1000, 1) if run.label_delays else None
        ),
        "missed_labels": run.missed_labels,
        "missed_conditions": run.missed_conditions,
    }
    if run.missed_labels is not None:  # a system's run: its own requests and processes
        out |= {
            "writes_per_transition": round(object_writes(flips.writes) / n, 2),
            "writes_per_transition_over_rest": round(writes_over_rest(flips, quiet) / n, 2),
            "pod_writes_per_transition": round(pod_writes(flips.writes) / n, 2),
            "events_per_transition": round(event_writes(flips.writes) / n, 2),
            "writes_by_resource": dict(flips.writes),
            "steady_writes_per_min": round(per_minute(all_writes(quiet.writes), quiet.seconds), 1),
            "steady_writes_per_min_by_resource": {
                key: round(per_minute(count, quiet.seconds), 1)
                for key, count in quiet.writes.items()
            },
            "requests_per_min_by_verb": {
                verb: round(per_minute(count, flips.seconds), 1)
                for verb, count in sorted(flips.by_verb.items())
            },
        }
    for what in ("apiserver", "node"):  # as read: the baseline's are the background
        out[f"{what}_cpu_mcores"] = round(mcores(getattr(flips, f"{what}_cpu"), flips.seconds), 1)
        out[f"{what}_cpu_mcores_steady"] = round(
            mcores(getattr(quiet, f"{what}_cpu"), quiet.seconds), 1
        )
    if baseline is not None and baseline is not run:
        for what in ("apiserver", "node"):
            used = over_baseline(
                getattr(flips, f"{what}_cpu"), flips.seconds,
                getattr(baseline.flips, f"{what}_cpu"), baseline.flips.seconds,
            )  # fmt: skip
            at_rest = over_baseline(
                getattr(quiet, f"{what}_cpu"), quiet.seconds,
                getattr(baseline.quiet, f"{what}_cpu"), baseline.quiet.seconds,
            )  # fmt: skip
            out[f"{what}_cpu_ms_per_transition"] = round(used * 1000 / n, 2)
            out[f"{what}_cpu_mcores_over_baseline"] = round(mcores(used, flips.seconds), 1)
            out[f"{what}_cpu_mcores_steady_over_baseline"] = round(
                mcores(at_rest, quiet.seconds), 1
            )
    if flips.system_cpu is not None and quiet.system_cpu is not None:
        out["cpu_mcores"] = round(mcores(flips.system_cpu, flips.seconds), 1)
        out["cpu_mcores_steady"] = round(mcores(quiet.system_cpu, quiet.seconds), 1)
    out["memory_mib"] = None if run.memory_mib is None else round(run.memory_mib, 1)
    out.update(run.phases)
    return out


# -- the order -------------------------------------------------------------------------------


def rotation(count: int, round_: int) -> list[int]:
    """The columns' indices in round `round_` (0-based): starting at round_ mod count."""
    start = round_ % count if count else 0
    return [*range(start, count), *range(start)]


def rounds(columns: Sequence[T], runs: int) -> list[list[T]]:
    """Each round's columns in the order measured: every column once a round, the
    order rotated by one each round, so that no column is always first or last."""
    return [[columns[i] for i in rotation(len(columns), r)] for r in range(runs)]


def run_figures(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Each run's figures, over the baseline run of its own round."""
    baselines = {run.round: run for run in runs if run.column == BASELINE}
    return [figures(run, baselines.get(run.round)) for run in runs]


def results(runs: Sequence[Run], columns: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per column, in `columns`' order: the delays pooled over all its runs' flips, then
    every figure of `run_figures` as `summarize` gives it."""
    each = run_figures(runs)
    out: dict[str, dict[str, Any]] = {}
    for column in columns:
        mine = [(run, figs) for run, figs in zip(runs, each, strict=True) if run.column == column]
        out[column] = {
            "latency_ms": pooled_ms(d for run, _ in mine for d in run.label_delays),
            "condition_latency_ms": pooled_ms(d for run, _ in mine for d in run.condition_delays),
            **summarize([figs for _, figs in mine]),
        }
    return out


def flip_delays(
    seen: Sequence[tuple[float, Mapping[str, Any]]], flips_at: Mapping[str, Sequence[float]]
) -> dict[str, Any]:
    """Over every pod's flips (monotonic times by pod name): the delays to the label and
    to the condition, and the flips of each never seen within MISSED_AFTER."""
    out: dict[str, Any] = {
        "label_delays": [],
        "condition_delays": [],
        "missed_labels": 0,
        "missed_conditions": 0,
    }
    for pod, at in flips_at.items():
        for what, value, expected in (
            ("label", label_value, answer_after),
            ("condition", condition_value, condition_expected),
        ):
            found, missed = delays(seen, pod, at, value, expected)
            out[f"{what}_delays"] += found
            out[f"missed_{what}s"] += missed
    return out
