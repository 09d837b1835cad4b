"""probemarker beside OpenKruise's PodProbeMarker on the project's real node
(hack/cluster.sh): the same marker, the same pods, the same flips, measured in one run,
for each Kruise release the user brings (none: probemarker alone).

Needs root, the cluster up and probemarker's image loaded, and for each Kruise either its
released manager image loaded into the node's containerd and the release's config/, or a
folder of its two programs and config/ (docs/development.md, "Measured against Kruise";
bench/kruise.py says what each form holds):

    hack/cluster.sh up && hack/build-image.sh --no-verify && hack/cluster.sh load-image
    python bench/vs_kruise.py                     # probemarker alone: 20 pods, 20 flips a pod
    python bench/vs_kruise.py --kruise v1.5.4=image:docker.io/openkruise/kruise-manager:v1.5.4,config=/src/kruise-1.5.4/config
    python bench/vs_kruise.py --kruise v1.5.4=/k/1.5.4 --kruise 'v1.5.4+#2007=/k/2007' --pods 5 --flips 5 --json /tmp/vs.json

`--kruise LABEL=SOURCE` is repeatable, one table column a label. Every SOURCE is checked
before anything is installed. probemarker is installed first (tests/cluster/install.py's
overlay) and measured with its `api` exec backend, then its `cri` backend (`--systems`),
with no Kruise installed; then each Kruise in turn is installed (bench/kruise.py: image,
config/default, webhooks), measured with probemarker installed and idle (`api`
backend), and removed, whatever happened (two releases share their CRDs and namespace:
one at a time; `--keep-kruise` keeps the last one). The output and the JSON say which Kruise ran: its
label and SOURCE, the image and image ID its manager ran, and the version the manager's
program records, when it records one. Each system, in a namespace of its own:

- `--pods` busybox pods and one marker, the same spec in `apps.kruise.io/v1alpha1` and
  `probemarker.io/v1alpha1`: exec `sh -c SCRIPT` in the pod, period 1 s, timeout 1 s,
  thresholds 1, label `vs.bench/answer: yes|no` and the condition `vs.bench/answer`.
  probemarker stays installed and idle (no marker of its own) while a Kruise is
  measured, so the API server's figures and the audit log's counts of one system are
  not mixed with the other's probing.
- The answer is a function of time: SCRIPT counts the moments in the pod's /tmp/flips
  (the node's uptime in centiseconds, which the host and every container read alike
  from /proc/uptime) that have passed, and succeeds when the count is even. Each pod
  gets `--flips` moments 4 to 8 s apart at any centisecond (one seeded schedule, the
  same for every system), so each flip happens at a known moment, at a uniform phase of
  each probe's period, and nothing runs on the node to cause it. Delay = the pod
  watch's event with the new value minus the flip's moment (to 10 ms).
- start: from the marker's creation to 30 s after every pod is marked: the writes.
- flips: the delays, each system's CPU (cgroup cpuacct) and memory (cgroup working set:
  usage minus inactive file) on the node.
- quiet: the 30 s after the flips, nothing flipping: the writes a minute, the API
  server's CPU rate, each system's CPU. Then, over the quiet rates, what the flips
  cost: the API server's CPU per transition. And in the flips' window: writes per
  transition (pods, pods/status and NodePodProbes, by the system's ServiceAccounts in
  the API server's audit log; Events apart; all of them, those the system makes
  whether anything changes or not included), of which to the pods, all requests by
  verb. (Quiet comes after the flips, not before:
  Kruise's daemon writes Events for its first results until client-go's spam filter
  stops it, about a minute, which is start's cost, not steady state's.)
- restart: the system's node agent's pod deleted (kruise-daemon; the probemarker pod):
  its writes and the label/condition flaps in the 20 s after its replacement is Ready.
- delete: two more markers `way` and `gateway` on 3 of the pods (Kruise issue #2508),
  then the main marker and `way` deleted together; after 10 s gateway's answer is
  flipped on those pods: does its label follow? 45 s after the delete (probemarker keeps
  a deleted marker's marks 30 s by default): what is left of the main marker's and of
  `way`'s marks on the pods.
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import kruise
from bench.cri_exec import stat_cpu
from probemarker import __version__
from tests.cluster.install import STATE, Addon, Cluster
from tests.cluster.kube import (
    DAEMON_USER,
    Kubectl,
    Watch,
    busybox_pod,
    create_namespace,
    wait_for,
)
from tests.podfields import condition, labels_of

KEY = "vs.bench/answer"
NAMES_LABEL = "vs.bench/names"  # the pods the way/gateway markers select
SCRIPT = (
    # the kernel's uptime in centiseconds (the node's clock, the same in every container
    # and on the host), then how many of the flips in /tmp/flips have passed
    "read up _ </proc/uptime; now=${up%.*}${up#*.}; n=0; for t in $(cat /tmp/flips 2>/dev/null); "
    'do [ "$now" -ge "$t" ] && n=$((n+1)); done; [ $((n % 2)) -eq 0 ]'
)
PROBEMARKER_SYSTEMS = ("probemarker-api", "probemarker-cri")
DEFAULT_SYSTEMS = ",".join(PROBEMARKER_SYSTEMS)
ALONE = "no Kruise given: probemarker alone"
IDENTITIES = {
    "kruise": (kruise.MANAGER_USER, kruise.DAEMON_USER),
    "probemarker": (DAEMON_USER,),
}
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
NOT_STORED = frozenset({"exec", "attach", "portforward", "proxy"})  # requests, not writes
OBJECT_RESOURCES = frozenset({"pods", "nodepodprobes"})
QUIET_SECONDS = 30
SETTLE_SECONDS = 6
RESTART_WATCH_SECONDS = 20
DELETE_WAIT_SECONDS = 45


# -- pure: the audit log, statistics, what the watch saw -----------------------------------


@dataclass
class Requests:
    """What one set of identities asked of the API server in a window."""

    writes: dict[str, int] = field(default_factory=dict)  # resource[/subresource] -> count
    by_verb: dict[str, int] = field(default_factory=dict)

    def object_writes(self) -> int:
        return sum(n for key, n in self.writes.items() if key.split("/")[0] in OBJECT_RESOURCES)

    def pod_writes(self) -> int:
        return sum(n for key, n in self.writes.items() if key.split("/")[0] == "pods")

    def event_writes(self) -> int:
        return sum(n for key, n in self.writes.items() if key.split("/")[0] == "events")

    def all_writes(self) -> int:
        return sum(self.writes.values())


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


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile (q in 0..100) of `values` (not empty)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n * q / 100), at least 1
    return ordered[int(rank) - 1]


def summary_ms(seconds: Sequence[float]) -> dict[str, float] | None:
    if not seconds:
        return None
    ms = [s * 1000 for s in seconds]
    return {
        "median": round(statistics.median(ms), 1),
        "p90": round(percentile(ms, 90), 1),
        "max": round(max(ms), 1),
    }


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


def _uptime_and_monotonic() -> tuple[int, float]:
    """The node's uptime (centiseconds) and this process's monotonic clock, together."""
    before = time.monotonic()
    up = uptime_cs(Path("/proc/uptime").read_text())
    return up, (before + time.monotonic()) / 2


def answer_after(flip_index: int) -> str:
    """The label value once flip number `flip_index` (0-based) has happened."""
    return "no" if flip_index % 2 == 0 else "yes"


def delays(
    seen: Sequence[tuple[float, Mapping[str, Any]]],
    pod: str,
    flips_at: Sequence[float],
    value: Callable[[Mapping[str, Any]], str | None],
    expected: Callable[[int], str],
) -> tuple[list[float], int]:
    """For each flip of `pod` (monotonic times), the delay to the first object seen
    after it with the value that flip brings; (delays, flips never seen). A flip counts
    as seen only before the next flip."""
    mine = [(at, obj) for at, obj in seen if obj["metadata"]["name"] == pod]
    found, missed = [], 0
    for index, flip in enumerate(flips_at):
        until = flips_at[index + 1] if index + 1 < len(flips_at) else float("inf")
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


def label_value(obj: Mapping[str, Any]) -> str | None:
    return labels_of(dict(obj)).get(KEY)


def condition_value(obj: Mapping[str, Any]) -> str | None:
    found = condition(dict(obj), KEY)
    return None if found is None else str(found.get("status"))


def condition_expected(index: int) -> str:
    return "False" if index % 2 == 0 else "True"


def working_set_mib(usage: int, memory_stat: str) -> float:
    """The kubelet's working set: usage minus inactive file pages (cgroup v1 names)."""
    inactive = 0
    for line in memory_stat.splitlines():
        name, _, number = line.partition(" ")
        if name == "total_inactive_file":
            inactive = int(number)
    return max(0, usage - inactive) / 2**20


# -- the node: processes and cgroups ---------------------------------------------------


AGENTS = {
    "kruise": (("/manager",), ("/kruise-daemon",)),
    "probemarker": (("/opt/probemarker/bin/python3", "/opt/probemarker/bin/probemarker", "run"),),
}


def _cgroup(pid: int, controller: str) -> Path:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return Path("/sys/fs/cgroup") / controllers / path.lstrip("/")
    raise SystemExit(f"pid {pid}: no {controller} cgroup")


def _groups(system: str) -> list[int]:
    pids = []
    for argv0 in AGENTS[system]:
        found = kruise.pids_of(argv0)
        if len(found) != 1:
            raise SystemExit(
                f"{system}: {len(found)} processes {' '.join(argv0)} on the node, expected 1"
            )
        pids.append(found[0])
    return pids


def cgroup_cpu_seconds(system: str) -> float:
    return sum(
        int((_cgroup(pid, "cpuacct") / "cpuacct.usage").read_text()) / 1e9
        for pid in _groups(system)
    )


def cgroup_memory_mib(system: str) -> float:
    total = 0.0
    for pid in _groups(system):
        group = _cgroup(pid, "memory")
        total += working_set_mib(
            int((group / "memory.usage_in_bytes").read_text()), (group / "memory.stat").read_text()
        )
    return total


def apiserver_cpu_seconds(state: Path) -> float:
    pid = int((state / "apiserver.pid").read_text())
    return stat_cpu(Path(f"/proc/{pid}/stat").read_text(), children=False)


# -- the run ----------------------------------------------------------------------------


def marker_doc(system: str, name: str, namespace: str, *, selector: Mapping[str, str],
               command: Sequence[str], key: str, condition_type: str | None) -> dict[str, Any]:  # fmt: skip
    probe: dict[str, Any] = {
        "name": "answer",
        "containerName": "main",
        "probe": {
            "exec": {"command": list(command)},
            "periodSeconds": 1, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 1,
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


@dataclass
class Phase:
    """A window: the audit log's mark and the CPU counters at its start."""

    cluster: Cluster
    system: str
    started: float = 0.0
    mark: int = 0
    apiserver: float = 0.0
    cpu: float = 0.0
    seconds: float = 0.0  # the rest is set when the window ends
    apiserver_used: float = 0.0
    cpu_used: float = 0.0
    end_mark: int = 0

    def __enter__(self) -> Phase:
        self.mark = self.cluster.audit.mark()
        self.apiserver = apiserver_cpu_seconds(self.cluster.state)
        self.cpu = cgroup_cpu_seconds(self.system)
        self.started = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.monotonic() - self.started
        self.apiserver_used = apiserver_cpu_seconds(self.cluster.state) - self.apiserver
        self.cpu_used = cgroup_cpu_seconds(self.system) - self.cpu
        self.end_mark = self.cluster.audit.mark()

    def requests(self, namespaces: Sequence[str] = ()) -> Requests:
        """The system's requests in the window (the audit log between the two marks)."""
        events = self.cluster.audit.events(self.mark, until=self.end_mark)
        return count_requests(events, IDENTITIES[self.system], namespaces=namespaces)


@dataclass(frozen=True)
class Column:
    """One system measured: a column of the table, a key of the JSON's results."""

    name: str  # "kruise LABEL", "probemarker-api", "probemarker-cri"
    system: str  # "kruise" or "probemarker": whose identities, processes and API group
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


def plan(sources: Sequence[kruise.Source], systems: Sequence[str]) -> list[Column]:
    """The columns in the table's order: each Kruise as given, then probemarker's."""
    out = [
        Column(f"kruise {source.label}", "kruise", f"vs-kruise-{index}", source=source)
        for index, source in enumerate(sources, 1)
    ]
    for name in systems:
        backend = name.removeprefix("probemarker-")
        out.append(Column(name, "probemarker", f"vs-probemarker-{backend}", backend=backend))
    return out


def measure_order(columns: Sequence[Column]) -> list[Column]:
    """probemarker's first, with no Kruise installed; then each Kruise in turn (installed,
    measured, removed), so that the last can stay (--keep-kruise) with nothing after it."""
    return sorted(columns, key=lambda column: column.system == "kruise")


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
    cluster: Cluster, addon: Addon, column: Column, args: argparse.Namespace
) -> dict[str, Any]:
    kubectl = cluster.kubectl
    system, namespace = column.system, column.namespace
    if system == "probemarker":
        addon.use(column.backend)
    create_namespace(kubectl, namespace, fresh=True)
    names = [f"p{i:03d}" for i in range(args.pods)]
    pods = [
        busybox_pod(pod, namespace, script="touch /tmp/gw && exec sleep 2147483647",
                    labels={"app": "vs", **({NAMES_LABEL: "yes"} if i < 3 else {})})
        for i, pod in enumerate(names)
    ]  # fmt: skip
    kubectl.apply(*pods)
    _all_running(kubectl, namespace, len(names))
    out: dict[str, Any] = {}
    try:
        with _watch(kubectl, namespace) as watch:
            # start: from the marker's creation to 30 s after every pod is marked
            with Phase(cluster, system) as start:
                kubectl.apply(marker_doc(system, "vs", namespace, selector={"app": "vs"},
                                         command=["sh", "-c", SCRIPT], key=KEY, condition_type=KEY))  # fmt: skip
                _all_marked(kubectl, namespace, "yes", timeout=180)
                time.sleep(QUIET_SECONDS)
            started = start.requests([namespace])
            out["start_writes"] = started.all_writes()
            out["start_writes_by_resource"] = started.writes
            if system == "probemarker":  # what its log says it did meanwhile
                out["start_daemon_log"] = _log_events(kubectl, start.seconds)
            round_, flipped = _flips(cluster, watch, system, namespace, names, args)
            # quiet: after the flips, nothing flipping, the rate each figure is taken over
            with Phase(cluster, system) as quiet:
                time.sleep(QUIET_SECONDS)
            steady = quiet.requests([namespace])
            out["steady_writes_per_min"] = round(steady.all_writes() * 60 / quiet.seconds, 1)
            out["steady_writes_by_resource"] = steady.writes
            out["apiserver_cpu_mcores_steady"] = round(
                quiet.apiserver_used / quiet.seconds * 1000, 1
            )
            out["cpu_mcores_steady"] = round(quiet.cpu_used / quiet.seconds * 1000, 1)
            out.update(flipped)
            out.update(_per_transition(round_, quiet, int(flipped["transitions"]), namespace))
            out.update(_restart(cluster, addon, watch, system, namespace))
            out.update(_delete(cluster, watch, system, namespace, names))
    finally:  # gone before the next system starts: its pods' teardown is not the next one's load
        kubectl.run(
            "delete",
            "namespace",
            namespace,
            "--wait=true",
            "--timeout=120s",
            timeout=130,
            check=False,
        )
    return out


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


def _flips(
    cluster: Cluster,
    watch: Watch,
    system: str,
    namespace: str,
    names: Sequence[str],
    args: argparse.Namespace,
) -> tuple[Phase, dict[str, Any]]:
    kubectl = cluster.kubectl
    plan = schedule(args.flips, args.seed)
    up, mono = _uptime_and_monotonic()
    base = up + (10 + len(names) // 2) * 100  # the files written first
    _parallel(
        (lambda pod=pod, i=i: _exec(kubectl, namespace, pod,
                                    f"echo {' '.join(str(base + t) for t in plan[i])} > /tmp/flips"))
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
    with Phase(cluster, system) as round_:
        time.sleep(max(0.0, last + SETTLE_SECONDS - time.monotonic()))
    memory = cgroup_memory_mib(system)
    labels, conditions, missed = [], [], 0
    seen = list(watch.seen)
    for i, pod in enumerate(names):
        at = [monotonic(base + t) for t in plan[i]]
        found, lost = delays(seen, pod, at, label_value, answer_after)
        labels += found
        missed += lost
        found, lost = delays(seen, pod, at, condition_value, condition_expected)
        conditions += found
        missed += lost
    return round_, {
        "transitions": len(names) * args.flips,
        "missed": missed,
        "latency_ms": summary_ms(labels),
        "condition_latency_ms": summary_ms(conditions),
        "cpu_mcores": round(round_.cpu_used / round_.seconds * 1000, 1),
        "memory_mib": round(memory, 1),
    }


def _per_transition(
    round_: Phase, quiet: Phase, transitions: int, namespace: str
) -> dict[str, Any]:
    """The flips' window over the quiet one's rates: what the transitions cost."""
    requests = round_.requests([namespace])
    apiserver = round_.apiserver_used - quiet.apiserver_used / quiet.seconds * round_.seconds
    return {
        # everything written in the window: Kruise's NodePodProbe status is rewritten
        # whether anything changes or not (steady_writes_by_resource shows how often)
        "writes_per_transition": round(requests.object_writes() / transitions, 2),
        "pod_writes_per_transition": round(requests.pod_writes() / transitions, 2),
        "events_per_transition": round(requests.event_writes() / transitions, 2),
        "writes_by_resource": requests.writes,
        "requests_per_min_by_verb": {
            verb: round(n * 60 / round_.seconds, 1) for verb, n in sorted(requests.by_verb.items())
        },
        "apiserver_cpu_ms_per_transition": round(apiserver * 1000 / transitions, 2),
    }


def _restart(
    cluster: Cluster, addon: Addon, watch: Watch, system: str, namespace: str
) -> dict[str, Any]:
    kubectl = cluster.kubectl
    with Phase(cluster, system) as phase:
        since = time.monotonic()
        if system == "kruise":
            old = kubectl.json("-n", kruise.NAMESPACE, "get", "pods", "-l", "control-plane=daemon")[
                "items"
            ]
            kubectl.run(
                "-n", kruise.NAMESPACE, "delete", "pod", old[0]["metadata"]["name"], "--wait=true"
            )
            kubectl.run("-n", kruise.NAMESPACE, "rollout", "status", f"daemonset/{kruise.DAEMON}",
                        "--timeout=120s", timeout=130)  # fmt: skip
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
        "restart_writes": requests.pod_writes(),
        "restart_writes_by_resource": requests.writes,
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


def _delete(
    cluster: Cluster, watch: Watch, system: str, namespace: str, names: Sequence[str]
) -> dict[str, Any]:
    kubectl = cluster.kubectl
    chosen = list(names[:3])
    for marker, key in (("way", "vs.bench/way"), ("gateway", "vs.bench/gateway")):
        kubectl.apply(marker_doc(system, marker, namespace, selector={NAMES_LABEL: "yes"},
                                 command=["test", "-e", "/tmp/gw"], key=key, condition_type=None))  # fmt: skip
    wait_for(
        lambda: kubectl.json("-n", namespace, "get", "pods", "-l", NAMES_LABEL)["items"],
        lambda items: all(labels_of(p).get("vs.bench/way") == "yes"
                          and labels_of(p).get("vs.bench/gateway") == "yes" for p in items),
        timeout=60, what=f"{namespace}: the way and gateway markers' labels",
    )  # fmt: skip
    group = (
        "podprobemarkers.apps.kruise.io" if system == "kruise" else "podprobemarkers.probemarker.io"
    )
    deleted = time.monotonic()
    kubectl.run("-n", namespace, "delete", group, "vs", "way", "--wait=true", timeout=60)
    time.sleep(10)
    _parallel((lambda pod=pod: _exec(kubectl, namespace, pod, "rm -f /tmp/gw")) for pod in chosen)
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


# -- output -----------------------------------------------------------------------------


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict) and set(value) == {"median", "p90", "max"}:
        return f"{value['median']:.0f} / {value['p90']:.0f} / {value['max']:.0f}"
    if isinstance(value, dict) and set(value) == {"labels", "conditions", "pods"}:
        return f"{value['labels']} labels, {value['conditions']} conditions of {value['pods']} pods"
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items()) or "none"
    return str(value)


ROWS = (
    ("latency_ms", "flip -> label, ms (median / p90 / max)"),
    ("condition_latency_ms", "flip -> condition, ms (median / p90 / max)"),
    ("missed", "flips never seen on the pod"),
    ("writes_per_transition", "writes per transition (pods, NodePodProbes; all in the window)"),
    ("pod_writes_per_transition", "  of which to the pods"),
    ("events_per_transition", "Events per transition"),
    ("writes_by_resource", "writes during the flips, by resource"),
    ("start_writes", "writes from the marker's creation to 30 s after all are marked"),
    ("start_writes_by_resource", "  of which, by resource"),
    ("start_daemon_log", "  the daemon's log then, by event"),
    ("steady_writes_per_min", "writes a minute, nothing flipping"),
    ("steady_writes_by_resource", "  of which, by resource (30 s)"),
    ("requests_per_min_by_verb", "API requests a minute during the flips, by verb"),
    ("apiserver_cpu_ms_per_transition", "API server CPU per transition, ms (over quiet)"),
    ("apiserver_cpu_mcores_steady", "API server CPU, nothing flipping, mcores"),
    ("cpu_mcores", "the system's CPU during the flips, mcores (cgroups)"),
    ("cpu_mcores_steady", "the system's CPU, nothing flipping, mcores"),
    ("memory_mib", "the system's memory, MiB (cgroup working set)"),
    ("restart_writes", "pod writes in 20 s after its node agent restarts"),
    ("restart_writes_by_resource", "  all writes then, by resource"),
    ("restart_flaps", "label/condition flaps after that restart"),
    ("restart_flapped", "  of which"),
    ("restart_flap_example", "  for example"),
    ("left_after_delete", "left on the pods 45 s after the marker's delete"),
    ("way_left_after_delete", "`way`'s marks left 45 s after its delete"),
    ("gateway_followed_after_way_deleted", "`gateway`'s label follows after `way` is deleted"),
)


def table(results: Mapping[str, Mapping[str, Any]]) -> str:
    """The figures, one column a system, in `results`' order."""
    systems = list(results)
    lines = [f"| | {' | '.join(systems)} |", "|---|" + "---|" * len(systems)]
    for key, title in ROWS:
        lines.append(
            f"| {title} | " + " | ".join(_cell(results[s].get(key)) for s in systems) + " |"
        )
    return "\n".join(lines)


def command_line(args: argparse.Namespace) -> str:
    """The command that measures the same again."""
    words = ["python", "bench/vs_kruise.py", "--pods", str(args.pods), "--flips",
             str(args.flips), "--seed", str(args.seed)]  # fmt: skip
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
    results: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """The JSON: what ran (Kubernetes, probemarker, each Kruise as kruise.identity says,
    none: probemarker alone), the command, and the figures by column."""
    return {
        "kubernetes": server,
        "probemarker": f"{__version__} (this checkout)",
        "kruise": [dict(one) for one in ran],
        "probemarker_alone": not ran,
        "note": None if ran else ALONE,
        "pods": args.pods,
        "flips": args.flips,
        "seed": args.seed,
        "command": command_line(args),
        "results": {name: dict(figures) for name, figures in results.items()},
    }


def report(doc: Mapping[str, Any]) -> str:
    """The printed answer: what ran, the table, the command."""
    lines = [f"Kubernetes {doc['kubernetes']}, one node; probemarker {doc['probemarker']}"]
    if doc["kruise"]:
        lines += [kruise.describe(ran) for ran in doc["kruise"]]
        lines.append(
            "each Kruise installed, measured and removed in turn, probemarker installed and "
            "idle meanwhile; probemarker measured with no Kruise installed"
        )
    else:
        lines.append(ALONE)
    lines.append(
        f"{doc['pods']} pods a system, {doc['flips']} flips a pod, "
        "exec probe period 1 s, thresholds 1"
    )
    return "\n".join([*lines, "", table(doc["results"]), "", f"command: {doc['command']}"])


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=20)
    parser.add_argument("--flips", type=int, default=20)
    parser.add_argument("--seed", type=int, default=32)
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
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument(
        "--keep-kruise", action="store_true", help="do not remove the last Kruise at the end"
    )
    args = parser.parse_args(argv)
    if not 1 <= args.pods <= 1000 or args.flips < 1:
        parser.error("--pods 1..1000 and --flips 1 or more")
    return args


def main() -> None:
    args = parse_args()
    sources = kruise.parse_sources(args.kruise)
    for source in sources:
        kruise.check_source(source)
    columns = plan(sources, parse_systems(args.systems))
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
    print(f"== probemarker, then {given}" if sources else f"== {ALONE}", file=sys.stderr)
    versions = cluster.kubectl.json("version")
    addon = Addon(cluster, Path(tempfile.mkdtemp()))
    ordered = measure_order(columns)
    last_kruise = next((c for c in reversed(ordered) if c.source is not None), None)
    results: dict[str, dict[str, Any]] = {}
    ran: dict[str, dict[str, Any]] = {}
    try:
        addon.use("api")
        for column in ordered:
            print(f"== {column.name}", file=sys.stderr)
            if column.source is None:
                results[column.name] = measure(cluster, addon, column, args)
            else:
                addon.use("api")  # idle meanwhile, as it is installed by default
                keep = args.keep_kruise and column is last_kruise
                try:
                    ran[column.name] = kruise.install(cluster, column.source)
                    results[column.name] = measure(cluster, addon, column, args)
                finally:
                    if not keep:
                        kruise.remove(cluster)
                if keep:
                    print(f"kept: Kruise {column.source.label} (python bench/kruise.py "
                          "remove removes it)", file=sys.stderr)  # fmt: skip
            print(json.dumps(results[column.name]), file=sys.stderr)
    finally:
        addon.use("api")
    doc = document(
        args,
        server=versions.get("serverVersion", {}).get("gitVersion", "?"),
        ran=[ran[c.name] for c in columns if c.name in ran],
        results={c.name: results[c.name] for c in columns},
    )
    print(report(doc))
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
