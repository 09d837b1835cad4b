"""The `probemarker` command: run, validate, check, status, crd, sim, demo.

Stage: the front door. Parses arguments and dispatches: `validate` to
check/validate.py, `check` to check/run.py, `status` to status/read.py and
status/render.py, `run` to daemon/process.py, `demo` to demo/,
`sim` to sim/cli.py, `crd` to api/crd.py; each command's imports are made when it runs.
What it does itself: resolve the settings, map a command's errors to a message and an
exit code. See docs/cli.md.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from probemarker import __version__
from probemarker.kit.printable import printable

if TYPE_CHECKING:
    from probemarker.demo.stopping import StopSignals

# Only the standard library and `printable` above: each command imports what
# it needs when it runs, so the command line is quick to start and `probemarker demo`
# takes Ctrl-C within milliseconds of starting (demo/stopping.py), not after the
# imports of every command.

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_UNREADABLE = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="probemarker",
        description="Custom probes for Kubernetes pods: results become labels, "
        "annotations and pod conditions.",
    )
    parser.add_argument("--version", action="version", version=f"probemarker {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    validate = commands.add_parser(
        "validate",
        help="check PodProbeMarker files offline, with the API server's rules",
        description="Check PodProbeMarker YAML/JSON files (multi-document, '-' for stdin); "
        "documents of other kinds are skipped with a note. Exit 0 when no PodProbeMarker is "
        "invalid (also when a file holds none), 1 when any is invalid or a file is not YAML, "
        "2 when input cannot be read.",
    )
    validate.add_argument("files", nargs="+", metavar="FILE")
    _add_check(commands)
    _add_status(commands)
    commands.add_parser(
        "crd",
        help="print the PodProbeMarker CustomResourceDefinition",
        description="Print the CRD generated from the validation rules "
        "(manifests/crd/podprobemarkers.probemarker.io.yaml is this output).",
    )
    run = commands.add_parser(
        "run",
        help="run the per-node daemon (in a pod, or locally against a kubeconfig)",
        description="Probe the pods of one node as the PodProbeMarkers say and write the "
        "results onto the pods. Every setting is a flag and a PROBEMARKER_* variable; "
        "flags win. SIGTERM or SIGINT stops it (exit 0, within --shutdown-grace-seconds); "
        "a second one exits at once (143 or 130). See docs/cli.md and docs/engine.md.",
    )
    from probemarker.daemon import settings

    settings.add_arguments(run)
    commands.add_parser(
        "sim",
        help="the simulated API server (see docs/sim.md; needs the sim extra); "
        "'probemarker sim --help'",
        add_help=False,
    )
    demo = commands.add_parser(
        "demo",
        help="watch the daemon mark pods on a simulated cluster (needs the sim extra)",
        description="Start a simulated cluster in this process, create pods whose "
        "containers answer from files in a scratch directory, apply the three example "
        "markers (manifests/examples/), run the daemon, and play a scenario that changes "
        "the answers (idle -> busy, a primary failover, a readiness gate closing and "
        "opening) while a live table shows what the daemon writes on the pods. It ends by "
        "itself (about a minute; --fast: about 15 s) or on Ctrl-C, prints a summary and "
        "removes everything it made. In a pipe it prints one line per change. Exit 0: the "
        "scenario played to the end; 1: a change was not seen in time; 2: it cannot run "
        "here; 130: stopped by Ctrl-C. Exec commands run on this host (see docs/demo.md). "
        "Needs the sim extra: pip install 'probemarker[sim]'.",
    )
    demo.add_argument(
        "--fast",
        action="store_true",
        help="apply copies of the examples whose probes run every second with no initial "
        "delay (thresholds unchanged) instead of the examples' own timings",
    )
    demo.add_argument(
        "--plain",
        action="store_true",
        help="one line per change even on a terminal (no table, no colours)",
    )
    demo.add_argument(
        "--log-file",
        metavar="FILE",
        help="append the daemon's log (JSON lines) to FILE and keep it; by default it goes "
        "to the scratch directory and is removed with it",
    )
    return parser


def _add_check(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    check = commands.add_parser(
        "check",
        help="run a marker's probes once against pods and show the patch the daemon would "
        "send (writes nothing)",
        description="Run each probe of one PodProbeMarker once, now, against the pods it "
        "selects (or the --pod ones), and print for each pod and probe the outcome, the "
        "values the policy would set and the JSON patch the daemon would send, as if the "
        "outcome were decided (the daemon waits for successThreshold/failureThreshold "
        "consecutive results). Nothing is written to the cluster. exec probes run through "
        "pods/exec; httpGet, tcpSocket and grpc need the pod IP and are reported as not "
        "reachable from here, unless --via-api-proxy (httpGet through the API server) or "
        "--direct (inside the cluster). Exit 0: every probe Succeeded; 1: one Failed, is "
        "Unknown or not reachable, or none ran; 2: a usage or validation error. See "
        "docs/cli.md.",
    )
    source = check.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "-f", "--file", metavar="FILE", help="the marker, from a YAML/JSON file ('-' for stdin)"
    )
    source.add_argument("--marker", metavar="NS/NAME", help="the marker, as the cluster holds it")
    check.add_argument(
        "--pod",
        metavar="NS/NAME",
        action="append",
        default=[],
        help="check this pod (repeat for more); default: every pod of the namespace the marker selects",
    )
    check.add_argument(
        "-n",
        "--namespace",
        metavar="NS",
        help="the namespace of a marker file without metadata.namespace (default: the "
        "kubeconfig context's namespace, else default, as kubectl apply -f)",
    )
    check.add_argument(
        "--via-api-proxy",
        action="store_true",
        help="send httpGet probes through the API server's pod proxy (needs get on pods/proxy)",
    )
    check.add_argument(
        "--direct",
        action="store_true",
        help="connect network probes to the pod IP, as the daemon does (inside the cluster only)",
    )
    check.add_argument(
        "-o", "--output", choices=("text", "json"), default="text", help="text (default) or json"
    )
    from probemarker.daemon import settings

    settings.add_arguments(check, only=settings.CONNECTION_FIELDS)


def _add_status(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    status = commands.add_parser(
        "status",
        help="what each node's daemon holds now: every probe's state, count, last and next "
        "run, and the pending writes",
        description="Ask the daemon on each node (or on --node) what it holds, through the "
        "API server with your own credentials: the daemon pods are listed and `probemarker "
        "status --local` runs in each through pods/exec (needs list on pods and get and "
        "create on pods/exec in the daemon's namespace; docs/rbac.md). One row a probe: its "
        "decided state, the consecutive results counted towards the next threshold, the last "
        "run, the next run or why it does not run; then each pod's pending write and what it "
        "waits for, then each node whose daemon is missing, not ready or unreachable. Exit 0: "
        "settled (every probe shown decided, or waiting for nothing but a change in the "
        "cluster: a container the pod lacks, a pod terminating; no pending write); 1: "
        "otherwise; 2: a usage error. See docs/cli.md.",
    )
    status.add_argument("--node", metavar="NODE", help="only this node's daemon")
    status.add_argument(
        "-n",
        "--namespace",
        metavar="NS",
        help="only the probes of this namespace's pods (the daemon reads only them)",
    )
    status.add_argument("--pod", metavar="NS/NAME", help="only this pod's probes")
    status.add_argument("--marker", metavar="NS/NAME", help="only this marker's probes")
    status.add_argument(
        "-o", "--output", choices=("text", "json"), default="text", help="text (default) or json"
    )
    status.add_argument(
        "--socket",
        metavar="PATH",
        help="read a daemon's status socket directly (a daemon run locally with "
        "--status-socket PATH) instead of the cluster's daemons",
    )
    status.add_argument(
        "--local",
        action="store_true",
        help="inside the daemon's container: print its socket's answer as it is (what "
        "`status` runs through pods/exec); the socket: --socket, else "
        "$PROBEMARKER_STATUS_SOCKET, else /run/probemarker/status.sock",
    )
    status.add_argument(
        "--daemon-namespace",
        metavar="NS",
        default="probemarker-system",
        help="the namespace of the daemon pods (default: probemarker-system)",
    )
    status.add_argument(
        "--daemon-selector",
        metavar="SELECTOR",
        default="app.kubernetes.io/name=probemarker",
        help="the label selector of the daemon pods (default: app.kubernetes.io/name=probemarker)",
    )
    from probemarker.daemon import settings

    settings.add_arguments(status, only=("kubeconfig", "context"))


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["sim"]:
        try:
            from probemarker.sim.cli import main as sim_main

            # A module of the extra that the sim loads only for one mode (cryptography
            # for --https) is looked for before it starts (sim/cli.py), and said so here.
            return sim_main(args_list[1:])
        except ModuleNotFoundError as exc:
            return needs_sim_extra("sim", exc)
    # `probemarker demo` takes Ctrl-C and SIGTERM from here on, before the parser and
    # the demo's own imports (demo/stopping.py); given back if it does not run.
    signals = _demo_signals() if args_list[:1] == ["demo"] else None
    parser = _parser()
    try:
        args = parser.parse_args(args_list)
    except SystemExit:  # --help, a usage error
        if signals is not None:
            signals.restore()
        raise
    if args.command == "validate":
        from probemarker.check.validate import validate_files

        return validate_files(args.files, out=sys.stdout, err=sys.stderr)
    if args.command == "run":
        return run_command(args)
    if args.command == "check":
        return check_command(args)
    if args.command == "status":
        return status_command(args)
    if signals is not None:
        return demo_command(args, signals)
    if args.command == "crd":
        sys.stdout.write(render_crd())
        return EXIT_OK
    parser.print_help()
    return EXIT_OK


def run_command(args: argparse.Namespace) -> int:
    """`probemarker run`: settings, logging, then the daemon until SIGTERM."""
    import anyio
    import structlog

    from probemarker.daemon import settings
    from probemarker.observe.logging import configure_logging

    try:
        resolved = settings.resolve(args, os.environ)
    except settings.SettingsError as exc:
        return _failed("run", str(exc))
    configure_logging(format=resolved.log_format, level=resolved.log_level)
    if resolved.exec_backend == "cri":
        from probemarker.cri.client import missing_library

        if (missing := missing_library()) is not None:
            return _failed("run", f"--exec-backend cri: {missing}")
    # Until the daemon receives signals itself (its first step), a SIGTERM or SIGINT
    # ends the start-up: nothing has been done that needs finishing.
    previous = {sig: signal.signal(sig, _stop_starting) for sig in STOP_SIGNALS}
    try:
        from probemarker.daemon.process import run_daemon  # the daemon's imports, only when it runs
        from probemarker.kube.connect.config import ConfigError
        from probemarker.observe.serve import MetricsServerError
        from probemarker.observe.statussocket import StatusSocketError

        try:
            return anyio.run(run_daemon, resolved)
        except (ConfigError, MetricsServerError, StatusSocketError) as exc:
            return _failed("run", str(exc))
    except _StoppedStarting as stopped:
        structlog.get_logger("probemarker.app").info(
            "daemon.stopped", signal=signal.Signals(stopped.signum).name, stage="importing"
        )
        return EXIT_OK
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def check_command(args: argparse.Namespace) -> int:
    """`probemarker check`: see probemarker/check/run.py and docs/cli.md."""
    import anyio

    from probemarker.check.marker import UsageError
    from probemarker.check.run import CheckOptions, run_check
    from probemarker.daemon import settings
    from probemarker.kube.connect.config import ConfigError
    from probemarker.kube.connect.errors import KubeError

    try:
        resolved = settings.resolve_connection(args, os.environ)
    except settings.SettingsError as exc:
        return _failed("check", str(exc))
    if args.direct and args.via_api_proxy:
        return _failed(
            "check",
            "--direct and --via-api-proxy: choose one (--direct connects to the pod IP, "
            "inside the cluster; --via-api-proxy goes through the API server)",
        )
    options = CheckOptions(
        file=args.file,
        marker=args.marker,
        pods=tuple(args.pod),
        namespace=args.namespace,
        via_api_proxy=args.via_api_proxy,
        direct=args.direct,
        output=args.output,
    )
    try:
        return anyio.run(lambda: run_check(options, resolved, out=sys.stdout, err=sys.stderr))
    # Each message may echo what a marker, a file or the API server said: printable.
    except (UsageError, ConfigError) as exc:
        return _failed("check", printable(str(exc)))
    except KubeError as exc:
        return _failed("check", _cluster_problem(exc))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def status_command(args: argparse.Namespace) -> int:
    """`probemarker status`: see probemarker/status/read.py and docs/cli.md."""
    # `--local` runs in the daemon's container, under its memory limit: only the
    # standard library's socket is loaded for it (status/local.py), checked first.
    from probemarker.status.local import (
        StatusOptions,
        UsageError,
        check_options,
        print_local,
    )

    options = StatusOptions(
        node=args.node,
        pod=args.pod,
        marker=args.marker,
        namespace=args.namespace,
        output=args.output,
        local=args.local,
        socket=args.socket,
        daemon_namespace=args.daemon_namespace,
        daemon_selector=args.daemon_selector,
    )
    try:
        check_options(options)
    except UsageError as exc:
        return _failed("status", printable(str(exc)))
    if options.local:
        try:
            print_local(options, os.environ, out=sys.stdout.buffer)
        except OSError as exc:
            return _failed("status --local", printable(str(exc)), EXIT_FAILED)
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
        return EXIT_OK

    import anyio

    from probemarker.daemon import settings
    from probemarker.kube.connect.config import ConfigError
    from probemarker.kube.connect.errors import KubeError
    from probemarker.status.read import ReadError, read_cluster, read_local_socket
    from probemarker.status.render import exit_code, render_json, render_text

    try:
        if options.socket is not None:
            nodes = [anyio.run(lambda: read_local_socket(options, os.environ))]
        else:
            resolved = settings.resolve_connection(args, os.environ)
            nodes = anyio.run(lambda: read_cluster(options, resolved.connection))
    except (UsageError, ConfigError, settings.SettingsError) as exc:
        return _failed("status", printable(str(exc)))
    except ReadError as exc:
        return _failed("status", printable(str(exc)), EXIT_FAILED)
    except KubeError as exc:
        return _failed("status", _cluster_problem(exc), EXIT_FAILED)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    asked = " ".join(
        f"{flag} {value}"
        for flag, value in (("-n", args.namespace), ("--pod", args.pod), ("--marker", args.marker))
        if value
    )
    text = (
        render_json(nodes) if options.output == "json" else render_text(nodes, asked=asked or None)
    )
    sys.stdout.write(text)
    return exit_code(nodes, asked=asked or None)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
EXIT_INTERRUPTED = 128 + signal.SIGINT


def _failed(command: str, problem: str, code: int = EXIT_UNREADABLE) -> int:
    """Every command's failure, said one way: `probemarker COMMAND: PROBLEM`, one line
    on stderr; `code` is the command's exit code."""
    sys.stderr.write(f"probemarker {command}: {problem}\n")
    return code


def _cluster_problem(exc: Exception) -> str:
    """What a command that asks the cluster says of its refusal (`ApiError`: RBAC's
    403, a missing CRD's 404, ...) or its silence (any other `KubeError`)."""
    from probemarker.kube.connect.errors import ApiError

    if isinstance(exc, ApiError):
        return f"the API server refused: {printable(str(exc))}"
    return (
        f"the cluster did not answer: {printable(str(exc))}; check the kubeconfig "
        "(--kubeconfig, --context) and that its server is reachable"
    )


def _demo_signals() -> StopSignals:
    from probemarker.demo.stopping import StopSignals

    signals = StopSignals()
    signals.install()
    return signals


def demo_command(args: argparse.Namespace, signals: StopSignals) -> int:
    """`probemarker demo`: the simulated cluster, the daemon and a scenario; see docs/demo.md.
    `signals` holds the Ctrl-C and SIGTERM received since the command started (the
    demo's from then on, until the process ends): one received during the imports
    stops the demo as soon as it runs, with its summary."""
    import anyio

    try:
        from probemarker.demo.runner import DemoOptions
        from probemarker.demo.runner import main as demo_main
    except ModuleNotFoundError as exc:
        return needs_sim_extra("demo", exc)
    options = DemoOptions(fast=args.fast, plain=args.plain, log_file=args.log_file)
    return anyio.run(
        lambda: demo_main(
            options, out=sys.stdout, err=sys.stderr, environ=os.environ, signals=signals
        )
    )


def needs_sim_extra(command: str, missing: ModuleNotFoundError) -> int:
    """One line on stderr for `probemarker sim` or `demo` run without the `sim` extra
    (kubernetes_asyncio, cel-python, lark, google-re2, cryptography: a plain `pip
    install probemarker` has none of them; the daemon needs none): the fix first, then
    the module that was missing, which tells a broken install from a missing extra."""
    sys.stderr.write(
        f"probemarker {command} needs the sim extra: pip install 'probemarker[sim]' "
        f"(missing module {missing.name!r})\n"
    )
    return EXIT_UNREADABLE


class _StoppedStarting(BaseException):
    """A stop signal before the daemon's own handling began (BaseException, as
    KeyboardInterrupt: no `except Exception` on the way may swallow it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stop_starting(signum: int, _frame: object) -> None:
    raise _StoppedStarting(signum)


def render_crd() -> str:
    import yaml

    from probemarker.api.crd import build_crd

    header = "# Generated by `probemarker crd` from probemarker/api/rules.py; do not edit.\n"
    return header + yaml.safe_dump(build_crd(), sort_keys=False, width=1000)
