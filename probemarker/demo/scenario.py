"""The demo's script, as data: the pods, the files their containers answer from, and
the steps that change those files.

Stage: demo data (pure). Every pod runs one container whose answers come from files
at the paths the example markers read (`/home/game/idle.sh`, `/var/run/db/role`; the
web container's HTTP answer comes from `/var/run/web/upstream`); the demo keeps those
files in a scratch directory (containers.py). A `Step` writes new contents (`Flip`s)
and waits until the daemon has written what the `Expect`s say: a probe of a marker
decided Succeeded or Failed on a pod, and, for a value from the probe's answer
(`{{.Result}}`), that answer. The first step writes nothing: it waits for the daemon's
first decisions. The idle -> busy step takes the longest (the example wants 3
failures, 10 s apart), so the steps after it play while it is waited for. The
databases' failover changes no decision: both pods stay Succeeded, and their answers,
`primary` and `replica`, trade places in the role label.

Invariants (tests/demo/test_scenario.py): each pod matches exactly the example marker
of its namespace; each flip names a file its pod has; each step expects a change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from probemarker.api.model import ProbeState

SUCCEEDED, FAILED = ProbeState.SUCCEEDED, ProbeState.FAILED

# The game server's idle check, a script at the path the example runs. `$0` is the
# script's own path, so it finds its state file beside it wherever its files live.
IDLE_SH = """#!/bin/sh
# Idle while no match runs (the demo's stand-in for a game server's own check).
state=$(cat "$(dirname "$0")/state")
echo "match: $state"
test "$state" = idle
"""

GAME_STATE = "/home/game/state"
DB_ROLE = "/var/run/db/role"
UPSTREAM = "/var/run/web/upstream"  # read by the web container's HTTP stand-in
UPSTREAM_GATE = "example.com/upstream-reachable"  # the readiness gate of the web pods


def _frozen(values: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(values))


@dataclass(frozen=True, slots=True)
class DemoPod:
    """A pod the demo creates, with its one container and that container's files."""

    namespace: str
    name: str
    labels: Mapping[str, str]
    container: str
    image: str
    files: Mapping[str, str]  # path inside the container -> first contents
    executables: frozenset[str] = frozenset()  # which of the files are scripts
    readiness_gate: str | None = None  # a spec.readinessGates conditionType
    serves_http: bool = False  # answers HTTP on its pod IP, at the port named "http"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _game(name: str) -> DemoPod:
    return DemoPod(
        namespace="games",
        name=name,
        labels=_frozen({"app": "game-server"}),
        container="game-server",
        image="example.com/game-server:1.0",
        files=_frozen({"/home/game/idle.sh": IDLE_SH, GAME_STATE: "idle\n"}),
        executables=frozenset({"/home/game/idle.sh"}),
    )


def _database(name: str, role: str) -> DemoPod:
    return DemoPod(
        namespace="databases",
        name=name,
        labels=_frozen({"app": "database", "tier": "storage"}),
        container="database",
        image="example.com/database:1.0",
        files=_frozen({DB_ROLE: f"{role}\n"}),
    )


def _web(name: str) -> DemoPod:
    return DemoPod(
        namespace="web",
        name=name,
        labels=_frozen({"app": "web"}),
        container="web",
        image="example.com/web:1.0",
        files=_frozen({UPSTREAM: "reachable\n"}),
        readiness_gate=UPSTREAM_GATE,
        serves_http=True,
    )


PODS: tuple[DemoPod, ...] = (
    _game("game-0"),
    _game("game-1"),
    _database("db-0", "primary"),
    _database("db-1", "replica"),
    _web("web-0"),
    _web("web-1"),
)


@dataclass(frozen=True, slots=True)
class Flip:
    """Write `text` to the file at `path` in the container of pod `pod` (namespace/name)."""

    pod: str
    path: str
    text: str

    def __str__(self) -> str:
        return f"{self.pod}: {self.path} = {self.text.strip()}"


@dataclass(frozen=True, slots=True)
class Expect:
    """Probe `probe` of marker `marker` decided `state` on pod `pod` (namespace/name),
    answering `answer` (what `{{.Result}}` in its values stands for), if it matters."""

    pod: str
    marker: str
    probe: str
    state: ProbeState
    answer: str | None = None


@dataclass(frozen=True, slots=True)
class Step:
    """Write `flips`, then expect `expects`; with `wait=False` the next step starts at
    once and this one is waited for beside it (a slow decision need not hold the rest)."""

    title: str
    flips: tuple[Flip, ...] = ()
    expects: tuple[Expect, ...] = ()
    wait: bool = True


def _idle(pod: str, state: ProbeState) -> Expect:
    return Expect(f"games/{pod}", "game-server-idle", "idle", state)


def _role(pod: str, answer: str) -> Expect:
    """The role check answered `answer`: the role label is that answer."""
    return Expect(f"databases/{pod}", "database-role-value", "role", SUCCEEDED, answer)


def _gate(pod: str, state: ProbeState) -> Expect:
    return Expect(f"web/{pod}", "upstream-gate", "upstream", state)


STEPS: tuple[Step, ...] = (
    Step(
        "the daemon marks every pod",
        expects=(
            _idle("game-0", SUCCEEDED),
            _idle("game-1", SUCCEEDED),
            _role("db-0", "primary"),
            _role("db-1", "replica"),
            _gate("web-0", SUCCEEDED),
            _gate("web-1", SUCCEEDED),
        ),
    ),
    Step(
        "game-0 starts a match: idle -> busy (the next steps play meanwhile)",
        flips=(Flip("games/game-0", GAME_STATE, "busy\n"),),
        expects=(_idle("game-0", FAILED),),
        wait=False,
    ),
    Step(
        "primary failover: db-0 steps down, db-1 takes over (the role is the answer)",
        flips=(
            Flip("databases/db-0", DB_ROLE, "replica\n"),
            Flip("databases/db-1", DB_ROLE, "primary\n"),
        ),
        expects=(_role("db-0", "replica"), _role("db-1", "primary")),
    ),
    Step(
        "web-0 loses its upstream: the readiness gate closes",
        flips=(Flip("web/web-0", UPSTREAM, "unreachable\n"),),
        expects=(_gate("web-0", FAILED),),
    ),
    Step(
        "web-0's upstream is back: the gate opens",
        flips=(Flip("web/web-0", UPSTREAM, "reachable\n"),),
        expects=(_gate("web-0", SUCCEEDED),),
    ),
)


def pod_named(key: str) -> DemoPod:
    """The demo pod `namespace/name`; KeyError when the cast has none."""
    for pod in PODS:
        if pod.key == key:
            return pod
    raise KeyError(f"the demo has no pod {key}")
