"""Credentials for the API server: the `Authorization` header, refreshed as tokens rotate.

Stage: used by `client.py` for every request. Input: a token source. Output:
the header value (or None).

- `StaticToken`: a token fixed in the kubeconfig.
- `TokenFile`: a bound service-account token projected into the pod. The
  kubelet rewrites the file before the token expires (by default after 80% of
  its one-hour life), so the file is re-read at least every `reread_after`
  seconds (client-go re-reads it every minute: transport/token_source.go
  `cachingTokenSource`), and at once after a 401.
- `ExecPlugin` (execcredential.py, re-exported here): a kubeconfig `exec`
  credential plugin; its token is cached until its `expirationTimestamp`, and a
  401 makes it run the plugin again.

Invariants: a failed re-read keeps the last good token (the kubelet may be
replacing the file: that is not a reason to stop talking to the API server);
no token is ever logged.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import structlog

from probemarker.kube.connect.execcredential import ExecPlugin

__all__ = ["Credentials", "ExecPlugin", "NoCredentials", "StaticToken", "TokenFile"]

log = structlog.get_logger(__name__)


class Credentials(Protocol):
    async def authorization(self) -> str | None:
        """The `Authorization` header value for the next request."""
        ...

    async def refresh(self) -> None:
        """The server answered 401: get a fresh credential now."""
        ...


class NoCredentials:
    async def authorization(self) -> str | None:
        return None

    async def refresh(self) -> None:
        return None

    def __repr__(self) -> str:
        return "NoCredentials()"


class StaticToken:
    def __init__(self, header: str) -> None:
        self._header = header

    async def authorization(self) -> str | None:
        return self._header

    async def refresh(self) -> None:
        return None  # nothing to re-read: the 401 stands

    def __repr__(self) -> str:
        return "StaticToken(<redacted>)"


class TokenFile:
    """A token file re-read every `reread_after` seconds and after a 401."""

    def __init__(
        self,
        path: str | Path,
        *,
        reread_after: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self.reread_after = reread_after
        self._clock = clock
        self._token: str | None = None
        self._read_at = float("-inf")
        self.reads = 0

    def _read(self) -> None:
        self._read_at = self._clock()
        try:
            token = self.path.read_text().strip()
        except OSError as err:
            if self._token is None:
                raise
            log.warning("credentials.token_reread_failed", path=str(self.path), error=str(err))
            return
        if not token and self._token is not None:
            log.warning("credentials.token_file_empty", path=str(self.path))
            return
        if token != self._token and self._token is not None:
            log.info("credentials.token_rotated", path=str(self.path))
        self._token = token
        self.reads += 1

    async def authorization(self) -> str | None:
        if self._clock() - self._read_at >= self.reread_after:
            self._read()
        return f"Bearer {self._token}" if self._token else None

    async def refresh(self) -> None:
        self._read()

    def __repr__(self) -> str:
        return f"TokenFile({str(self.path)!r}, reread_after={self.reread_after})"
