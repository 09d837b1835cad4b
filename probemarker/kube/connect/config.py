"""Where the API server is and how to talk to it: a kubeconfig, or in-cluster.

Stage: start-up. Input: a kubeconfig path (or a `KUBECONFIG` list) and context, or
the pod's environment and service-account files. Output: a `Connection` (server URL,
TLS material, credentials) from which `client.KubeClient` builds its session.

- `load_kubeconfig`: our own loader (`kubeconfig.py` reads and merges the files as
  kubectl does, `kubecontext.py` chooses the context), so the daemon never imports
  kubernetes_asyncio's generated models (about 37 MiB of RSS). A user's `tokenFile`
  becomes a rotating `TokenFile`, an exec plugin an `ExecPlugin` (run once here, so a
  client certificate it returns goes into the TLS material, and a broken plugin is
  one line at start).
- `load_incluster`: `KUBERNETES_SERVICE_HOST`/`_PORT`, the service account's CA
  and its projected token (re-read as it rotates), as client-go's
  `rest.InClusterConfig` does.

- `connect`: one of the two, as `ConnectionSettings` say (--kubeconfig and --context, as
  every command that talks to a cluster reads them: `run`, `check`, `status`).

Both also say the connection's default namespace, as kubectl's
`ClientConfig.Namespace()` does: the kubeconfig context's `namespace`; in a pod
`POD_NAMESPACE`, else the service account's `namespace` file; else `default`.

Errors are `ConfigError`s: one line that names the file or variable and the fix.
"""

from __future__ import annotations

import base64
import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probemarker.kube.connect.credentials import (
    Credentials,
    ExecPlugin,
    NoCredentials,
    StaticToken,
    TokenFile,
)
from probemarker.kube.connect.execcredential import ExecPluginError
from probemarker.kube.connect.kubeconfig import (
    ConfigError,
    merge_kubeconfigs,
    read_kubeconfigs,
    split_paths,
)
from probemarker.kube.connect.kubecontext import Target, choose_target
from probemarker.kube.connect.tlsresume import ResumingSSLContext, SessionCache

__all__ = [
    "SERVICE_ACCOUNT_DIR",
    "ConfigError",
    "Connection",
    "ConnectionSettings",
    "TlsMaterial",
    "connect",
    "load_incluster",
    "load_kubeconfig",
]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass(frozen=True, slots=True)
class TlsMaterial:
    """What the TLS handshake needs; `client.py` turns it into an `SSLContext`.
    A certificate or key given as data (a kubeconfig's `-data` field, an exec
    plugin's answer) is never logged, and is on disk only while it is loaded."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify: bool = True
    server_name: str | None = None  # kubeconfig `tls-server-name`
    ca_data: str | None = None  # PEM
    cert_data: bytes | None = field(default=None, repr=False)
    key_data: bytes | None = field(default=None, repr=False)

    def ssl_context(self, *, resume: bool, cache: SessionCache | None = None) -> ssl.SSLContext:
        """A client context; with `resume`, one that resumes TLS sessions."""
        context: ssl.SSLContext
        if resume:
            context = ResumingSSLContext(cache=cache)
        else:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if self.verify:
            if self.ca_file or self.ca_data:
                context.load_verify_locations(cafile=self.ca_file, cadata=self.ca_data)
            else:
                context.load_default_certs()
        else:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        has_cert = bool(self.cert_file or self.cert_data)
        if has_cert and (self.key_file or self.key_data):
            with (
                _as_file(self.cert_file, self.cert_data) as cert,
                _as_file(self.key_file, self.key_data) as key,
            ):
                context.load_cert_chain(cert, key)
        return context


@contextlib.contextmanager
def _as_file(path: str | None, data: bytes | None) -> Iterator[str]:
    """`path`, or `data` in a private temporary file for as long as it is read (the ssl
    module loads certificate chains from files only)."""
    if data is None:
        yield path or ""
        return
    with tempfile.TemporaryDirectory(prefix="probemarker-tls-") as directory:
        name = os.path.join(directory, "pem")  # the directory is 0700
        with open(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
            out.write(data)
        yield name


@dataclass(frozen=True, slots=True)
class Connection:
    """An API server endpoint and the credentials to use with it."""

    server: str
    credentials: Credentials = field(default_factory=NoCredentials)
    tls: TlsMaterial | None = None
    source: str = ""  # where it came from, for logs and errors
    # kubectl's default namespace for this connection, and where it came from
    namespace: str = "default"
    namespace_from: str = "the default: no kubeconfig context or pod gives one"

    @property
    def https(self) -> bool:
        return self.server.startswith("https://")

    def __repr__(self) -> str:
        return f"Connection(server={self.server!r}, source={self.source!r})"


async def load_kubeconfig(
    path: str | os.PathLike[str] | None = None,
    *,
    context: str | None = None,
    exec_timeout: float = 60.0,
) -> Connection:
    """The connection a kubeconfig describes. `path` is one file or a `KUBECONFIG`-style
    list (merged as kubectl merges it); default `$KUBECONFIG`, else ~/.kube/config."""
    chosen = str(path) if path is not None else os.environ.get("KUBECONFIG") or "~/.kube/config"
    merged = merge_kubeconfigs(read_kubeconfigs(split_paths(chosen)))
    target = choose_target(merged, context)
    source = f"kubeconfig {merged.where}, context {target.context}"
    namespace, namespace_from = _context_namespace(target)
    credentials, cert, key = await _credentials(target, exec_timeout)
    return Connection(
        server=target.server,
        credentials=credentials,
        tls=_tls(target, cert, key, source),
        source=source,
        namespace=namespace,
        namespace_from=namespace_from,
    )


def _tls(target: Target, cert: bytes | None, key: bytes | None, source: str) -> TlsMaterial | None:
    """The TLS material of an https `target` (an exec plugin's `cert` and `key` win
    over the kubeconfig's), checked now; None for plain http."""
    if not target.server.startswith("https://"):
        return None
    tls = TlsMaterial(
        ca_file=target.ca_file,
        ca_data=target.ca_data,
        cert_file=None if cert else target.cert_file,
        cert_data=cert or target.cert_data,
        key_file=None if key else target.key_file,
        key_data=key or target.key_data,
        verify=not target.insecure,
        server_name=target.tls_server_name,
    )
    try:
        tls.ssl_context(resume=False)  # a missing or broken file is one line now
    except (OSError, ssl.SSLError, ValueError) as err:
        raise ConfigError(
            f"cannot use the TLS material of {source}: {_reason(err)}; check its "
            "certificate-authority and client-certificate/-key"
        ) from None
    return tls


def _context_namespace(target: Target) -> tuple[str, str]:
    """client-go's `DirectClientConfig.Namespace`: the context's, else `default`."""
    if target.namespace:
        return target.namespace, f"the namespace of kubeconfig context {target.context}"
    return "default", f"the default: kubeconfig context {target.context} sets no namespace"


async def _credentials(
    target: Target, exec_timeout: float
) -> tuple[Credentials, bytes | None, bytes | None]:
    """The credentials, and a client certificate and key an exec plugin returned."""
    if target.token_file is not None:
        return TokenFile(target.token_file), None, None
    if target.exec is not None:
        plugin = ExecPlugin(target.exec, cluster=_cluster_info(target), run_timeout=exec_timeout)
        try:
            answer = await plugin.credential()
        except ExecPluginError as err:
            raise ConfigError(str(err)) from None
        return plugin, answer.cert_data, answer.key_data
    if target.token:
        return StaticToken(f"Bearer {target.token}"), None, None
    if target.basic is not None:
        pair = f"{target.basic.username}:{target.basic.password}".encode()
        return StaticToken(f"Basic {base64.b64encode(pair).decode()}"), None, None
    return NoCredentials(), None, None


def _cluster_info(target: Target) -> dict[str, Any]:
    """The cluster as an exec plugin with `provideClusterInfo` sees it (client-go's
    `clientauthentication.Cluster`)."""
    info: dict[str, Any] = {"server": target.server}
    if target.tls_server_name:
        info["tls-server-name"] = target.tls_server_name
    if target.insecure:
        info["insecure-skip-tls-verify"] = True
    ca = target.ca_data.encode() if target.ca_data else None
    if ca is None and target.ca_file:
        with contextlib.suppress(OSError):
            ca = Path(target.ca_file).read_bytes()
    if ca:
        info["certificate-authority-data"] = base64.b64encode(ca).decode()
    return info


def _reason(err: BaseException) -> str:
    if isinstance(err, OSError) and err.strerror:
        return f"{err.strerror}: {err.filename}" if err.filename else err.strerror
    return " ".join(str(err).split()) or type(err).__name__


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
            "are not set; pass --kubeconfig FILE (or set KUBECONFIG) to run outside a cluster"
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
    namespace, namespace_from = _pod_namespace(env, account_dir)
    return Connection(
        server=f"https://{host}:{port}",
        credentials=TokenFile(token, reread_after=token_reread_after),
        tls=TlsMaterial(ca_file=str(ca)),
        source="in-cluster",
        namespace=namespace,
        namespace_from=namespace_from,
    )


def _pod_namespace(env: Mapping[str, str], account_dir: Path) -> tuple[str, str]:
    """client-go's `inClusterClientConfig.Namespace`: POD_NAMESPACE (the downward API),
    else the service account's namespace file, else `default`."""
    if env.get("POD_NAMESPACE"):
        return env["POD_NAMESPACE"], "POD_NAMESPACE"
    path = account_dir / "namespace"
    with contextlib.suppress(OSError, UnicodeDecodeError):
        text = path.read_text(encoding="utf-8").strip()
        if text:
            return text, f"the service account's namespace ({path})"
    return "default", "the default: the pod gives no namespace"


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """Which API server: a kubeconfig (a file or a `KUBECONFIG` list) and its context,
    or, with no kubeconfig, the pod's in-cluster configuration."""

    kubeconfig: str | None = None
    context: str | None = None


async def connect(
    settings: ConnectionSettings, environ: Mapping[str, str] | None = None
) -> Connection:
    """A kubeconfig when one is named, else the pod's in-cluster configuration."""
    if settings.kubeconfig:
        return await load_kubeconfig(settings.kubeconfig, context=settings.context)
    return load_incluster(environ=dict(os.environ if environ is None else environ))
