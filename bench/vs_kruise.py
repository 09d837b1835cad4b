"""probemarker beside OpenKruise's PodProbeMarker on the project's real node
(hack/cluster.sh): the same marker on the same pods, each system measured N times in
rotated order beside a baseline run of neither, for each Kruise release the user brings
(none: probemarker alone), in one of four cases (`--case`, bench/vs_plan.py).

Needs root, the cluster up, probemarker's image loaded and each Kruise's image in the
node's containerd or a folder of its two programs, with its config/ (docs/development.md,
"Measured against Kruise"; bench/kruise.py says what each form holds):

    hack/cluster.sh up && hack/build-image.sh --no-verify && hack/cluster.sh load-image
    python bench/vs_kruise.py                     # probemarker alone: case a, 3 runs
    python bench/vs_kruise.py --kruise v1.5.4=/k/1.5.4 --kruise 'v1.5.4+#2007=/k/2007' --runs 5 --json /tmp/vs.json
    python bench/vs_kruise.py --case c --kruise v1.5.4=/k/1.5.4   # pod churn
    python bench/vs_kruise.py --runs 1 --pods 5 --flips 5          # a quick look: no row is ranked

`--kruise LABEL=SOURCE` is repeatable, one table column a label. Every SOURCE is checked
before anything is installed. The columns: `neither` (the baseline: the same pods and
workload, no marker, neither system installed; not in case d, which has no CPU window),
each Kruise given, probemarker with its `api` and its `cri` exec backend (`--systems`).

The method (bench/vs_stats.py, pure and unit-tested; bench/README.md): `--runs N`
rounds (default 3; fewer for a look, and then no row is ranked), each measuring every
column once in an order rotated by one each round (round r starts at column r mod k),
each column's system alone on the node (probemarker removed for the others' runs; each
Kruise installed for its run and removed after it, whatever happened; `--keep-kruise`
installs the last one given again at the end). Every figure is the median and range
(min-max) over the runs; a row names the lowest column only when its range lies below
every other's, `tie` otherwise. The API server's CPU and the whole node's (/proc/stat)
are taken over each fixed workload window (the flips, the time at rest, the churn)
minus the same round's baseline run's rate over the window's length; each system's own CPU and
memory from its processes' cgroups (bench/vs_node.py; for Kruise its manager and its
daemon), its writes and requests from the audit log by its identities (for Kruise the
manager's and the daemon's ServiceAccounts). The delays are pooled over every run's
flips (p50 / p90 / p99 / max, nearest rank); a flip whose value the pod never changed to
before the next flip and within 10 s is missed, a row of its own (so is one whose pod
already showed its value: the flip before it was missed). A row is ranked only from
spreads of 3 runs or more.
The JSON (`--json`) is written after every run, with every run's raw figures. Exec
probes only: the output says HTTP probes were not run (vs_report.EXEC_ONLY).

Each run, in a namespace of its own, goes through its case's phases in this order:
- pods: `--pods` busybox pods (the case's number by default) and, but for the baseline,
  one marker, the same spec in `apps.kruise.io/v1alpha1` and `probemarker.io/v1alpha1`:
  exec `sh -c SCRIPT` in the pod, the case's period, timeout 1 s, thresholds 1, label
  `vs.bench/answer: yes|no` and the condition `vs.bench/answer`.
- start: from the marker's creation to 30 s after every pod is marked: the writes.
- flips (case a): the answer is a function of time: SCRIPT counts the moments in the
  pod's /tmp/flips (the node's uptime in centiseconds, which the host and every
  container read alike from /proc/uptime) that have passed, and succeeds when the count
  is even. Each pod gets `--flips` moments 4 to 8 s apart at any centisecond (one seeded
  schedule, the same for every column and run), so each flip happens at a known moment,
  at a uniform phase of each probe's period, and nothing runs on the node to cause it.
  The window: from the first flip to 6 s after the last. Delay = the first change to
  the new value the pod watch sees minus the flip's moment (to 10 ms). Writes per
  transition (pods,
  pods/status and NodePodProbes by the system's identities; Events apart; all of them
  in the window, and beyond the system's own rate at rest), requests by verb.
- quiet (a: 30 s; b: 10 minutes, rates per hour): nothing flipping: writes, CPU at rest.
  (Quiet comes after the flips, not before: Kruise's daemon writes Events for its first
  results until client-go's spam filter stops it, about a minute, which is start's cost,
  not steady state's.)
- churn (c): a pod created every 3 s, each deleted 30 s after its create, until every
  one is gone and 30 s more: writes, Events and CPU per pod lifecycle.
- restart (a, d): the system's node agent's pod deleted (kruise-daemon; the probemarker
  pod): from the delete to 20 s after its replacement is Ready, its writes (pods and
  NodePodProbes, the pods' apart) and the label/condition flaps.
- delete (a): two more markers `way` and `gateway` on 3 of the pods (Kruise issue
  #2508), then the main marker and `way` deleted together; after 10 s gateway's answer
  is flipped on those pods: does its label follow? 45 s after the delete (probemarker
  keeps a deleted marker's marks 30 s by default): what is left of the main marker's
  and of `way`'s marks on the pods. Counts, not rates, so in the first round only
  (`--delete-every-round`: in each); a system that has not labelled the 3 pods for
  both markers within 60 s has that as its finding (`k/3 marked ...`), not the end of
  the bench.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import kruise
from bench.vs_node import Phase, cgroup_memory_mib
from bench.vs_plan import (
    Case,
    Column,
    case_of,
    churn_plan,
    marker_doc,
    parse_args,
    parse_systems,
    plan,
)
from bench.vs_report import ALONE, document, dumps, report
from bench.vs_stats import AGENTS, BASELINE, Run, Window, restart_figures, rounds
from bench.vs_watch import (
    KEY,
    condition_value,
    flaps,
    flip_delays,
    label_value,
    replacement_ready,
    schedule,
    sequences,
    uptime_cs,
)
from tests.cluster.install import STATE, Addon, Cluster
from tests.cluster.kube import Kubectl, Watch, busybox_pod, create_namespace, wait_for
from tests.podfields import condition, labels_of

NAMES_LABEL = "vs.bench/names"  # the pods the way/gateway markers select
SCRIPT = (
    # the kernel's uptime in centiseconds (the node's clock, the same in every container
    # and on the host), then how many of the flips in /tmp/flips have passed
    "read up _ </proc/uptime; now=${up%.*}${up#*.}; n=0; for t in $(cat /tmp/flips 2>/dev/null); "
    'do [ "$now" -ge "$t" ] && n=$((n+1)); done; [ $((n % 2)) -eq 0 ]'
)
QUIET_SECONDS = 30
SETTLE_SECONDS = 6
RESTART_WATCH_SECONDS = 20
DELETE_WAIT_SECONDS = 45


# -- the run ----------------------------------------------------------------------------


def _exec(kubectl: Kubectl, namespace: str, pod: str, script: str) -> None:
    kubectl.run("-n", namespace, "exec", pod, "--", "sh", "-c", script, timeout=30)


def _parallel(calls: Iterable[Callable[[], None]]) -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        for future in [pool.submit(call) for call in calls]:
            future.result()


@contextmanager
def _watch(kubectl: Kubectl, namespace: str) -> Iterator[Watch]:
    with Watch(kubectl, f"/api/v1/namespaces/{namespace}/pods") as watch:
        yield watch


def measure(
    cluster: Cluster, addon: Addon, column: Column, case: Case, args: argparse.Namespace, *,
    round_: int, position: int,
) -> Run:  # fmt: skip
    """One run of one column in `case`, its system installed alone (`_run_column`)."""
    kubectl = cluster.kubectl
    system, namespace = column.system, column.namespace
    create_namespace(kubectl, namespace, fresh=True)
    names = [f"p{i:03d}" for i in range(args.pods)]
    pods = [
        busybox_pod(pod, namespace, script="touch /tmp/gw && exec sleep 2147483647",
                    labels={"app": "vs", **({NAMES_LABEL: "yes"} if i < 3 else {})})
        for i, pod in enumerate(names)
    ]  # fmt: skip
    if pods:
        kubectl.apply(*pods)
        _all_running(kubectl, namespace, len(names))
    phases: dict[str, Any] = {}
    windows: dict[str, Any] = {"flips": None, "quiet": None}
    try:
        with _watch(kubectl, namespace) as watch:
            if system != BASELINE:  # start: from the marker's creation to 30 s after all marked
                phases.update(_start(cluster, system, namespace, case, bool(names)))
            if "flips" in case.phases:
                windows["flips"], flips_at = _flips(cluster, column, names, args)
            memory = cgroup_memory_mib(system) if AGENTS[system] and names else None
            if "quiet" in case.phases:  # nothing flipping
                with Phase(cluster, system) as quiet:
                    time.sleep(case.quiet_seconds)
                windows["quiet"] = quiet.window([namespace])
            if "churn" in case.phases:
                windows["churn"], windows["lifecycles"] = _churn(cluster, column, case)
                memory = cgroup_memory_mib(system) if AGENTS[system] else None
            if "flips" in case.phases and system != BASELINE:
                windows.update(flip_delays(list(watch.seen), flips_at))
            if "restart" in case.phases and system != BASELINE:
                phases.update(_restart(cluster, addon, watch, system, namespace))
            # Counts, not rates: the first round's say it (`--delete-every-round`: each).
            if ("delete" in case.phases and system != BASELINE
                    and (round_ == 0 or args.delete_every_round)):  # fmt: skip
                phases.update(_delete(cluster, watch, system, namespace, names, case.period))
    finally:  # gone before the next column starts: its pods' teardown is not the next one's load
        kubectl.run("delete", "namespace", namespace, "--wait=true", "--timeout=120s",
                    timeout=130, check=False)  # fmt: skip
    transitions = len(names) * args.flips if "flips" in case.phases else 0
    return Run(column.name, round_, position, transitions=transitions, memory_mib=memory,
               phases=phases, **windows)  # fmt: skip


def _start(
    cluster: Cluster, system: str, namespace: str, case: Case, has_pods: bool
) -> dict[str, Any]:
    """The marker created; its writes until 30 s after every pod is marked."""
    kubectl = cluster.kubectl
    with Phase(cluster, system) as start:
        kubectl.apply(marker_doc(system, "vs", namespace, selector={"app": "vs"},
                                 command=["sh", "-c", SCRIPT], key=KEY, condition_type=KEY,
                                 period=case.period))  # fmt: skip
        if has_pods:
            _all_marked(kubectl, namespace, "yes", timeout=180)
        time.sleep(QUIET_SECONDS)
    started = start.requests([namespace])
    out: dict[str, Any] = {
        "start_writes": started.all_writes(),
        "start_writes_by_resource": started.writes,
    }
    if system == "probemarker":  # what its log says it did meanwhile
        out["start_daemon_log"] = _log_events(kubectl, start.seconds)
    return out


def _churn(cluster: Cluster, column: Column, case: Case) -> tuple[Window, int]:
    """Pods created and deleted as `churn_plan` says, then every one gone and 30 s more:
    the window, and how many pods lived in it."""
    kubectl, namespace = cluster.kubectl, column.namespace
    steps = churn_plan(case.churn_pods, case.churn_interval, case.churn_lifetime)
    with Phase(cluster, column.system) as window:
        begun = time.monotonic()
        for at, action, name in steps:
            time.sleep(max(0.0, begun + at - time.monotonic()))
            if action == "create":
                kubectl.apply(busybox_pod(name, namespace, script="exec sleep 2147483647",
                                          labels={"app": "vs"}))  # fmt: skip
            else:
                kubectl.run("-n", namespace, "delete", "pod", name, "--wait=false")
        wait_for(
            lambda: kubectl.json("-n", namespace, "get", "pods")["items"],
            lambda items: not items, timeout=120, what=f"every churned pod in {namespace} gone",
        )  # fmt: skip
        time.sleep(QUIET_SECONDS)
    return window.window([namespace]), sum(1 for _, action, _ in steps if action == "create")


def _log_events(kubectl: Kubectl, seconds: float) -> dict[str, int]:
    """The probemarker daemon's log events of the last `seconds`, counted by name
    (probe.decided and write.patched are the expected ones)."""
    text = kubectl.run("-n", "probemarker-system", "logs", "ds/probemarker",
                       f"--since={int(seconds) + 1}s", timeout=30).stdout  # fmt: skip
    counts: dict[str, int] = {}
    for line in text.splitlines():
        try:
            name = str(json.loads(line).get("event"))
        except (ValueError, AttributeError):
            continue
        counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items()))


def _all_running(kubectl: Kubectl, namespace: str, count: int) -> None:
    wait_for(
        lambda: kubectl.json("-n", namespace, "get", "pods", "-l", "app=vs")["items"],
        lambda items: (
            len(items) == count
            and all((condition(p, "ContainersReady") or {}).get("status") == "True" for p in items)
        ),
        timeout=180,
        what=f"{count} pods running in {namespace}",
    )


def _all_marked(kubectl: Kubectl, namespace: str, value: str, *, timeout: float) -> None:
    wait_for(
        lambda: kubectl.json("-n", namespace, "get", "pods", "-l", "app=vs")["items"],
        lambda items: bool(items)
        and all(label_value(p) == value and condition_value(p) == ("True" if value == "yes" else "False")
                for p in items),
        timeout=timeout,
        what=f"every pod in {namespace} marked {value}",
    )  # fmt: skip


def _uptime_and_monotonic() -> tuple[int, float]:
    """The node's uptime (centiseconds) and this process's monotonic clock, together."""
    before = time.monotonic()
    up = uptime_cs(Path("/proc/uptime").read_text())
    return up, (before + time.monotonic()) / 2


def _flips(
    cluster: Cluster, column: Column, names: Sequence[str], args: argparse.Namespace
) -> tuple[Window, dict[str, list[float]]]:
    """The flips' window (from the first flip to SETTLE_SECONDS after the last: the
    same length for every column) and each pod's flips on this process's clock."""
    kubectl, namespace = cluster.kubectl, column.namespace
    plan = schedule(args.flips, args.seed)
    up, mono = _uptime_and_monotonic()
    base = up + (10 + len(names) // 2) * 100  # the files written first
    _parallel(
        partial(_exec, kubectl, namespace, pod,
                f"echo {' '.join(str(base + t) for t in plan[i])} > /tmp/flips")
        for i, pod in enumerate(names)
    )  # fmt: skip

    def monotonic(cs: int) -> float:  # an uptime in centiseconds on this process's clock
        return mono + (cs - up) / 100

    wait = monotonic(base) - time.monotonic()
    if wait < 0:
        raise SystemExit(
            f"{namespace}: writing the flip files took past the first flip ({-wait:.1f} s)"
        )
    time.sleep(wait)
    last = monotonic(base + max(plan[i][-1] for i in range(len(names))))
    with Phase(cluster, column.system) as window:
        time.sleep(max(0.0, last + SETTLE_SECONDS - time.monotonic()))
    flips_at = {pod: [monotonic(base + t) for t in plan[i]] for i, pod in enumerate(names)}
    return window.window([namespace]), flips_at


def _restart(
    cluster: Cluster, addon: Addon, watch: Watch, system: str, namespace: str
) -> dict[str, Any]:
    kubectl = cluster.kubectl
    with Phase(cluster, system) as phase:
        since = time.monotonic()
        if system == "kruise":  # as Addon.replace_daemon_pod does probemarker's
            listed = partial(kubectl.json, "-n", kruise.NAMESPACE, "get", "pods",
                             "-l", "control-plane=daemon")  # fmt: skip
            old = listed()["items"][0]["metadata"]
            kubectl.run("-n", kruise.NAMESPACE, "delete", "pod", old["name"], "--wait=true")
            # rollout status can answer before the DaemonSet has seen its pod go: the
            # window starts once the replacement is Ready
            wait_for(lambda: listed()["items"], partial(replacement_ready, old_uid=old["uid"]),
                     timeout=120, what="the replacement kruise-daemon pod Ready")  # fmt: skip
        else:
            addon.replace_daemon_pod()
        time.sleep(RESTART_WATCH_SECONDS)
    requests = phase.requests([namespace])
    labels, conditions = (
        sequences(watch.seen, since, what) for what in (label_value, condition_value)
    )
    flapped = sorted(
        {pod for seen in (labels, conditions) for pod, values in seen.items() if len(values) > 1}
    )
    return {
        **restart_figures(requests.writes),
        "restart_flaps": flaps(watch.seen, since, label_value)
        + flaps(watch.seen, since, condition_value),
        "restart_flapped": {
            "pods": len(flapped),
            "label flaps": flaps(watch.seen, since, label_value),
            "condition flaps": flaps(watch.seen, since, condition_value),
        },
        "restart_flap_example": {
            pod: {"label": labels[pod], "condition": conditions.get(pod)} for pod in flapped[:1]
        },
    }


def _left(kubectl: Kubectl, namespace: str, key: str, names: Sequence[str]) -> dict[str, int]:
    items = [p for p in kubectl.json("-n", namespace, "get", "pods")["items"]
             if p["metadata"]["name"] in names]  # fmt: skip
    return {
        "labels": sum(1 for p in items if key in labels_of(p)),
        "conditions": sum(1 for p in items if condition(p, key) is not None),
        "pods": len(items),
    }


DELETE_MARKS_SECONDS = 60  # for the way and gateway markers' first labels


def _delete(
    cluster: Cluster, watch: Watch, system: str, namespace: str, names: Sequence[str],
    period: int,
) -> dict[str, Any]:  # fmt: skip
    kubectl = cluster.kubectl
    chosen = list(names[:3])
    for marker, key in (("way", "vs.bench/way"), ("gateway", "vs.bench/gateway")):
        kubectl.apply(marker_doc(system, marker, namespace, selector={NAMES_LABEL: "yes"},
                                 command=["test", "-e", "/tmp/gw"], key=key, condition_type=None,
                                 period=period))  # fmt: skip
    try:
        wait_for(
            lambda: kubectl.json("-n", namespace, "get", "pods", "-l", NAMES_LABEL)["items"],
            lambda items: all(labels_of(p).get("vs.bench/way") == "yes"
                              and labels_of(p).get("vs.bench/gateway") == "yes" for p in items),
            timeout=DELETE_MARKS_SECONDS, what=f"{namespace}: the way and gateway markers' labels",
        )  # fmt: skip
    except AssertionError:  # a finding of this run, not the bench's end
        items = kubectl.json("-n", namespace, "get", "pods", "-l", NAMES_LABEL)["items"]
        marked = sum(1 for p in items if labels_of(p).get("vs.bench/way") == "yes"
                     and labels_of(p).get("vs.bench/gateway") == "yes")  # fmt: skip
        unmarked = (
            f"{marked}/{len(chosen)} marked by way and gateway within {DELETE_MARKS_SECONDS} s"
        )
        return {
            "left_after_delete": unmarked,
            "way_left_after_delete": unmarked,
            "gateway_followed_after_way_deleted": unmarked,
        }
    group = (
        "podprobemarkers.apps.kruise.io" if system == "kruise" else "podprobemarkers.probemarker.io"
    )
    deleted = time.monotonic()
    kubectl.run("-n", namespace, "delete", group, "vs", "way", "--wait=true", timeout=60)
    time.sleep(10)
    _parallel(partial(_exec, kubectl, namespace, pod, "rm -f /tmp/gw") for pod in chosen)
    with suppress(AssertionError):  # counted below, whatever it is
        wait_for(
            lambda: kubectl.json("-n", namespace, "get", "pods", "-l", NAMES_LABEL)["items"],
            lambda items: all(labels_of(p).get("vs.bench/gateway") == "no" for p in items),
            timeout=15, what="gateway's label following its answer",
        )  # fmt: skip
    items = kubectl.json("-n", namespace, "get", "pods", "-l", NAMES_LABEL)["items"]
    followed = sum(1 for p in items if labels_of(p).get("vs.bench/gateway") == "no")
    time.sleep(max(0.0, deleted + DELETE_WAIT_SECONDS - time.monotonic()))
    return {
        "left_after_delete": _left(kubectl, namespace, KEY, names),
        "way_left_after_delete": _left(kubectl, namespace, "vs.bench/way", chosen),
        "gateway_followed_after_way_deleted": f"{followed}/{len(chosen)}",
    }


# -- the rounds ------------------------------------------------------------------------------


def _probemarker_removed(addon: Addon) -> None:
    """probemarker's overlay deleted (its namespace, CRD, RBAC and policy gone)."""
    if addon.backend:
        addon.cluster.kubectl.run("delete", "-k", str(addon.folder), "--ignore-not-found",
                                  "--wait=true", timeout=240)  # fmt: skip
        addon.backend = ""


def _run_column(
    cluster: Cluster, addon: Addon, column: Column, case: Case, args: argparse.Namespace, *,
    round_: int, position: int, ran: dict[str, dict[str, Any]],
) -> Run:  # fmt: skip
    """One run of `column` with its system alone on the node: probemarker's backend
    installed, or probemarker removed and the Kruise installed for the run and removed
    after it, or nothing for the baseline."""
    if column.system == "probemarker":
        addon.use(column.backend)
        return measure(cluster, addon, column, case, args, round_=round_, position=position)
    _probemarker_removed(addon)
    if column.source is None:
        return measure(cluster, addon, column, case, args, round_=round_, position=position)
    try:
        identity = kruise.install(cluster, column.source)
        first = ran.setdefault(column.name, identity)
        # a folder's image is built again each round (another image ID, the same programs)
        same = ("manager_build",) if column.source.built else ("image_id", "manager_build")
        if any(identity.get(key) != first.get(key) for key in same):
            raise SystemExit(f"{column.name}: another Kruise than in the first round ran")
        return measure(cluster, addon, column, case, args, round_=round_, position=position)
    finally:
        kruise.remove(cluster)


def _document(
    args: argparse.Namespace, versions: dict[str, Any], ran: dict[str, dict[str, Any]],
    columns: Sequence[Column], runs: Sequence[Run],
) -> dict[str, Any]:  # fmt: skip
    return document(
        args,
        server=versions.get("serverVersion", {}).get("gitVersion", "?"),
        ran=[ran[c.name] for c in columns if c.name in ran],
        columns=[c.name for c in columns],
        runs=runs,
    )


def main() -> None:
    args = parse_args(doc=__doc__ or "")
    case = case_of(args)
    sources = kruise.parse_sources(args.kruise)
    for source in sources:
        kruise.check_source(source)
    columns = plan(sources, parse_systems(args.systems), baseline=case.baseline)
    if not columns:
        raise SystemExit("nothing to measure: --systems '' and no --kruise LABEL=SOURCE")
    cluster = Cluster.at(STATE)
    if (other := kruise.installed(cluster)) is not None:
        raise SystemExit(
            f"Kruise {other['label']} is installed (an earlier --keep-kruise?): "
            "python bench/kruise.py remove removes it"
        )
    if any(not source.built for source in sources):
        listing = kruise.node_images(cluster)
        for source in sources:
            kruise.check_loaded(source, listing)
    given = ", ".join(f"Kruise {source.label}" for source in sources)
    print(f"== probemarker and {given}" if sources else f"== {ALONE}", file=sys.stderr)
    print(f"== case {case.name}: {case.title}", file=sys.stderr)
    versions = cluster.kubectl.json("version")
    addon = Addon(cluster, Path(tempfile.mkdtemp()))
    ran: dict[str, dict[str, Any]] = {}
    runs: list[Run] = []
    try:
        addon.use("api")  # a known state: the overlay in addon.folder installed
        for round_, ordered in enumerate(rounds(columns, args.runs)):
            for position, column in enumerate(ordered):
                print(f"== round {round_ + 1}/{args.runs}: {column.name}", file=sys.stderr)
                run = _run_column(cluster, addon, column, case, args, round_=round_,
                                  position=position, ran=ran)  # fmt: skip
                runs.append(run)
                if args.json:  # so far: a run that stops later keeps what it measured
                    args.json.write_text(dumps(_document(args, versions, ran, columns, runs)))
    finally:
        addon.use("api")
    if args.keep_kruise and sources:
        kruise.install(cluster, sources[-1])
        print(f"kept: Kruise {sources[-1].label} (python bench/kruise.py remove removes it)",
              file=sys.stderr)  # fmt: skip
    doc = _document(args, versions, ran, columns, runs)
    print(report(doc))
    if args.json:
        args.json.write_text(dumps(doc))


if __name__ == "__main__":
    main()
