"""bench/vs_kruise.py's method, pure: what is counted and how runs are compared.

Nothing here touches the cluster; bench/vs_kruise.py and bench/vs_node.py read the
counters and the audit log and hand them over. tests/unit/test_bench_vs_stats.py checks
every function here on made-up inputs.

- Whose requests: the audit log's events of a system's identities (IDENTITIES: for
  Kruise its manager's and its daemon's ServiceAccounts), each request once, the writes
  (a write verb on a stored object) by resource.
- Whose CPU and memory: the cgroups of a system's processes (AGENTS: for Kruise its
  manager and its daemon), the API server's process, and the whole node (/proc/stat's
  busy time, every process on it).
- One run of one column gives a `Run`: the `Window`s its case has (the flips, the time
  at rest, the churn) with their lengths and counters, the delays seen
  (bench/vs_watch.py), and the counts of its other phases. `figures` turns a run into
  its figures, the CPU ones over the same round's baseline run (the column `neither`:
  the same pods and workload, no marker), per transition, per minute or hour at rest,
  per pod lifecycle.
- Over N runs: every figure as median and range (`spread`), the delays pooled over all
  runs' flips (`pooled_ms`), and a verdict per row that calls overlapping ranges a tie.
- The order: round r measures the columns starting at column r mod k (`rotation`).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bench import kruise
from tests.cluster.kube import DAEMON_USER

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
    contents by PID, its first arguments those whole words (/manager, not
    /manager-anything); none for the baseline."""
    pids = []
    for argv0 in AGENTS[system]:
        wanted = "".join(f"{word}\0" for word in argv0).encode()
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
    than two columns, or fewer than MIN_RUNS runs asked for (`runs`) or behind any of
    the spreads (a JSON written as it goes, a figure some runs lack): no ranking from
    so few."""
    if len(spreads) < 2 or min(runs, *(s.runs for s in spreads.values())) < MIN_RUNS:
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
    """One column measured once: the raw figures, kept in the JSON as they were read.
    A window the case does not have is None."""

    column: str
    round: int  # 0-based
    position: int  # its place in the round's order, 0-based
    transitions: int  # flips scheduled (pods x flips)
    flips: Window | None  # from the first flip to SETTLE s after the last: the fixed workload
    quiet: Window | None  # nothing flipping
    label_delays: Sequence[float] = ()  # s, each flip seen
    condition_delays: Sequence[float] = ()
    missed_labels: int | None = None  # flips not labelled in 10 s nor by the next (vs_watch)
    missed_conditions: int | None = None
    memory_mib: float | None = None
    phases: Mapping[str, Any] = field(default_factory=dict)  # start, restart, delete
    churn: Window | None = None  # pods created and deleted at a steady rate
    lifecycles: int = 0  # pods created in the churn


def per_minute(count: float, seconds: float) -> float:
    return count * 60 / seconds


def per_hour(count: float, seconds: float) -> float:
    return per_minute(count, seconds) * 60


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


def _cpu(window: Window, what: str) -> float:
    return float(getattr(window, f"{what}_cpu"))


def _over(window: Window, base: Window | None, what: str) -> float | None:
    """The API server's or the node's CPU seconds in `window` over the baseline's."""
    if base is None:
        return None
    return over_baseline(_cpu(window, what), window.seconds, _cpu(base, what), base.seconds)


def _flip_figures(run: Run, flips: Window, base: Window | None) -> dict[str, Any]:
    n = run.transitions
    out: dict[str, Any] = {
        "latency_median_ms": (
            round(statistics.median(run.label_delays) * 1000, 1) if run.label_delays else None
        ),
        "missed_labels": run.missed_labels,
        "missed_conditions": run.missed_conditions,
    }
    if run.column != BASELINE:  # a system's run: its own requests
        out |= {
            "writes_per_transition": round(object_writes(flips.writes) / n, 2),
            "pod_writes_per_transition": round(pod_writes(flips.writes) / n, 2),
            "events_per_transition": round(event_writes(flips.writes) / n, 2),
            "writes_by_resource": dict(flips.writes),
            "requests_per_min_by_verb": {
                verb: round(per_minute(count, flips.seconds), 1)
                for verb, count in sorted(flips.by_verb.items())
            },
        }
        if run.quiet is not None:
            over_rest = writes_over_rest(flips, run.quiet)
            out["writes_per_transition_over_rest"] = round(over_rest / n, 2)
    for what in ("apiserver", "node"):  # as read: the baseline's are the background
        out[f"{what}_cpu_mcores"] = round(mcores(_cpu(flips, what), flips.seconds), 1)
        if (used := _over(flips, base, what)) is not None:
            out[f"{what}_cpu_ms_per_transition"] = round(used * 1000 / n, 2)
            out[f"{what}_cpu_mcores_over_baseline"] = round(mcores(used, flips.seconds), 1)
    if flips.system_cpu is not None:
        out["cpu_mcores"] = round(mcores(flips.system_cpu, flips.seconds), 1)
    return out


def _rest_figures(run: Run, quiet: Window, base: Window | None, *, hourly: bool) -> dict[str, Any]:
    unit, rate = ("hour", per_hour) if hourly else ("min", per_minute)
    out: dict[str, Any] = {}
    if run.column != BASELINE:
        out |= {
            f"steady_writes_per_{unit}": round(rate(all_writes(quiet.writes), quiet.seconds), 1),
            f"steady_writes_per_{unit}_by_resource": {
                key: round(rate(count, quiet.seconds), 1) for key, count in quiet.writes.items()
            },
        }
    for what in ("apiserver", "node"):
        out[f"{what}_cpu_mcores_steady"] = round(mcores(_cpu(quiet, what), quiet.seconds), 1)
        if (used := _over(quiet, base, what)) is not None:
            out[f"{what}_cpu_mcores_steady_over_baseline"] = round(mcores(used, quiet.seconds), 1)
    if quiet.system_cpu is not None:
        out["cpu_mcores_steady"] = round(mcores(quiet.system_cpu, quiet.seconds), 1)
    return out


def _churn_figures(run: Run, churn: Window, base: Window | None) -> dict[str, Any]:
    n = max(1, run.lifecycles)
    out: dict[str, Any] = {"lifecycles": run.lifecycles}
    if run.column != BASELINE:
        out |= {
            "writes_per_lifecycle": round(object_writes(churn.writes) / n, 2),
            "pod_writes_per_lifecycle": round(pod_writes(churn.writes) / n, 2),
            "events_per_lifecycle": round(event_writes(churn.writes) / n, 2),
            "churn_writes_by_resource": dict(churn.writes),
        }
    for what in ("apiserver", "node"):
        out[f"{what}_cpu_mcores_churn"] = round(mcores(_cpu(churn, what), churn.seconds), 1)
        if (used := _over(churn, base, what)) is not None:
            out[f"{what}_cpu_ms_per_lifecycle"] = round(used * 1000 / n, 2)
    if churn.system_cpu is not None:
        out["cpu_mcores_churn"] = round(mcores(churn.system_cpu, churn.seconds), 1)
    return out


def figures(run: Run, baseline: Run | None, *, hourly: bool = False) -> dict[str, Any]:
    """One run's figures, from each window it has. The CPU ones also over `baseline`
    (the same round's run of the column `neither`) where given; the baseline's own run
    gives its rates as read (the background). `hourly`: rates at rest per hour."""
    base = None if baseline is None or baseline is run else baseline
    out: dict[str, Any] = {}
    if run.flips is not None:
        out |= _flip_figures(run, run.flips, base.flips if base else None)
    if run.quiet is not None:
        out |= _rest_figures(run, run.quiet, base.quiet if base else None, hourly=hourly)
    if run.churn is not None:
        out |= _churn_figures(run, run.churn, base.churn if base else None)
    out["memory_mib"] = None if run.memory_mib is None else round(run.memory_mib, 1)
    out.update(run.phases)
    return out


def restart_figures(writes: Mapping[str, int]) -> dict[str, Any]:
    """The writes from a node agent's restart to RESTART_WATCH_SECONDS after its
    replacement is Ready (bench/vs_kruise.py): pods and NodePodProbes, as a transition's
    are counted (Kruise's restarted daemon writes its NodePodProbe, not the pods), of
    which to the pods, and all of them by resource."""
    return {
        "restart_writes": object_writes(writes),
        "restart_pod_writes": pod_writes(writes),
        "restart_writes_by_resource": dict(writes),
    }


# -- the order -------------------------------------------------------------------------------


def rotation(count: int, round_: int) -> list[int]:
    """The columns' indices in round `round_` (0-based): starting at round_ mod count."""
    start = round_ % count if count else 0
    return [*range(start, count), *range(start)]


def rounds(columns: Sequence[T], runs: int) -> list[list[T]]:
    """Each round's columns in the order measured: every column once a round, the
    order rotated by one each round, so that no column is always first or last."""
    return [[columns[i] for i in rotation(len(columns), r)] for r in range(runs)]


def run_figures(runs: Sequence[Run], *, hourly: bool = False) -> list[dict[str, Any]]:
    """Each run's figures, over the baseline run of its own round."""
    baselines = {run.round: run for run in runs if run.column == BASELINE}
    return [figures(run, baselines.get(run.round), hourly=hourly) for run in runs]


def results(
    runs: Sequence[Run], columns: Sequence[str], *, hourly: bool = False
) -> dict[str, dict[str, Any]]:
    """Per column, in `columns`' order: the delays pooled over all its runs' flips, then
    every figure of `run_figures` as `summarize` gives it."""
    each = run_figures(runs, hourly=hourly)
    out: dict[str, dict[str, Any]] = {}
    for column in columns:
        mine = [(run, figs) for run, figs in zip(runs, each, strict=True) if run.column == column]
        out[column] = {
            "latency_ms": pooled_ms(d for run, _ in mine for d in run.label_delays),
            "condition_latency_ms": pooled_ms(d for run, _ in mine for d in run.condition_delays),
            **summarize([figs for _, figs in mine]),
        }
    return out
