"""Settings of `probemarker run`: every one a flag and a `PROBEMARKER_*` variable.

Stage: edge (configuration). Input: the command line and the environment. Output: a
validated, frozen `RunSettings`, or `SettingsError` naming the flag, the variable,
the value and what is accepted. Flags win over variables; variables over defaults.
The node name also falls back to `NODE_NAME` (the downward API's usual name).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from probemarker.api import rules

ENV_PREFIX = "PROBEMARKER_"


class SettingsError(ValueError):
    """A setting with a value that cannot be used; the message says which and why."""


@dataclass(frozen=True, slots=True)
class RunSettings:
    kubeconfig: str | None = None  # None: in-cluster configuration
    context: str | None = None
    node: str = ""
    namespaces: tuple[str, ...] = ()  # markers watched in these namespaces; () = all
    marker_group: str = rules.GROUP  # or apps.kruise.io: Kruise's CRD, its prober off
    max_concurrent_probes: int = 64
    write_qps: float = 50.0  # the kubelet's API budget (kubeAPIQPS, kubeAPIBurst)
    write_burst: int = 100
    event_qps: float = 50.0  # events' own budget, as the kubelet's eventRecordQPS/eventBurst
    event_burst: int = 100
    write_coalesce_seconds: float = 0.05
    shutdown_grace_seconds: float = 10.0
    log_format: str = "auto"  # auto (console on a terminal, else JSON), json, console
    log_level: str = "info"


_HELP: Mapping[str, str] = {
    "kubeconfig": "kubeconfig file (default: in-cluster configuration)",
    "context": "kubeconfig context (default: its current-context)",
    "node": "the node whose pods to probe (default: $NODE_NAME)",
    "namespaces": "comma-separated namespaces whose markers to watch (default: all)",
    "marker_group": f"API group of the markers: {rules.GROUP} or {rules.KRUISE_GROUP}",
    "max_concurrent_probes": "probe runs at once on this node",
    "write_qps": "pod status writes per second (client-side rate limit)",
    "write_burst": "pod status writes allowed in a burst",
    "event_qps": "event writes per second (a budget apart from the status writes)",
    "event_burst": "event writes allowed in a burst",
    "write_coalesce_seconds": "wait this long after a result before writing the pod",
    "shutdown_grace_seconds": "on SIGTERM: time for running probes and pending writes",
    "log_format": "auto, json or console",
    "log_level": "debug, info, warning or error",
}


def env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def _positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        value = kind(text)
        if value <= 0:
            raise ValueError("must be greater than 0")
        return value

    return parse


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return text

    return parse


def _names(text: str) -> tuple[str, ...]:
    return tuple(sorted({part.strip() for part in text.split(",") if part.strip()}))


_PARSERS: Mapping[str, Callable[[str], Any]] = {
    "namespaces": _names,
    "marker_group": _choice(rules.GROUP, rules.KRUISE_GROUP),
    "max_concurrent_probes": _positive(int),
    "write_qps": _positive(float),
    "write_burst": _positive(int),
    "event_qps": _positive(float),
    "event_burst": _positive(int),
    "write_coalesce_seconds": lambda text: _nonnegative(float(text)),
    "shutdown_grace_seconds": lambda text: _nonnegative(float(text)),
    "log_format": _choice("auto", "json", "console"),
    "log_level": _choice("debug", "info", "warning", "error"),
}


def _nonnegative(value: float) -> float:
    if value < 0:
        raise ValueError("must be 0 or more")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per setting, its variable and default in the help text."""
    defaults = RunSettings()
    for item in fields(RunSettings):
        default = getattr(defaults, item.name)
        shown = ",".join(default) if isinstance(default, tuple) else default
        parser.add_argument(
            flag_name(item.name),
            dest=item.name,
            default=None,
            metavar="VALUE",
            help=f"{_HELP[item.name]} [${env_name(item.name)}; default: {shown or 'none'}]",
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
