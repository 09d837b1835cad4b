"""Choosing a context of a merged kubeconfig: where the API server is, and how to talk to it.

Stage: start-up, between `kubeconfig.py` (files, merged) and `config.load_kubeconfig`
(a `Connection`). Input: a `Merged` kubeconfig and a context name. Output: a `Target`,
or `ConfigError` with one line naming the file, the entry and the fix. Pure.

As client-go (`tools/clientcmd/client_config.go`, `validation.go`):
- the context is `--context`, else `current-context`; it must name a cluster that
  exists, and a user that exists when it names one;
- `-data` fields (base64) win over the file fields beside them; file paths are
  already relative to the file that declared the entry;
- credentials, first that applies: `tokenFile` (re-read as it rotates), an `exec`
  plugin, `token`, `username`/`password`, an oidc `auth-provider`'s `id-token`;
- an exec `command` containing a `/` is relative to the kubeconfig; a bare name is
  looked up on PATH;
- the context's `namespace` is the default namespace of commands that take one
  (`probemarker check -f`), as kubectl's (`DirectClientConfig.Namespace`).
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probemarker.kube.connect.kubeconfig import Body, ConfigError, Entry, Merged, resolve_path

__all__ = [
    "API_VERSIONS",
    "BasicAuth",
    "ExecConfig",
    "Target",
    "choose_target",
    "parse_exec_config",
]

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")


@dataclass(frozen=True, slots=True)
class ExecConfig:
    command: str
    api_version: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    provide_cluster_info: bool = False
    install_hint: str = ""
    where: str = ""  # which kubeconfig entry, for messages


@dataclass(frozen=True, slots=True)
class BasicAuth:
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class Target:
    """What the chosen context says: where the API server is and how to talk to it."""

    server: str
    context: str
    ca_file: str | None = None
    ca_data: str | None = None  # PEM
    cert_file: str | None = None
    cert_data: bytes | None = field(default=None, repr=False)
    key_file: str | None = None
    key_data: bytes | None = field(default=None, repr=False)
    insecure: bool = False
    tls_server_name: str | None = None
    token: str | None = field(default=None, repr=False)
    token_file: Path | None = None
    basic: BasicAuth | None = None
    exec: ExecConfig | None = None
    namespace: str | None = None  # the context's `namespace`, if it sets one


def choose_target(merged: Merged, context: str | None = None) -> Target:
    """The chosen context (`context`, else current-context) as a `Target`."""
    where = f"kubeconfig {merged.where!r}"
    name = context or merged.current_context
    if not merged.contexts and not merged.clusters:
        raise ConfigError(
            f"{where} has no clusters and no contexts (is it empty?): use a kubeconfig "
            "with a context, as `kubectl config view --raw` prints one"
        )
    if not name:
        raise ConfigError(
            f"{where} sets no current-context: pass --context NAME "
            f"(its contexts: {_names(merged.contexts)}; `kubectl config get-contexts`)"
        )
    chosen = merged.contexts.get(name)
    if chosen is None:
        raise ConfigError(
            f"{where} has no context {name!r} (its contexts: {_names(merged.contexts)}); "
            "see `kubectl config get-contexts`"
        )
    cluster_name = chosen.body.get("cluster")
    cluster = merged.clusters.get(cluster_name) if isinstance(cluster_name, str) else None
    if cluster is None:
        raise ConfigError(
            f"{where}: context {name!r} names cluster {cluster_name!r}, which the "
            f"kubeconfig does not define (its clusters: {_names(merged.clusters)})"
        )
    user_name = chosen.body.get("user")
    user = None
    if user_name:
        user = merged.users.get(str(user_name))
        if user is None:
            raise ConfigError(
                f"{where}: context {name!r} names user {user_name!r}, which the "
                f"kubeconfig does not define (its users: {_names(merged.users)})"
            )
    namespace = chosen.body.get("namespace")
    return _target(name, cluster, user, namespace=str(namespace) if namespace else None)


def _target(
    context: str, cluster: Entry, user: Entry | None, *, namespace: str | None = None
) -> Target:
    c = cluster.body
    server = str(c.get("server") or "").rstrip("/")
    if not server.startswith(("https://", "http://")):
        problem = "has no server" if not server else f"has server {server!r}"
        raise ConfigError(
            f"kubeconfig {str(cluster.origin)!r}: cluster {cluster.name!r} {problem}; "
            "it needs a URL such as https://host:6443"
        )
    if c.get("proxy-url"):
        raise ConfigError(
            f"kubeconfig {str(cluster.origin)!r}: cluster {cluster.name!r} sets proxy-url, "
            "which probemarker does not support; reach the API server directly"
        )
    ca_data = _decoded(c, "certificate-authority-data", f"cluster {cluster.name!r}", cluster)
    parts: dict[str, Any] = {
        "server": server,
        "context": context,
        "ca_data": ca_data.decode("utf-8", "replace") if ca_data else None,
        "ca_file": None if ca_data else _path(c, "certificate-authority", cluster),
        "insecure": bool(c.get("insecure-skip-tls-verify")),
        "tls_server_name": str(c.get("tls-server-name") or "") or None,
        "namespace": namespace,
    }
    if user is not None:
        parts.update(_credentials(user))
    return Target(**parts)


def _credentials(user: Entry) -> dict[str, Any]:
    u = user.body
    cert_data = _decoded(u, "client-certificate-data", f"user {user.name!r}", user)
    key_data = _decoded(u, "client-key-data", f"user {user.name!r}", user)
    parts: dict[str, Any] = {
        "cert_data": cert_data,
        "cert_file": None if cert_data else _path(u, "client-certificate", user),
        "key_data": key_data,
        "key_file": None if key_data else _path(u, "client-key", user),
    }
    token_file = _path(u, "tokenFile", user)
    if token_file:
        parts["token_file"] = Path(token_file)
    elif u.get("exec"):
        where = f"kubeconfig {str(user.origin)!r}: user {user.name!r}: exec"
        parts["exec"] = parse_exec_config(u["exec"], origin=user.origin, where=where)
    elif u.get("token"):
        parts["token"] = str(u["token"])
    elif u.get("username") or u.get("password"):
        parts["basic"] = BasicAuth(str(u.get("username") or ""), str(u.get("password") or ""))
    elif u.get("auth-provider"):
        parts["token"] = _auth_provider_token(u["auth-provider"], user)
    return parts


def _auth_provider_token(provider: Any, user: Entry) -> str:
    """kubectl's oidc provider sends its `id-token`; the gcp and azure providers were
    removed from kubectl (1.26) in favour of exec plugins."""
    name = provider.get("name") if isinstance(provider, dict) else None
    settings = provider.get("config") if isinstance(provider, dict) else None
    token = settings.get("id-token") if isinstance(settings, dict) else None
    if name == "oidc" and token:
        return str(token)
    raise ConfigError(
        f"kubeconfig {str(user.origin)!r}: user {user.name!r}: auth-provider {name!r} is "
        "not supported; use an exec credential plugin (kubectl removed the gcp and azure "
        "providers in 1.26; kubelogin serves oidc)"
    )


def _path(body: Body, key: str, entry: Entry) -> str | None:
    value = body.get(key)
    return resolve_path(str(value), entry.origin) if value else None


def _decoded(body: Body, key: str, what: str, entry: Entry) -> bytes | None:
    value = body.get(key)
    if not value:
        return None
    try:
        return base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(
            f"kubeconfig {str(entry.origin)!r}: {what}: {key} is not base64"
        ) from None


def parse_exec_config(body: Any, *, origin: Path, where: str) -> ExecConfig:
    """A user's `exec` stanza; `command` relative to the kubeconfig when it has a `/`
    (client-go resolves only those: a bare name is looked up on PATH)."""
    if not isinstance(body, dict):
        raise _config_error(where, "must be a mapping")
    command, version = body.get("command"), body.get("apiVersion")
    if not command or not isinstance(command, str):
        raise _config_error(where, "needs a command")
    if version not in API_VERSIONS:
        raise _config_error(
            where, f"apiVersion {version!r} is not one of {', '.join(API_VERSIONS)}"
        )
    if body.get("interactiveMode") == "Always":
        raise _config_error(
            where, "interactiveMode Always needs a terminal, which the daemon does not have"
        )
    if "/" in command and not os.path.isabs(command):
        command = str(Path(os.path.abspath(origin.parent)) / command)
    args = body.get("args") or []
    env_items = body.get("env") or []
    if not isinstance(args, list) or not isinstance(env_items, list):
        raise _config_error(where, "args and env must be lists")
    env = {}
    for item in env_items:
        if not isinstance(item, dict) or "name" not in item:
            raise _config_error(where, "each env entry needs a name and a value")
        env[str(item["name"])] = str(item.get("value") or "")
    return ExecConfig(
        command=command,
        api_version=version,
        args=tuple(str(a) for a in args),
        env=env,
        provide_cluster_info=bool(body.get("provideClusterInfo")),
        install_hint=str(body.get("installHint") or ""),
        where=where,
    )


def _config_error(where: str, problem: str) -> ConfigError:
    return ConfigError(f"{where}: {problem}")


def _names(entries: Mapping[str, Entry]) -> str:
    return ", ".join(sorted(entries)) or "none"
