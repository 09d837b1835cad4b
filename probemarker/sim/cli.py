"""`probemarker sim serve`: run the simulated API server until SIGINT/SIGTERM.

    probemarker sim serve --port 8080 --kubeconfig-out /tmp/sim.kubeconfig \
        [--https] [--token T] [--nodes node-1,node-2]

Writes a kubeconfig for the server to `--kubeconfig-out` (so `kubectl
--kubeconfig FILE ...` works at once), prints the URL, and serves until
interrupted.  `main(argv)` takes the arguments after `sim` and returns the
process exit code.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path

import yaml

from probemarker.sim.cluster import SimCluster


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="probemarker sim", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the simulated API server")
    serve.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free)")
    serve.add_argument(
        "--kubeconfig-out",
        type=Path,
        required=True,
        help="where to write the kubeconfig for this server",
    )
    serve.add_argument("--https", action="store_true", help="serve HTTPS with a generated CA")
    serve.add_argument("--token", default=None, help="require this bearer token")
    serve.add_argument(
        "--nodes", default="node-1", help="comma-separated node names the simulated kubelet runs"
    )
    serve.add_argument(
        "--no-scheduler",
        action="store_true",
        help="leave pods without spec.nodeName Pending (default: bind them)",
    )
    serve.add_argument(
        "--history-limit",
        type=int,
        default=10000,
        help="watch events kept for resuming (older resumes get 410)",
    )
    return parser


def _write_kubeconfig(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


async def serve(args: argparse.Namespace) -> int:
    nodes = tuple(n.strip() for n in str(args.nodes).split(",") if n.strip())
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
            node_names=nodes,
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
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
    return 0


def main(argv: list[str]) -> int:
    """Entry point for `probemarker sim ...` (argv excludes `probemarker sim`)."""
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return asyncio.run(serve(args))
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
