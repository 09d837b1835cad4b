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
from typing import Any

from probemarker.api import rules
from probemarker.api.names import dns1123_label_problems
from probemarker.cri.endpoint import DEFAULT_ENDPOINT, socket_path
from probemarker.observe.address import parse_listen_address

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
    exec_backend: str = "api"  # api: pods/exec through the API server; cri: the runtime socket
    cri_endpoint: str = DEFAULT_ENDPOINT
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


_HELP: Mapping[str, str] = {
    "kubeconfig": "kubeconfig file; the first of --kubeconfig, $PROBEMARKER_KUBECONFIG, "
    "$KUBECONFIG (kubectl's: a list of files, merged as kubectl does) is used",
    "context": "kubeconfig context",
    "node": "the node whose pods to probe; the first of --node, $PROBEMARKER_NODE, "
    "$NODE_NAME (the downward API's usual name) is used",
    "namespaces": "comma-separated namespaces whose markers to watch",
    "marker_group": f"API group of the markers: {rules.GROUP} or {rules.KRUISE_GROUP}",
    "max_concurrent_probes": "probe runs at once on this node",
    "exec_backend": "how exec probes run: api (pods/exec through the API server) or cri "
    "(ExecSync on the node's container runtime socket, --cri-endpoint; needs the cri extra "
    "and the socket mounted: docs/cri.md)",
    "cri_endpoint": "the container runtime socket for --exec-backend cri, as "
    "unix:///PATH (CRI-O: unix:///var/run/crio/crio.sock)",
    "write_qps": "pod status writes per second (client-side rate limit)",
    "write_burst": "pod status writes allowed in a burst",
    "event_qps": "event writes per second (a budget apart from the status writes)",
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
}

# What an unset setting means, where its empty default would say nothing.
_DEFAULT_TEXT: Mapping[str, str] = {
    "kubeconfig": "the in-cluster configuration",
    "context": "the kubeconfig's current-context",
    "namespaces": "all",
    "log_format": "auto: console on a terminal, else JSON",
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


def _positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        value = _finite(kind(text))
        if value <= 0:
            raise ValueError("must be greater than 0")
        return value

    return parse


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
    "max_concurrent_probes": _positive(int),
    "exec_backend": _choice("api", "cri"),
    "cri_endpoint": _checked_text(socket_path),  # a unix socket URL
    "write_qps": _positive(float),
    "write_burst": _positive(int),
    "event_qps": _positive(float),
    "event_burst": _positive(int),
    "write_coalesce_seconds": lambda text: _nonnegative(float(text)),
    "message_refresh_seconds": lambda text: _nonnegative(float(text)),
    "cleanup_delay_seconds": lambda text: _nonnegative(float(text)),
    "shutdown_grace_seconds": lambda text: _nonnegative(float(text)),
    "log_format": _choice("auto", "json", "console"),
    "log_level": _choice("debug", "info", "warning", "error"),
    "metrics_address": _checked_text(parse_listen_address),
}


def _nonnegative(value: float) -> float:
    if _finite(value) < 0:
        raise ValueError("must be 0 or more")
    return value


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
    configuration reference (`python -m probemarker.settings_reference`)."""
    defaults = RunSettings()
    described = []
    for item in fields(RunSettings):
        default = getattr(defaults, item.name)
        shown = ",".join(default) if isinstance(default, tuple) else default
        shown = _DEFAULT_TEXT.get(item.name, shown)
        described.append(
            SettingDoc(
                name=item.name,
                flag=flag_name(item.name),
                env=env_name(item.name),
                metavar=metavar(item),
                default=str(shown) if shown not in ("", None) else "none",
                help=_HELP[item.name],
            )
        )
    return described


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per setting, its variable and default in the help text."""
    for doc in describe():
        parser.add_argument(
            doc.flag,
            dest=doc.name,
            default=None,
            metavar=doc.metavar,
            help=f"{doc.help} [${doc.env}; default: {doc.default}]",
        )


def _parse(field: str, text: str, source: str) -> Any:
    parse = _PARSERS.get(field, str)
    try:
        return parse(text)
    except ValueError as err:
        reason = str(err) if "must" in str(err) else f"not a valid value ({err})"
        raise SettingsError(f"{source}={text!r}: {reason}") from None


def resolve(args: argparse.Namespace, environ: Mapping[str, str]) -> RunSettings:
    """Flags, then `PROBEMARKER_*` variables, then defaults; validated."""
    values: dict[str, Any] = {}
    for item in fields(RunSettings):
        flag_value = getattr(args, item.name, None)
        if flag_value is not None:
            values[item.name] = _parse(item.name, flag_value, flag_name(item.name))
        elif environ.get(env_name(item.name)):
            name = env_name(item.name)
            values[item.name] = _parse(item.name, environ[name], name)
    if not values.get("kubeconfig") and environ.get("KUBECONFIG"):
        values["kubeconfig"] = environ["KUBECONFIG"]  # kubectl's variable, after ours
    if values.get("context") and not values.get("kubeconfig"):
        raise SettingsError(
            f"{flag_name('context')} names a kubeconfig context, but no kubeconfig is set "
            f"(pass {flag_name('kubeconfig')} FILE, or set {env_name('kubeconfig')} or "
            "KUBECONFIG); without one the daemon uses the in-cluster configuration"
        )
    if not values.get("node"):
        values["node"] = environ.get("NODE_NAME", "")
    if not values["node"]:
        raise SettingsError(
            f"no node name: pass {flag_name('node')} NAME or set {env_name('node')} or "
            "NODE_NAME (in a DaemonSet: NODE_NAME from the downward API, spec.nodeName)"
        )
    return RunSettings(**values)


def parse_run_settings(argv: Sequence[str], environ: Mapping[str, str]) -> RunSettings:
    """For tests and the CLI: a parser of its own, then `resolve`."""
    parser = argparse.ArgumentParser(prog="probemarker run")
    add_arguments(parser)
    return resolve(parser.parse_args(list(argv)), environ)
