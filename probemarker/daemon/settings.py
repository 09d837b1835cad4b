"""Settings of `probemarker run`: every one a flag and a `PROBEMARKER_*` variable.

Stage: edge (configuration). Input: the command line and the environment. Output: a
validated, frozen `RunSettings`, or `SettingsError` naming the flag, the variable,
the value and what is accepted. Flags win over variables; variables over defaults.
The node name also falls back to `NODE_NAME` (the downward API's usual name), and the
kubeconfig to `KUBECONFIG` (kubectl's variable, possibly a list of files); with no
kubeconfig at all the daemon uses the in-cluster configuration.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import Field, dataclass, fields
from typing import TYPE_CHECKING, Any

from probemarker.api import rules
from probemarker.api.names import dns1123_label_problems, dns1123_subdomain_problems
from probemarker.cri.endpoint import DEFAULT_ENDPOINT, socket_path
from probemarker.observe.address import parse_listen_address
from probemarker.probe.limits import EXEC_GRACE
from probemarker.schedule.timing import MAX_STEP, step_problem

if TYPE_CHECKING:
    from probemarker.kube.connect.config import ConnectionSettings

ENV_PREFIX = "PROBEMARKER_"


class SettingsError(ValueError):
    """A setting with a value that cannot be used; the message says which and why."""


@dataclass(frozen=True, slots=True)
class RunSettings:
    kubeconfig: str | None = None  # a file, or a KUBECONFIG list; None: in-cluster
    context: str | None = None
    node: str = ""
    namespaces: tuple[str, ...] = ()  # markers watched in these namespaces; () = all
    marker_group: str = rules.GROUP  # or apps.kruise.io: Kruise's CRD, its prober off
    max_concurrent_probes: int = 64
    probe_phase_step_seconds: float = 0.25
    exec_backend: str = "api"  # api: pods/exec through the API server; cri: the runtime socket
    cri_endpoint: str = DEFAULT_ENDPOINT
    exec_grace_seconds: float = EXEC_GRACE
    exec_hold_seconds: float = 600.0
    max_held_exec_streams: int = 64
    write_qps: float = 50.0  # the kubelet's API budget (kubeAPIQPS, kubeAPIBurst)
    write_burst: int = 100
    event_qps: float = 50.0  # events' own budget, as the kubelet's eventRecordQPS/eventBurst
    event_burst: int = 100
    write_coalesce_seconds: float = 0.05
    message_refresh_seconds: float = 10.0
    cleanup_delay_seconds: float = 30.0
    shutdown_grace_seconds: float = 10.0
    log_format: str = "auto"  # auto (console on a terminal, else JSON), json, console
    log_level: str = "info"
    # /healthz, /readyz and /metrics; "0": no server (observe/address.py says what parses).
    metrics_address: str = ":9808"
    # The Unix socket `probemarker status` reads (observe/statussocket.py); "": none.
    status_socket: str = ""

    @property
    def connection(self) -> ConnectionSettings:
        """Which API server (kube/connect/config.py `connect`). Imported here, not at
        the top: `probemarker status --local` reads these settings and loads no client."""
        from probemarker.kube.connect.config import ConnectionSettings

        return ConnectionSettings(kubeconfig=self.kubeconfig, context=self.context)


_HELP: Mapping[str, str] = {
    "kubeconfig": "kubeconfig file; the first of --kubeconfig, $PROBEMARKER_KUBECONFIG, "
    "$KUBECONFIG (kubectl's: a list of files, merged as kubectl does) is used",
    "context": "kubeconfig context",
    "node": "the node whose pods to probe; the first of --node, $PROBEMARKER_NODE, "
    "$NODE_NAME (the downward API's usual name) is used",
    "namespaces": "comma-separated namespaces whose markers to watch",
    "marker_group": f"API group of the markers: {rules.GROUP} or {rules.KRUISE_GROUP}",
    "max_concurrent_probes": "probe runs at once on this node; one namespace takes at "
    "most all but a quarter of them, and a freed slot goes to the namespace with the "
    "fewest runs (docs/engine.md)",
    "probe_phase_step_seconds": "probes' start times are spread over their period in steps "
    "of this many seconds, so runs come due in groups and the daemon wakes once for a "
    "group, not for each run (a wake-up is most of an idle node's CPU per run: "
    "docs/engine.md); 0 gives each probe a moment of its own; lower it on a node of more "
    "than about 200 runs a second, whose groups would outgrow --max-concurrent-probes",
    "exec_backend": "how exec probes run: api (pods/exec through the API server) or cri "
    "(ExecSync on the node's container runtime socket, --cri-endpoint; needs the cri extra "
    "and the socket mounted: docs/cri.md)",
    "cri_endpoint": "the container runtime socket for --exec-backend cri, as "
    "unix:///PATH (CRI-O: unix:///var/run/crio/crio.sock)",
    "exec_grace_seconds": "how long past an exec probe's timeoutSeconds the client waits "
    "before the run is Unknown: for the runtime's verdict (cri; the kubelet waits 2 "
    "minutes) or for the exec to be established (api) (docs/probes.md)",
    "exec_hold_seconds": "api backend: how long a probe waits at most for its command "
    "that outlived its timeout (closing the stream would not stop it): the stream is kept "
    "open and the probe's periods skipped until the command ends or this limit; after a "
    "restart of the daemon, counted from the hold's start on the pod's record, and only "
    "the limit ends it (docs/kube-exec.md)",
    "max_held_exec_streams": "api backend: timed-out exec streams kept open at once, "
    "beside the --max-concurrent-probes runs (each an exec connection); shared by "
    "namespace: one alone may hold all, and a namespace below its share (this divided "
    "by the namespaces holding streams) takes one from the namespace holding the most",
    "write_qps": "pod status writes per second (client-side rate limit), shared by the "
    "node's namespaces in turn: one write each while several wait (docs/kube-writes.md)",
    "write_burst": "pod status writes allowed in a burst",
    "event_qps": "event writes per second (a budget apart from the status writes), "
    "shared by the node's namespaces in turn: one write each while several wait",
    "event_burst": "event writes allowed in a burst",
    "write_coalesce_seconds": "wait this long after a result before writing the pod",
    "message_refresh_seconds": "publish a condition message that changed without a "
    "transition at most once per this many seconds per pod (transitions go at once)",
    "cleanup_delay_seconds": "after a marker is deleted, keep what it wrote this long, so "
    "a marker re-created meanwhile takes over without a gap",
    "shutdown_grace_seconds": "on SIGTERM: time for running probes and pending writes",
    "log_format": "auto, json or console",
    "log_level": "debug, info, warning or error",
    "metrics_address": "where /healthz, /readyz and /metrics listen: HOST:PORT, :PORT "
    "(every interface) or [IPV6]:PORT; port 0 takes any free port (127.0.0.1:0); "
    "0 alone turns the server off",
    "status_socket": "a Unix socket (an absolute path) where the daemon answers `probemarker "
    "status` with what it holds, read from inside its own container and never served to the "
    "network; the DaemonSet sets /run/probemarker/status.sock, an emptyDir (docs/cli.md)",
}

# What an unset setting means, where its empty default would say nothing.
_DEFAULT_TEXT: Mapping[str, str] = {
    "kubeconfig": "the in-cluster configuration",
    "context": "the kubeconfig's current-context",
    "namespaces": "all namespaces",
    "log_format": "auto: console on a terminal, else JSON",
    "status_socket": "no socket: `probemarker status` cannot read this daemon",
}

# The placeholder shown in --help; a field not named here gets one from its type.
_METAVARS: Mapping[str, str] = {
    "kubeconfig": "FILE",
    "context": "NAME",
    "node": "NAME",
    "namespaces": "NS[,NS...]",
    "marker_group": "GROUP",
    "exec_backend": "BACKEND",
    "cri_endpoint": "URL",
    "log_format": "FORMAT",
    "log_level": "LEVEL",
    "metrics_address": "ADDRESS",
    "status_socket": "PATH",
}


def env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def metavar(item: Field[Any]) -> str:
    """FILE, NAME, N, SECONDS...: what the flag takes."""
    if item.name in _METAVARS:
        return _METAVARS[item.name]
    if item.name.endswith("_seconds"):
        return "SECONDS"
    if item.type in ("int", "float", int, float):
        return "N"
    return "VALUE"


@dataclass(frozen=True, slots=True)
class _Range:
    """A number between `low` and `high` (both included), of `kind` (int or float).

    Every numeric setting has one: an extreme value that parses (`--write-qps 1e-300`
    never writes, `--cleanup-delay-seconds 1e308` never cleans up) is a mistake, not
    a wish, and is refused at start-up like a value that does not parse. The bounds
    are generous: each admits every value a node could sensibly want."""

    kind: type[int] | type[float]
    low: float
    high: float

    def __call__(self, text: str) -> Any:
        value = _finite(self.kind(text))
        if not self.low <= value <= self.high:
            raise ValueError(f"must be between {_number(self.low)} and {_number(self.high)}")
        return value

    def __str__(self) -> str:
        return f"{_number(self.low)} to {_number(self.high)}"


class _PhaseStep:
    """0, or a whole fraction of a second up to 0.5 s (schedule/timing.py: the phases of
    every whole-second period then share one grid, and a 1 s period keeps two)."""

    def __call__(self, text: str) -> float:
        value = float(_finite(float(text)))
        if problem := step_problem(value):
            raise ValueError(problem)
        return value

    def __str__(self) -> str:
        return f"0, or 1/n of a second up to {MAX_STEP:g}"


def _number(value: float) -> str:
    return f"{value:g}"


def _finite(value: Any) -> Any:
    """`float()` takes 'nan' and 'inf'; NaN compares false with every bound, so it
    would pass them all, and an infinite rate or wait is never meant."""
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return text

    return parse


def _namespaces(text: str) -> tuple[str, ...]:
    names = sorted({part.strip() for part in text.split(",") if part.strip()})
    if not names:
        raise ValueError(
            "must name at least one namespace; leave it unset to watch markers in all namespaces"
        )
    for name in names:
        problems = dns1123_label_problems(name)
        if problems:
            raise ValueError(f"namespace {name!r} {problems[0]}")
    return tuple(names)


def _node_name(text: str) -> str:
    """A node's name is a DNS subdomain (the API server's ValidateNodeName): anything
    else (`a,b`, a space, upper case) names no node, and a field selector on it would
    watch nothing while the daemon reported ready."""
    problems = dns1123_subdomain_problems(text)
    if problems:
        raise ValueError(f"must be a node's name: it {problems[0]}")
    return text


# A Unix socket's path fits in sockaddr_un's sun_path (108 bytes with its NUL on Linux).
_SOCKET_PATH_BYTES = 107


def _socket_file(text: str) -> None:
    """An absolute path short enough for a Unix socket; ValueError saying why not."""
    path = text.strip()
    if not path.startswith("/"):
        raise ValueError("expected an absolute path, e.g. /run/probemarker/status.sock")
    if len(path.encode()) > _SOCKET_PATH_BYTES:
        raise ValueError(f"a Unix socket's path has at most {_SOCKET_PATH_BYTES} bytes")


def _checked_text(check: Callable[[str], object]) -> Callable[[str], str]:
    """The text, stripped, once `check` (which raises ValueError saying why) accepts it:
    for settings kept as text and parsed again where they are used."""

    def parse(text: str) -> str:
        check(text)
        return text.strip()

    return parse


_PARSERS: Mapping[str, Callable[[str], Any]] = {
    "namespaces": _namespaces,
    "marker_group": _choice(rules.GROUP, rules.KRUISE_GROUP),
    "node": _node_name,
    "max_concurrent_probes": _Range(int, 1, 10_000),
    "probe_phase_step_seconds": _PhaseStep(),
    "exec_backend": _choice("api", "cri"),
    "cri_endpoint": _checked_text(socket_path),  # a unix socket URL
    # The kubelet waits its runtime request timeout, 2 minutes, past an ExecSync's
    # timeout; longer only keeps a probe's periods skipped. A hold longer than a day
    # would silence a probe for a day.
    "exec_grace_seconds": _Range(float, 0, 120),
    "exec_hold_seconds": _Range(float, 1, 86_400),
    "max_held_exec_streams": _Range(int, 0, 10_000),
    # A rate below one write per 100 s would leave a pod's change unwritten for minutes;
    # 10,000 a second is far beyond what one node's pods need or an API server takes.
    "write_qps": _Range(float, 0.01, 10_000),
    "write_burst": _Range(int, 1, 10_000),
    "event_qps": _Range(float, 0.01, 10_000),
    "event_burst": _Range(int, 1, 10_000),
    # Waits: coalescing longer than a probe period would hold results back; the others
    # stay within a day (a refresh, a clean-up delay) or ten minutes (a shutdown that
    # long outlives any terminationGracePeriodSeconds worth setting).
    "write_coalesce_seconds": _Range(float, 0, 10),
    "message_refresh_seconds": _Range(float, 0, 86_400),
    "cleanup_delay_seconds": _Range(float, 0, 86_400),
    "shutdown_grace_seconds": _Range(float, 0, 600),
    "log_format": _choice("auto", "json", "console"),
    "log_level": _choice("debug", "info", "warning", "error"),
    "metrics_address": _checked_text(parse_listen_address),
    "status_socket": _checked_text(_socket_file),
}


@dataclass(frozen=True, slots=True)
class SettingDoc:
    """One setting as `--help` and docs/configuration.md show it."""

    name: str
    flag: str
    env: str
    metavar: str
    default: str  # as shown: 'none' when unset means nothing more
    help: str


def describe() -> list[SettingDoc]:
    """Every setting, in declaration order: the one source of `--help` and the
    configuration reference (`python -m probemarker.daemon.settings_reference`)."""
    described = []
    for item in fields(RunSettings):
        parser = _PARSERS.get(item.name)
        accepted = f"; {parser}" if isinstance(parser, _Range | _PhaseStep) else ""
        described.append(
            SettingDoc(
                name=item.name,
                flag=flag_name(item.name),
                env=env_name(item.name),
                metavar=metavar(item),
                default=_default_text(item.name),
                help=_HELP[item.name] + accepted,
            )
        )
    return described


def _default_text(field: str) -> str:
    """The default as `--help` shows it: 'none' when unset means nothing more."""
    default = getattr(RunSettings(), field)
    shown = ",".join(default) if isinstance(default, tuple) else default
    shown = _DEFAULT_TEXT.get(field, shown)
    return str(shown) if shown not in ("", None) else "none"


# The settings `probemarker check` takes: how to reach the cluster and which group its
# markers are in; the rest are the daemon's.
CONNECTION_FIELDS = ("kubeconfig", "context", "marker_group")


def add_arguments(parser: argparse.ArgumentParser, *, only: Sequence[str] | None = None) -> None:
    """One flag per setting (or per setting named in `only`), its variable and
    default in the help text."""
    for doc in describe():
        if only is not None and doc.name not in only:
            continue
        parser.add_argument(
            doc.flag,
            dest=doc.name,
            default=None,
            metavar=doc.metavar,
            help=f"{doc.help} [${doc.env}; default: {doc.default}]",
        )


def _parse(field: str, text: str, source: str) -> Any:
    if not text.strip():
        # An empty flag or variable is a mistake (a cri overlay's PROBEMARKER_EXEC_BACKEND=""
        # silently ran the api backend): say so, never take it for "unset".
        raise SettingsError(
            f"{source}={text!r}: must not be empty; unset it to use the default "
            f"({_default_text(field)})"
        )
    parse = _PARSERS.get(field, str)
    try:
        return parse(text)
    except ValueError as err:
        reason = str(err) if "must" in str(err) else f"not a valid value ({err})"
        raise SettingsError(f"{source}={text!r}: {reason}") from None


def resolve(args: argparse.Namespace, environ: Mapping[str, str]) -> RunSettings:
    """Flags, then `PROBEMARKER_*` variables, then defaults; validated."""
    values = _resolved(args, environ, [item.name for item in fields(RunSettings)])
    if not values.get("node") and environ.get("NODE_NAME"):
        values["node"] = _parse("node", environ["NODE_NAME"], "NODE_NAME")
    if not values.get("node"):
        raise SettingsError(
            f"no node name: pass {flag_name('node')} NAME or set {env_name('node')} or "
            "NODE_NAME (in a DaemonSet: NODE_NAME from the downward API, spec.nodeName)"
        )
    return RunSettings(**values)


def resolve_connection(args: argparse.Namespace, environ: Mapping[str, str]) -> RunSettings:
    """`CONNECTION_FIELDS` as `resolve` reads them (flags, variables, KUBECONFIG);
    every other setting at its default. For commands that talk to a cluster but are
    not the daemon (`probemarker check`)."""
    return RunSettings(**_resolved(args, environ, CONNECTION_FIELDS))


def _resolved(
    args: argparse.Namespace, environ: Mapping[str, str], names: Sequence[str]
) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for item in fields(RunSettings):
        if item.name not in names:
            continue
        flag_value = getattr(args, item.name, None)
        if flag_value is not None:
            values[item.name] = _parse(item.name, flag_value, flag_name(item.name))
        elif env_name(item.name) in environ:
            name = env_name(item.name)
            values[item.name] = _parse(item.name, environ[name], name)
    if not values.get("kubeconfig") and environ.get("KUBECONFIG"):
        values["kubeconfig"] = environ["KUBECONFIG"]  # kubectl's variable, after ours
    if values.get("context") and not values.get("kubeconfig"):
        raise SettingsError(
            f"{flag_name('context')} names a kubeconfig context, but no kubeconfig is set "
            f"(pass {flag_name('kubeconfig')} FILE, or set {env_name('kubeconfig')} or "
            "KUBECONFIG); without one the in-cluster configuration is used"
        )
    return values


def parse_run_settings(argv: Sequence[str], environ: Mapping[str, str]) -> RunSettings:
    """For tests and the CLI: a parser of its own, then `resolve`."""
    parser = argparse.ArgumentParser(prog="probemarker run")
    add_arguments(parser)
    return resolve(parser.parse_args(list(argv)), environ)
