"""The demo's containers: their files in a scratch directory, their exec, their HTTP.

Stage: demo edge (I/O: files, subprocesses, a listening socket). The sim runs an
exec command on this host, as this user, in a per-container working directory
(docs/sim.md), so `/home/game/idle.sh` and `/var/run/db/role`, which the examples
name, would be looked up in the host's own file system. Each demo container gets a
root under the scratch directory instead (`<scratch>/<namespace>/<pod>/<container>/`,
holding `home/game/idle.sh`, `var/run/db/role`, ...), and `MappedExec` runs the
example's command unchanged except that every path of one of the container's files is
replaced by that file's path under the root; the command still runs on the host,
through the sim's own `SubprocessRunner` (`sh`, `cat` and `test` are the host's).

The web containers answer HTTP on their pod's IP (the sim gives each pod its own
127.0.1.N, all on Linux's loopback) at the port declared as `http`, from the file
`/var/run/web/upstream`: `reachable` is 200, anything else 503.

Invariants: files are replaced atomically (a probe never reads half a file); every
listening socket is closed when `serving_http` exits.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import stat
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from aiohttp import web

from probemarker.demo.scenario import UPSTREAM, DemoPod
from probemarker.sim.exec.runners import ExecIO, ExecRequest, SubprocessRunner


class DemoError(Exception):
    """The demo cannot run here; the message says why and what to do."""


class ContainerFiles:
    """The files of every demo container, under `scratch`."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch

    def __repr__(self) -> str:
        return f"ContainerFiles({str(self.scratch)!r})"

    def root(self, pod: DemoPod) -> Path:
        return self.scratch / pod.namespace / pod.name / pod.container

    def host_path(self, pod: DemoPod, path: str) -> Path:
        """Where the container's file `path` lives on this host."""
        return self.root(pod) / path.lstrip("/")

    def create(self, pod: DemoPod) -> None:
        """Write the pod's files; scripts become executable (and must be able to run)."""
        for path, text in pod.files.items():
            self.write(pod, path, text)
        for path in pod.executables:
            host = self.host_path(pod, path)
            host.chmod(host.stat().st_mode | stat.S_IXUSR)
            if not os.access(host, os.X_OK):
                raise DemoError(
                    f"{host} cannot be executed: the scratch directory {self.scratch} is "
                    "on a file system mounted noexec; point TMPDIR at a directory where "
                    "scripts may run (TMPDIR=$HOME/tmp probemarker demo)"
                )

    def write(self, pod: DemoPod, path: str, text: str) -> None:
        """Replace the file at once: a probe running meanwhile reads the old or the new."""
        host = self.host_path(pod, path)
        host.parent.mkdir(parents=True, exist_ok=True)
        partial = host.with_name(f".{host.name}.new")
        partial.write_text(text, encoding="utf-8")
        if host.exists():
            partial.chmod(host.stat().st_mode)
        os.replace(partial, host)

    def read(self, pod: DemoPod, path: str) -> str:
        return self.host_path(pod, path).read_text(encoding="utf-8")

    def path_map(self, pod: DemoPod) -> dict[str, str]:
        return {path: str(self.host_path(pod, path)) for path in pod.files}


def map_command(command: Sequence[str], paths: Mapping[str, str]) -> tuple[str, ...]:
    """`command` with each container path of `paths` replaced by its host path, also
    inside an argument (`sh -c 'cat /var/run/db/role'`); in one pass (a host path,
    which ends with its container path, is never mapped again), longer paths first."""
    if not paths:
        return tuple(command)
    pattern = re.compile("|".join(re.escape(p) for p in sorted(paths, key=len, reverse=True)))
    return tuple(pattern.sub(lambda found: paths[found.group(0)], arg) for arg in command)


class MappedExec:
    """The sim's exec handler for one demo container (a `StreamHandler`)."""

    def __init__(self, files: ContainerFiles, pod: DemoPod, runner: SubprocessRunner) -> None:
        self._files, self._pod, self._runner = files, pod, runner

    def __repr__(self) -> str:
        return f"MappedExec({self._pod.key!r})"

    async def __call__(self, request: ExecRequest, io: ExecIO) -> int:
        mapped = replace(
            request,
            target=replace(request.target, workdir=self._files.root(self._pod)),
            command=map_command(request.command, self._files.path_map(self._pod)),
        )
        return await self._runner.run(mapped, io)


def free_port() -> int:
    """A port nobody listens on now (declared in the pod spec before the pod has an IP)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def upstream_app(files: ContainerFiles, pod: DemoPod) -> web.Application:
    """The web container's stand-in: `/healthz/upstream` answers from its file."""

    async def upstream(_request: web.Request) -> web.Response:
        state = files.read(pod, UPSTREAM).strip()
        status = 200 if state == "reachable" else 503
        return web.Response(status=status, text=f"upstream {state}\n")

    app = web.Application()
    app.router.add_get("/healthz/upstream", upstream)
    return app


@contextlib.asynccontextmanager
async def serving_http(
    files: ContainerFiles, pods: Sequence[tuple[DemoPod, str]], port: int
) -> AsyncIterator[None]:
    """Each (pod, IP) answers HTTP on `IP:port` until the block ends."""
    runners: list[web.AppRunner] = []
    try:
        for pod, ip in pods:
            runner = web.AppRunner(
                upstream_app(files, pod),
                access_log=None,
                handle_signals=False,
                shutdown_timeout=0.5,
            )
            runners.append(runner)
            await runner.setup()
            try:
                await web.TCPSite(runner, ip, port).start()
            except OSError as err:
                raise DemoError(
                    f"cannot listen on {ip}:{port}, the IP the sim gave pod {pod.key}: "
                    f"{err.strerror or err}; the demo needs every 127.x.y.z address on the "
                    "loopback interface, as Linux has them"
                ) from err
        yield
    finally:
        for runner in reversed(runners):
            await runner.cleanup()
