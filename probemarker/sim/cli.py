"""`probemarker sim serve`: run the simulated API server until SIGINT/SIGTERM.

    probemarker sim serve --kubeconfig-out /tmp/sim.kubeconfig [--port 8080] \
        [--https] [--token T] [--nodes node-1,node-2]

Writes a kubeconfig for the server to `--kubeconfig-out` (so `kubectl
--kubeconfig FILE ...` works at once), prints the URL, logs to stderr, and serves
until interrupted.  `main(argv)` takes the arguments after `sim` and returns the
process exit code: 0 after SIGINT/SIGTERM, 2 when it cannot start (the port is in
use, the kubeconfig cannot be written, a bad option), with a one-line error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from pathlib import Path

import yaml

from probemarker.sim.cluster import ListenError, SimCluster

EXIT_OK = 0
EXIT_CANNOT_START = 2

DEFAULT_PORT = 0
DEFAULT_NODES = "node-1"
DEFAULT_HISTORY_LIMIT = 10000


class CannotStart(Exception):
    """The server cannot start; the message names what and how to fix it."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="probemarker sim",
        description="The simulated Kubernetes API server, for tests and trying things "
        "by hand (see docs/sim.md). Not a cluster: exec runs commands on this host.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="run the simulated API server until SIGINT/SIGTERM",
        description="Run the simulated API server on 127.0.0.1 until SIGINT/SIGTERM; "
        "write a kubeconfig for it. Logs go to stderr.",
    )
    _add_server_options(serve)
    _add_cluster_options(serve)
    return parser


def _add_server_options(serve: argparse.ArgumentParser) -> None:
    """Where and how it listens; every option's help states its default."""
    serve.add_argument(
        "--kubeconfig-out",
        type=Path,
        required=True,
        metavar="FILE",
        help="where to write the kubeconfig for this server (required)",
    )
    serve.add_argument(
        "--port",
        type=_port,
        default=DEFAULT_PORT,
        metavar="N",
        help=f"port on 127.0.0.1; 0 picks a free one (default: {DEFAULT_PORT})",
    )
    serve.add_argument(
        "--https",
        action="store_true",
        help="serve HTTPS with a CA generated at start (default: plain HTTP)",
    )
    serve.add_argument(
        "--token",
        default=None,
        metavar="T",
        help="require 'Authorization: Bearer T' on every request "
        "(default: none, every request is allowed)",
    )


def _add_cluster_options(serve: argparse.ArgumentParser) -> None:
    """What the simulated cluster runs; every option's help states its default."""
    serve.add_argument(
        "--nodes",
        type=_nodes,
        default=_nodes(DEFAULT_NODES),
        metavar="A,B",
        help="comma-separated names of the nodes the simulated kubelet runs; pods bound "
        f"to other nodes stay Pending (default: {DEFAULT_NODES})",
    )
    serve.add_argument(
        "--no-scheduler",
        action="store_true",
        help="leave pods without spec.nodeName Pending "
        "(default: the scheduler binds them to a node)",
    )
    serve.add_argument(
        "--history-limit",
        type=int,
        default=DEFAULT_HISTORY_LIMIT,
        metavar="N",
        help="watch events kept for resuming; older resumes get 410 Gone "
        f"(default: {DEFAULT_HISTORY_LIMIT})",
    )


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not between 0 (any free port) and 65535")
    return port


def _nodes(text: str) -> tuple[str, ...]:
    nodes = tuple(n.strip() for n in text.split(",") if n.strip())
    if not nodes:
        raise argparse.ArgumentTypeError("give at least one node name, e.g. --nodes node-1")
    return nodes


def _write_kubeconfig(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as exc:
        raise CannotStart(
            f"cannot write the kubeconfig to {path}: {exc.strerror or exc}; "
            "give --kubeconfig-out a path in a writable directory"
        ) from exc


def _listen_problem(exc: ListenError) -> str:
    fix = f"pick another port (--port {exc.port + 1}) or let the sim pick a free one (--port 0)"
    if exc.in_use:
        return f"{exc} (another process is listening there); {fix}"
    return f"{exc}; {fix}"


async def serve(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with SimCluster(
            port=args.port,
            https=args.https,
            token=args.token,
            history_limit=args.history_limit,
            node_names=args.nodes,
            scheduler=not args.no_scheduler,
        ) as sim:
            out: Path = args.kubeconfig_out
            await asyncio.to_thread(_write_kubeconfig, out, yaml.safe_dump(sim.kubeconfig()))
            print(f"probemarker sim serving on {sim.url}", flush=True)
            print(
                f"kubeconfig written to {out}; try: kubectl --kubeconfig {out} get nodes",
                flush=True,
            )
            await stop.wait()
    except ListenError as exc:
        raise CannotStart(_listen_problem(exc)) from exc
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
    return EXIT_OK


def main(argv: list[str]) -> int:
    """Entry point for `probemarker sim ...` (argv excludes `probemarker sim`)."""
    args = build_parser().parse_args(argv)
    if args.https:
        # cryptography (of the sim extra) makes the CA, and is imported only in HTTPS
        # mode: a missing one raises ModuleNotFoundError here, before anything starts,
        # for `probemarker sim` to say which extra to install (cli.needs_sim_extra).
        import probemarker.sim.server.harness.tls  # noqa: F401
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return asyncio.run(serve(args))
    except CannotStart as exc:
        sys.stderr.write(f"probemarker sim: {exc}\n")
        return EXIT_CANNOT_START


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
