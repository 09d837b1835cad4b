"""Where the API server is and how to talk to it: a kubeconfig, or in-cluster.

Stage: start-up. Input: a kubeconfig path and context, or the pod's
environment and service-account files. Output: a `Connection` (server URL,
TLS material, credentials) from which `client.KubeClient` builds its session.

- `load_kubeconfig`: kubernetes_asyncio's loader reads the file (merged
  `KUBECONFIG` lists, contexts, client certificates, `exec` credential plugins,
  `insecure-skip-tls-verify`, `tls-server-name`). A user's `tokenFile` becomes a
  rotating `TokenFile`, an exec plugin an `ExecPlugin`.
- `load_incluster`: `KUBERNETES_SERVICE_HOST`/`_PORT`, the service account's CA
  and its projected token (re-read as it rotates), as client-go's
  `rest.InClusterConfig` does.

Errors are `ConfigError`s that name the file or variable and the fix.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from probemarker.kube.credentials import (
    Credentials,
    ExecPlugin,
    NoCredentials,
    StaticToken,
    TokenFile,
)
from probemarker.kube.errors import KubeError
from probemarker.kube.tlsresume import ResumingSSLContext, SessionCache

__all__ = [
    "SERVICE_ACCOUNT_DIR",
    "ConfigError",
    "Connection",
    "TlsMaterial",
    "load_incluster",
    "load_kubeconfig",
]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ConfigError(KubeError):
    """The connection cannot be configured; the message says what to fix."""


@dataclass(frozen=True, slots=True)
class TlsMaterial:
    """What the TLS handshake needs; `client.py` turns it into an `SSLContext`."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify: bool = True
    server_name: str | None = None  # kubeconfig `tls-server-name`

    def ssl_context(self, *, resume: bool, cache: SessionCache | None = None) -> ssl.SSLContext:
        """A client context; with `resume`, one that resumes TLS sessions."""
        context: ssl.SSLContext
        if resume:
            context = ResumingSSLContext(cache=cache)
        else:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if self.verify:
            if self.ca_file:
                context.load_verify_locations(self.ca_file)
            else:
                context.load_default_certs()
        else:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.cert_file and self.key_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context


@dataclass(frozen=True, slots=True)
class Connection:
    """An API server endpoint and the credentials to use with it."""

    server: str
    credentials: Credentials = field(default_factory=NoCredentials)
    tls: TlsMaterial | None = None
    source: str = ""  # where it came from, for logs and errors

    @property
    def https(self) -> bool:
        return self.server.startswith("https://")

    def __repr__(self) -> str:
        return f"Connection(server={self.server!r}, source={self.source!r})"


def _kubeconfig_paths(path: str | os.PathLike[str] | None) -> str:
    """The path list to load (`KUBECONFIG` may name several); the first must exist."""
    chosen = str(path) if path is not None else os.environ.get("KUBECONFIG", "~/.kube/config")
    chosen = os.pathsep.join(os.path.expanduser(p) for p in chosen.split(os.pathsep))
    first = Path(chosen.split(os.pathsep)[0])
    if not first.is_file():
        raise ConfigError(
            f"kubeconfig {str(first)!r} does not exist: pass --kubeconfig FILE "
            "(or set KUBECONFIG), or run in a pod to use the in-cluster config"
        )
    return chosen


def _one_line(err: BaseException) -> str:
    """An error's text on one line (YAML errors span several), or its type's name."""
    return " ".join(str(err).split()) or type(err).__name__


def _token_file_of(loader: Any) -> Path | None:
    """The chosen user's `tokenFile`, resolved against the directory of the file that
    declares it (the loader keeps which of the merged files each entry came from)."""
    user = getattr(loader, "_user", None)
    token_file = None if user is None else user.safe_get("tokenFile")
    if user is None or not token_file:
        return None
    path = Path(str(token_file))
    return path if path.is_absolute() else Path(loader._get_base_path(user.path)) / path


async def load_kubeconfig(
    path: str | os.PathLike[str] | None = None, *, context: str | None = None
) -> Connection:
    """The connection a kubeconfig file describes (default: `$KUBECONFIG`, ~/.kube/config)."""
    from kubernetes_asyncio.client import Configuration
    from kubernetes_asyncio.config import ConfigException, load_kube_config

    chosen = _kubeconfig_paths(path)
    configuration = Configuration()
    try:
        loader = await load_kube_config(
            config_file=chosen,
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    except (
        ConfigException,
        yaml.YAMLError,
        AssertionError,
        AttributeError,
        KeyError,
        TypeError,
        ValueError,
    ) as err:
        where = f"context {context!r} of " if context else ""
        raise ConfigError(
            f"cannot use {where}kubeconfig {chosen!r}: {_one_line(err)}; "
            "check the file with `kubectl config view`"
            + (" and `kubectl config get-contexts`" if context else "")
        ) from err
    credentials: Credentials
    token_file = _token_file_of(loader)
    user = getattr(loader, "_user", None)
    if token_file is not None:
        credentials = TokenFile(token_file)
    elif user is not None and "exec" in user:
        credentials = ExecPlugin(loader)
    elif configuration.api_key.get("BearerToken"):
        credentials = StaticToken(str(configuration.api_key["BearerToken"]))
    else:
        credentials = NoCredentials()
    server = str(configuration.host).rstrip("/")
    tls = None
    if server.startswith("https://"):
        tls = TlsMaterial(
            ca_file=configuration.ssl_ca_cert,
            cert_file=configuration.cert_file,
            key_file=configuration.key_file,
            verify=bool(configuration.verify_ssl),
            server_name=configuration.tls_server_name,
        )
    return Connection(
        server=server, credentials=credentials, tls=tls, source=f"kubeconfig {chosen}"
    )


def load_incluster(
    *,
    environ: Mapping[str, str] | None = None,
    account_dir: Path = SERVICE_ACCOUNT_DIR,
    token_reread_after: float = 60.0,
) -> Connection:
    """The connection of a pod's service account (client-go `rest.InClusterConfig`)."""
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ConfigError(
            "not running in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
            "are not set; pass --kubeconfig FILE to run outside a cluster"
        )
    token, ca = account_dir / "token", account_dir / "ca.crt"
    for needed in (token, ca):
        if not needed.is_file():
            raise ConfigError(
                f"in-cluster config: {needed} does not exist; the pod needs a service "
                "account token (automountServiceAccountToken must not be false)"
            )
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 service address
    return Connection(
        server=f"https://{host}:{port}",
        credentials=TokenFile(token, reread_after=token_reread_after),
        tls=TlsMaterial(ca_file=str(ca)),
        source="in-cluster",
    )
