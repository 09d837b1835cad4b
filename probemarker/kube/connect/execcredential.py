"""A kubeconfig `exec` credential plugin (client.authentication.k8s.io), run by us.

Stage: credentials, used by `client.py` through the `Credentials` protocol. Input: a
user's `exec` stanza. Output: the `Authorization` header, and (once, at start) a
client certificate when the plugin returns one.

As client-go's `plugin/pkg/client/auth/exec` does:
- the plugin runs with our environment plus its `env`, and `KUBERNETES_EXEC_INFO`
  holding an ExecCredential `spec` (`interactive: false`: a daemon has no terminal;
  the cluster's server and CA when `provideClusterInfo`); stdin is not connected;
- its stdout must be an ExecCredential of the same apiVersion with a `status`
  holding a `token` or a `clientCertificateData` and `clientKeyData` pair, and
  optionally an `expirationTimestamp`;
- the answer is used until it expires; after a 401 the plugin runs again.

Each run has a deadline (`run_timeout`) and its process is killed when it passes or
when the run is cancelled (a stop signal while a plugin waits for a login).
Parsing (`parse_exec_config`, `exec_info`, `parse_exec_credential`) is pure.
"""

from __future__ import annotations

import math
import os
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import anyio
import orjson
import structlog
from anyio.abc import ByteReceiveStream

from probemarker.kube.connect.errors import KubeError
from probemarker.kube.connect.kubecontext import ExecConfig

__all__ = ["ExecCredential", "ExecPlugin", "ExecPluginError", "exec_info", "parse_exec_credential"]

log = structlog.get_logger(__name__)

_STDERR_KEPT = 500  # characters of the plugin's stderr in an error message


class ExecPluginError(KubeError):
    """The plugin could not be run, failed, or answered something unusable."""


@dataclass(frozen=True, slots=True)
class ExecCredential:
    token: str | None = field(default=None, repr=False)
    cert_data: bytes | None = field(default=None, repr=False)
    key_data: bytes | None = field(default=None, repr=False)
    expires_at: float = math.inf  # wall-clock seconds


def exec_info(config: ExecConfig, cluster: Mapping[str, Any] | None) -> str:
    """The `KUBERNETES_EXEC_INFO` value: our side of the exchange."""
    spec: dict[str, Any] = {"interactive": False}
    if config.provide_cluster_info and cluster is not None:
        spec["cluster"] = dict(cluster)
    document = {"apiVersion": config.api_version, "kind": "ExecCredential", "spec": spec}
    return orjson.dumps(document).decode()


def parse_exec_credential(stdout: bytes, config: ExecConfig) -> ExecCredential:
    """The plugin's answer, checked as client-go checks it."""
    try:
        answer = orjson.loads(stdout)
    except orjson.JSONDecodeError:
        raise ExecPluginError("its output is not JSON (an ExecCredential is)") from None
    if not isinstance(answer, dict) or answer.get("kind") != "ExecCredential":
        raise ExecPluginError("its output is not an ExecCredential")
    if answer.get("apiVersion") != config.api_version:
        raise ExecPluginError(
            f"it answered apiVersion {answer.get('apiVersion')!r}, "
            f"not {config.api_version!r} as the kubeconfig asks"
        )
    status = answer.get("status")
    if not isinstance(status, dict):
        raise ExecPluginError("its ExecCredential has no status")
    token = status.get("token") or None
    cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
    if bool(cert) != bool(key):
        raise ExecPluginError("it returned only one of clientCertificateData, clientKeyData")
    if not token and not cert:
        raise ExecPluginError("its status has neither a token nor a client certificate")
    expires = math.inf
    stamp = status.get("expirationTimestamp")
    if stamp:
        try:
            expires = datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise ExecPluginError(f"expirationTimestamp {stamp!r} is not RFC 3339") from None
    return ExecCredential(
        token=str(token) if token else None,
        cert_data=str(cert).encode() if cert else None,
        key_data=str(key).encode() if key else None,
        expires_at=expires,
    )


class ExecPlugin:
    """The `Credentials` of an exec plugin: its answer, cached until it expires."""

    def __init__(
        self,
        config: ExecConfig,
        *,
        cluster: Mapping[str, Any] | None = None,
        run_timeout: float = 60.0,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self._cluster = cluster
        self._run_timeout = run_timeout
        self._wall = wall
        self._answer: ExecCredential | None = None
        self._lock = anyio.Lock()
        self.runs = 0

    def __repr__(self) -> str:
        return f"ExecPlugin({self.config.command!r})"

    async def credential(self) -> ExecCredential:
        """The current answer, running the plugin when there is none or it expired."""
        async with self._lock:  # concurrent requests wait for one run
            if self._answer is None or self._wall() >= self._answer.expires_at:
                self._answer = await self._run()
            return self._answer

    async def authorization(self) -> str | None:
        answer = await self.credential()
        return f"Bearer {answer.token}" if answer.token else None

    async def refresh(self) -> None:
        self._answer = None
        await self.credential()

    async def _run(self) -> ExecCredential:
        config = self.config
        env = {**os.environ, **config.env, "KUBERNETES_EXEC_INFO": exec_info(config, self._cluster)}
        log.info("credentials.exec_plugin_running", command=config.command)
        self.runs += 1
        try:
            with anyio.fail_after(self._run_timeout):
                returncode, stdout, stderr = await _run_reaped([config.command, *config.args], env)
        except TimeoutError:
            raise self._failed(f"it did not answer within {self._run_timeout:g}s") from None
        except OSError as err:
            hint = f" ({config.install_hint.strip()})" if config.install_hint.strip() else ""
            raise self._failed(f"cannot run it: {err.strerror or err}{hint}") from None
        if returncode != 0:
            said = " ".join(stderr.decode(errors="replace").split())[:_STDERR_KEPT]
            raise self._failed(f"it exited with {returncode}: {said or 'no output'}")
        try:
            return parse_exec_credential(stdout, config)
        except ExecPluginError as err:
            raise self._failed(str(err)) from None

    def _failed(self, problem: str) -> ExecPluginError:
        return ExecPluginError(
            f"exec credential plugin {self.config.command!r} of {self.config.where}: {problem}"
        )


async def _run_reaped(argv: list[str], env: Mapping[str, str]) -> tuple[int, bytes, bytes]:
    """The process's exit status, stdout and stderr. Cancelled (a stop signal, the
    run's deadline), it is killed and waited for before the cancel goes on, whenever
    the cancel comes.

    Not `anyio.run_process`: a cancel while asyncio is still starting the process (its
    `subprocess_exec` waits for the pipes) kills it there, but anyio cancels asyncio's
    wait for the exit too, so the process is not reaped before the loop closes; the
    child watcher's thread then logs, as plain text after our last JSON line, "Loop
    ... that handles pid N is closed". Starting is shielded instead (a moment); once
    started, `Process.aclose` kills it and waits, shielded, on a cancel.
    """
    with anyio.CancelScope(shield=True):
        process = await anyio.open_process(argv, env=env, stdin=subprocess.DEVNULL)
    outputs = [b"", b""]

    async def drain(stream: ByteReceiveStream | None, index: int) -> None:
        if stream is not None:
            outputs[index] = b"".join([chunk async for chunk in stream])

    async with process, anyio.create_task_group() as group:
        group.start_soon(drain, process.stdout, 0)
        group.start_soon(drain, process.stderr, 1)
        returncode = await process.wait()
    return returncode, outputs[0], outputs[1]
