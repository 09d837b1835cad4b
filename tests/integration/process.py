"""`probemarker run` as a real process against the sim, as a DaemonSet's container runs
it: its JSON log lines read as they come, signals, its exit code.

Used by the tests of signals, of a replaced daemon and of `probemarker status` through
a daemon's socket; the sim and the pods' scripted containers stay in the test's process.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson

Line = dict[str, Any]


class DaemonProcess:
    """A `python -m probemarker run` child: its JSON log lines, as they come."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[Line] = []

    async def wait_line(self, match: Callable[[Line], bool], *, within: float = 20.0) -> Line:
        """The first line (seen before or arriving now) that `match`es."""
        for line in self.lines:
            if match(line):
                return line
        assert self.process.stderr is not None
        async with asyncio.timeout(within):
            while True:
                raw = await self.process.stderr.readline()
                if not raw:
                    raise AssertionError(f"the daemon exited without such a line: {self.lines}")
                line = self._parse(raw)
                self.lines.append(line)
                if match(line):
                    return line

    async def wait_event(self, event: str, *, within: float = 20.0) -> Line:
        return await self.wait_line(lambda line: line.get("event") == event, within=within)

    def signal(self, signum: signal.Signals) -> None:
        self.process.send_signal(signum)

    async def exit_code(self, *, within: float) -> int:
        """Wait (bounded) for the exit, reading the rest of the log."""
        assert self.process.stderr is not None
        async with asyncio.timeout(within):
            rest = await self.process.stderr.read()
            code = await self.process.wait()
        self.lines.extend(self._parse(raw) for raw in rest.splitlines() if raw.strip())
        return code

    def events(self) -> list[str]:
        return [str(line.get("event")) for line in self.lines]

    def outline(self) -> list[str]:
        """The events, each line that is not JSON with its text (for a failure message)."""
        return [
            f"{line['event']}: {line['text']!r}" if "text" in line else str(line.get("event"))
            for line in self.lines
        ]

    @staticmethod
    def _parse(raw: bytes) -> Line:
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return {"event": "<not json>", "text": raw.decode(errors="replace")}
        return parsed if isinstance(parsed, dict) else {"event": "<not an object>"}


def environment() -> dict[str, str]:
    """This process's environment without anything that would choose another server."""
    drop = ("KUBECONFIG", "NODE_NAME", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
    env = {
        k: v for k, v in os.environ.items() if k not in drop and not k.startswith("PROBEMARKER_")
    }
    # The health and metrics server on a free port (never the fixed default in a test).
    env["PROBEMARKER_METRICS_ADDRESS"] = "127.0.0.1:0"
    return env


@asynccontextmanager
async def daemon(
    kubeconfig: Path,
    *args: str,
    variable: str | None = None,
    env: Mapping[str, str] | None = None,
) -> AsyncIterator[DaemonProcess]:
    """The daemon with `--kubeconfig`, or with the kubeconfig in the variable `variable`;
    `env` adds variables (as a DaemonSet's `env` does). Killed on exit if still running."""
    env = {**environment(), **(env or {})}
    where = ["--kubeconfig", str(kubeconfig)]
    if variable is not None:
        env[variable], where = str(kubeconfig), []
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "probemarker",
        "run",
        *where,
        "--node",
        "node-1",
        "--log-format",
        "json",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        yield DaemonProcess(process)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
