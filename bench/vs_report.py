"""bench/vs_kruise.py's output, pure: the table, the printed report, the JSON document
and the command that measures the same again (the figures from bench/vs_stats.py)."""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from bench import kruise
from bench.vs_plan import CASES, DEFAULT_SYSTEMS, case_of
from bench.vs_stats import (
    BASELINE,
    MIN_RUNS,
    Run,
    as_spread,
    is_spread,
    results,
    run_figures,
    verdict,
)
from probemarker import __version__

ALONE = "no Kruise given: probemarker alone"
# issue 41 asks for HTTP probes where both systems have them; this bench runs exec only
EXEC_ONLY = "HTTP probes not run (exec only; Kruise's PodProbeMarker has httpGet from v1.9.0)"
FEW_RUNS = (
    "fewer than {min} runs a column: the ranges say little, no row is ranked (a look, "
    "not a comparison)"
)
METHOD = (
    "{runs} runs a column, in rotated order (round r starts at column r mod {k}); each "
    "figure the median (min-max) over the runs; CPU over the baseline run `neither` of the "
    "same round (the same pods and workload, no marker); latency pooled over all runs' "
    "flips (nearest rank); `lowest`: a column whose range lies below every other's, `tie` "
    "where ranges overlap"
)

# (key, title, ranked: lower is better and the verdict column says which is lowest)
ROWS: tuple[tuple[str, str, bool], ...] = (
    ("latency_ms", "flip -> label, ms, all runs' flips (p50 / p90 / p99 / max)", False),
    ("latency_median_ms", "  each run's median, ms", True),
    ("condition_latency_ms", "flip -> condition, ms (p50 / p90 / p99 / max)", False),
    ("missed_labels", "flips never labelled within 10 s (nor before the next), a run", True),
    ("missed_conditions", "flips whose condition never followed within 10 s (nor before the next), a run", True),
    ("writes_per_transition", "writes per transition (pods, NodePodProbes; all in the window)", True),
    ("writes_per_transition_over_rest", "  beyond the system's own rate at rest", True),
    ("pod_writes_per_transition", "  of which to the pods", True),
    ("events_per_transition", "Events per transition", True),
    ("writes_by_resource", "writes during the flips, by resource", False),
    ("start_writes", "writes from the marker's creation to 30 s after all are marked", True),
    ("start_writes_by_resource", "  of which, by resource", False),
    ("start_daemon_log", "  the daemon's log then, by event", False),
    ("steady_writes_per_min", "writes a minute, nothing flipping", True),
    ("steady_writes_per_min_by_resource", "  of which, by resource", False),
    ("steady_writes_per_hour", "writes an hour, nothing flipping", True),
    ("steady_writes_per_hour_by_resource", "  of which, by resource", False),
    ("requests_per_min_by_verb", "API requests a minute during the flips, by verb", False),
    ("apiserver_cpu_ms_per_transition", "API server CPU per transition over the baseline, ms", True),
    ("apiserver_cpu_mcores_over_baseline", "API server CPU during the flips over the baseline, mcores", True),
    ("apiserver_cpu_mcores_steady_over_baseline", "API server CPU at rest over the baseline, mcores", True),
    ("apiserver_cpu_mcores", "API server CPU during the flips, as read, mcores", False),
    ("apiserver_cpu_mcores_steady", "API server CPU at rest, as read, mcores", False),
    ("node_cpu_ms_per_transition", "node CPU (every process) per transition over the baseline, ms", True),
    ("node_cpu_mcores_over_baseline", "node CPU during the flips over the baseline, mcores", True),
    ("node_cpu_mcores_steady_over_baseline", "node CPU at rest over the baseline, mcores", True),
    ("node_cpu_mcores", "node CPU during the flips, as read, mcores", False),
    ("node_cpu_mcores_steady", "node CPU at rest, as read, mcores", False),
    ("lifecycles", "pods created and deleted in the churn", False),
    ("writes_per_lifecycle", "writes per pod lifecycle (pods, NodePodProbes)", True),
    ("pod_writes_per_lifecycle", "  of which to the pods", True),
    ("events_per_lifecycle", "Events per pod lifecycle", True),
    ("churn_writes_by_resource", "writes during the churn, by resource", False),
    ("apiserver_cpu_ms_per_lifecycle", "API server CPU per pod lifecycle over the baseline, ms", True),
    ("node_cpu_ms_per_lifecycle", "node CPU per pod lifecycle over the baseline, ms", True),
    ("apiserver_cpu_mcores_churn", "API server CPU during the churn, as read, mcores", False),
    ("node_cpu_mcores_churn", "node CPU during the churn, as read, mcores", False),
    ("cpu_mcores", "the system's CPU during the flips, mcores (cgroups)", True),
    ("cpu_mcores_steady", "the system's CPU, nothing flipping, mcores", True),
    ("cpu_mcores_churn", "the system's CPU during the churn, mcores", True),
    ("memory_mib", "the system's memory, MiB (cgroup working set)", True),
    ("restart_writes", "writes (pods, NodePodProbes) from its node agent's restart to 20 s after Ready", True),
    ("restart_pod_writes", "  of which to the pods", True),
    ("restart_writes_by_resource", "  all writes then, by resource", False),
    ("restart_flaps", "label/condition flaps after that restart", True),
    ("restart_flapped", "  of which", False),
    ("restart_flap_example", "  for example", False),
    ("left_after_delete", "left on the pods 45 s after the marker's delete", False),
    ("way_left_after_delete", "`way`'s marks left 45 s after its delete", False),
    ("gateway_followed_after_way_deleted", "`gateway`'s label follows after `way` is deleted", False),
)  # fmt: skip
NO_BASELINE = (  # a case with no CPU window (d) has no baseline column
    "CPU over the baseline run `neither` of the same round (the same pods and workload, no marker)",
    "no baseline run (no CPU window in this case)",
)
POOLED = ("p50", "p90", "p99", "max", "flips")


def _num(value: float) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return format(value, "g") if isinstance(value, float) else str(value)


def cell(value: Any) -> str:
    """One figure as the table prints it: a spread as `median (min-max)` (the median
    alone when every run gave the same), pooled delays as p50 / p90 / p99 / max."""
    if value is None:
        return "-"
    if is_spread(value):
        low, high = _num(value["min"]), _num(value["max"])
        median = _num(value["median"])
        return median if low == high else f"{median} ({low}-{high})"
    if isinstance(value, dict) and tuple(value) == POOLED:
        return " / ".join(f"{value[k]:.0f}" for k in POOLED[:4]) + f" ({value['flips']} flips)"
    if isinstance(value, dict):
        return ", ".join(f"{k} {cell(v)}" for k, v in value.items()) or "none"
    if isinstance(value, list):
        return " or ".join(cell(v) if isinstance(v, dict) else str(v) for v in value) or "-"
    return str(value)


def row_verdict(summaries: Mapping[str, Mapping[str, Any]], key: str, runs: int) -> str:
    """The verdict of one ranked row among the systems' columns (not the baseline)."""
    spreads = {
        column: as_spread(figures[key])
        for column, figures in summaries.items()
        if column != BASELINE and is_spread(figures.get(key))
    }
    return verdict(spreads, runs)


def verdicts(summaries: Mapping[str, Mapping[str, Any]], runs: int) -> dict[str, str]:
    return {key: row_verdict(summaries, key, runs) for key, _, ranked in ROWS if ranked}


def table(summaries: Mapping[str, Mapping[str, Any]], runs: int) -> str:
    """The figures, one column a system in `summaries`' order, and the lowest; a row
    that no column has (another case's) is left out."""
    columns = list(summaries)
    judged = verdicts(summaries, runs)
    lines = [f"| | {' | '.join(columns)} | lowest |", "|---|" + "---|" * (len(columns) + 1)]
    for key, title, _ in ROWS:
        if all(summaries[c].get(key) is None for c in columns):
            continue
        cells = [cell(summaries[c].get(key)) for c in columns]
        lines.append(f"| {title} | {' | '.join(cells)} | {judged.get(key, '')} |")
    return "\n".join(lines)


def command_line(args: argparse.Namespace) -> str:
    """The command that measures the same again."""
    words = ["python", "bench/vs_kruise.py", "--case", args.case, "--runs", str(args.runs),
             "--pods", str(args.pods)]  # fmt: skip
    if "flips" in CASES[args.case].phases:
        words += ["--flips", str(args.flips), "--seed", str(args.seed)]
    if (quiet := getattr(args, "quiet_seconds", None)) is not None:
        words += ["--quiet-seconds", str(quiet)]
    if args.systems != DEFAULT_SYSTEMS:
        words += ["--systems", args.systems]
    for value in args.kruise:
        words += ["--kruise", value]
    return shlex.join(words)


def document(
    args: argparse.Namespace,
    *,
    server: str,
    ran: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    runs: Sequence[Run],
) -> dict[str, Any]:
    """The JSON: what ran (Kubernetes, probemarker, each Kruise as kruise.identity says,
    none: probemarker alone), the command, the order measured, every run's raw figures
    and its figures over its round's baseline, the summaries by column and the
    verdicts by row."""
    case = case_of(args)
    summaries = results(runs, columns, hourly=case.hourly)
    rounds = sorted({run.round for run in runs})
    return {
        "case": case.name,
        "case_title": case.title,
        "period_seconds": case.period,
        "quiet_seconds": case.quiet_seconds if "quiet" in case.phases else None,
        "quiet_seconds_case": CASES[case.name].quiet_seconds if "quiet" in case.phases else None,
        "kubernetes": server,
        "probemarker": f"{__version__} (this checkout)",
        "kruise": [dict(one) for one in ran],
        "probemarker_alone": not ran,
        "note": None if ran else ALONE,
        "probes_note": EXEC_ONLY,
        "runs": args.runs,
        "runs_note": FEW_RUNS.format(min=MIN_RUNS) if args.runs < MIN_RUNS else None,
        "pods": args.pods,
        "flips": args.flips,
        "seed": args.seed,
        "command": command_line(args),
        "columns": list(columns),
        "complete": len(runs) == args.runs * len(columns),  # a JSON written as it goes
        "order": [
            [run.column for run in sorted(runs, key=lambda r: r.position) if run.round == n]
            for n in rounds
        ],
        "results": summaries,
        "verdicts": verdicts(summaries, args.runs),
        "raw": [
            {"run": json.loads(json.dumps(asdict(run))), "figures": figures}
            for run, figures in zip(runs, run_figures(runs, hourly=case.hourly), strict=True)
        ],
    }


def report(doc: Mapping[str, Any]) -> str:
    """The printed answer: what ran, the method, the table, the order, the command."""
    lines = [f"Kubernetes {doc['kubernetes']}, one node; probemarker {doc['probemarker']}"]
    if doc["kruise"]:
        lines += [kruise.describe(ran) for ran in doc["kruise"]]
        lines.append(
            "each system installed alone for its runs (the other removed), and neither for "
            "the baseline `neither` (when the case has one)"
        )
    else:
        lines.append(ALONE)
    lines.append(f"case {doc['case']}: {doc['case_title']}")
    flips = f", {doc['flips']} flips a pod" if doc["case"] == "a" else ""
    pods = f"{doc['pods']} pods a system" if doc["pods"] else "no pods but the churn's"
    lines.append(f"{pods}{flips}, exec probe period {doc['period_seconds']} s, thresholds 1")
    lines.append(doc["probes_note"])
    if (quiet := doc.get("quiet_seconds")) is not None and quiet != doc["quiet_seconds_case"]:
        lines.append(f"at rest: {quiet:g} s a run, not the case's {doc['quiet_seconds_case']:g} s "
                     "(--quiet-seconds)")  # fmt: skip
    method = METHOD.format(runs=doc["runs"], k=len(doc["columns"]))
    if BASELINE not in doc["columns"]:
        method = method.replace(NO_BASELINE[0], NO_BASELINE[1])
    lines.append(method)
    if doc["runs_note"]:
        lines.append(doc["runs_note"])
    order = [f"round {n + 1}: {', '.join(names)}" for n, names in enumerate(doc["order"])]
    return "\n".join(
        [*lines, "", table(doc["results"], doc["runs"]), "", *order, f"command: {doc['command']}"]
    )


def dumps(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, indent=2) + "\n"
