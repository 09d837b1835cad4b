"""Our kubeconfig loader (kubeconfig.py, kubecontext.py): kubectl's rules, table-driven.

Merging (client-go loader.go): the first file naming an entry wins whole; the first
current-context wins; missing files of a list are skipped; relative paths are relative
to the file that declares the entry. Choosing (client_config.go): the context, its
cluster and user; `-data` over files; the credential precedence.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from probemarker.kube.connect.kubeconfig import (
    ConfigError,
    Entry,
    KubeconfigFile,
    merge_kubeconfigs,
    parse_kubeconfig,
    read_kubeconfigs,
    resolve_path,
    split_paths,
)
from probemarker.kube.connect.kubecontext import BasicAuth, Target, choose_target

HERE = Path("/cfg/main.yaml")
OTHER = Path("/elsewhere/users.yaml")


def config(
    *,
    clusters: dict[str, dict[str, Any]] | None = None,
    users: dict[str, dict[str, Any]] | None = None,
    contexts: dict[str, dict[str, Any]] | None = None,
    current: str | None = None,
) -> str:
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in (clusters or {}).items()],
        "users": [{"name": n, "user": u} for n, u in (users or {}).items()],
        "contexts": [{"name": n, "context": c} for n, c in (contexts or {}).items()],
    }
    if current is not None:
        document["current-context"] = current
    return yaml.safe_dump(document)


def one(
    cluster: dict[str, Any] | None = None, user: dict[str, Any] | None = None
) -> KubeconfigFile:
    """A file with one context `c` of cluster `k` and user `u`."""
    text = config(
        clusters={"k": {"server": "https://api:6443", **(cluster or {})}},
        users={"u": user or {}},
        contexts={"c": {"cluster": "k", "user": "u"}},
        current="c",
    )
    return parse_kubeconfig(text, HERE)


def target(cluster: dict[str, Any] | None = None, user: dict[str, Any] | None = None) -> Target:
    return choose_target(merge_kubeconfigs([one(cluster, user)]))


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# -- parsing ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        pytest.param("- a\n- b\n", "its top level is a list", id="a-list"),
        pytest.param("just text", "its top level is a string", id="a-string"),
        pytest.param("clusters: {a: 1}", "clusters must be a list", id="clusters-map"),
        pytest.param("users: [{user: {}}]", "users[0] needs a name", id="no-name"),
        pytest.param("contexts: [{name: c, context: [1]}]", "context must be a mapping", id="bad"),
        pytest.param("current-context: [a]", "current-context must be a string", id="cc"),
        pytest.param("clusters: [\n", "is not YAML: ", id="not-yaml"),
    ],
)
def test_parse_refuses_with_one_line(text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_kubeconfig(text, HERE)
    assert needle in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("text", ["", "\n", "# nothing\n", "---\n"])
def test_an_empty_file_is_an_empty_config(text: str) -> None:
    assert parse_kubeconfig(text, HERE) == KubeconfigFile(HERE)


def test_entries_remember_their_file() -> None:
    parsed = parse_kubeconfig(config(users={"u": {"token": "t"}}), OTHER)
    assert parsed.users == (Entry("u", {"token": "t"}, OTHER),)


# -- merging ---------------------------------------------------------------------------


def test_first_file_wins_per_entry_whole() -> None:
    """A second file's `u` is ignored entirely, even fields the first lacks (loader.go)."""
    first = parse_kubeconfig(config(users={"u": {"token": "one"}}), HERE)
    second = parse_kubeconfig(
        config(users={"u": {"token": "two", "username": "x"}, "v": {"token": "v"}}), OTHER
    )
    merged = merge_kubeconfigs([first, second])
    assert merged.users["u"] == Entry("u", {"token": "one"}, HERE)
    assert merged.users["v"].origin == OTHER
    assert merged.paths == (HERE, OTHER)


@pytest.mark.parametrize(
    ("currents", "expected"),
    [
        pytest.param(["a", "b"], "a", id="first-wins"),
        pytest.param([None, "b"], "b", id="first-that-sets-it"),
        pytest.param(["", "b"], "b", id="empty-is-unset"),
        pytest.param([None, None], "", id="none"),
    ],
)
def test_first_current_context_wins(currents: list[str | None], expected: str) -> None:
    files = [parse_kubeconfig(config(current=c), HERE) for c in currents]
    assert merge_kubeconfigs(files).current_context == expected


@pytest.mark.parametrize(
    ("value", "origin", "expected"),
    [
        pytest.param("ca.crt", Path("/cfg/kc"), "/cfg/ca.crt", id="relative"),
        pytest.param("../ca.crt", Path("/cfg/kc"), "/cfg/../ca.crt", id="up"),
        pytest.param("/abs/ca.crt", Path("/cfg/kc"), "/abs/ca.crt", id="absolute"),
        pytest.param("", Path("/cfg/kc"), "", id="empty"),
    ],
)
def test_resolve_path(value: str, origin: Path, expected: str) -> None:
    assert resolve_path(value, origin) == expected


def test_split_paths_drops_empty_entries() -> None:
    assert split_paths(os.pathsep.join(["/a", "", "/b"])) == ["/a", "/b"]


# -- choosing the context --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "context", "needle"),
    [
        pytest.param("", None, "has no clusters and no contexts (is it empty?)", id="empty"),
        pytest.param(
            config(clusters={"k": {"server": "https://a"}}, contexts={"c": {"cluster": "k"}}),
            None,
            "sets no current-context: pass --context NAME (its contexts: c;",
            id="no-current",
        ),
        pytest.param(
            config(clusters={"k": {"server": "https://a"}}, contexts={"c": {"cluster": "k"}}),
            "d",
            "has no context 'd' (its contexts: c); see `kubectl config get-contexts`",
            id="unknown-context",
        ),
        pytest.param(
            config(contexts={"c": {"cluster": "gone"}}, current="c"),
            None,
            "context 'c' names cluster 'gone', which the kubeconfig does not define",
            id="missing-cluster",
        ),
        pytest.param(
            config(
                clusters={"k": {"server": "https://a"}},
                contexts={"c": {"cluster": "k", "user": "who"}},
                current="c",
            ),
            None,
            "context 'c' names user 'who', which the kubeconfig does not define",
            id="missing-user",
        ),
        pytest.param(
            config(clusters={"k": {}}, contexts={"c": {"cluster": "k"}}, current="c"),
            None,
            "cluster 'k' has no server; it needs a URL such as https://host:6443",
            id="no-server",
        ),
        pytest.param(
            config(clusters={"k": {"server": "api:6443"}}, contexts={"c": {"cluster": "k"}}),
            "c",
            "cluster 'k' has server 'api:6443'",
            id="no-scheme",
        ),
        pytest.param(
            config(
                clusters={"k": {"server": "https://a", "proxy-url": "http://p"}},
                contexts={"c": {"cluster": "k"}},
            ),
            "c",
            "sets proxy-url, which probemarker does not support",
            id="proxy",
        ),
    ],
)
def test_choose_refuses_with_one_line(text: str, context: str | None, needle: str) -> None:
    merged = merge_kubeconfigs([parse_kubeconfig(text, HERE)])
    with pytest.raises(ConfigError) as caught:
        choose_target(merged, context)
    assert needle in str(caught.value)


def test_context_flag_wins_over_current_context() -> None:
    text = config(
        clusters={"a": {"server": "https://a"}, "b": {"server": "https://b/"}},
        contexts={"ca": {"cluster": "a"}, "cb": {"cluster": "b"}},
        current="ca",
    )
    merged = merge_kubeconfigs([parse_kubeconfig(text, HERE)])
    assert choose_target(merged).server == "https://a"
    assert choose_target(merged, "cb").server == "https://b"  # trailing slash dropped


@pytest.mark.parametrize(
    ("cluster", "user", "expected"),
    [
        pytest.param({}, {}, {}, id="nothing"),
        pytest.param(
            {"certificate-authority": "ca.crt"}, {}, {"ca_file": "/cfg/ca.crt"}, id="ca-relative"
        ),
        pytest.param(
            {"certificate-authority": "ca.crt", "certificate-authority-data": b64("PEM")},
            {},
            {"ca_data": "PEM"},
            id="ca-data-wins",
        ),
        pytest.param(
            {"insecure-skip-tls-verify": True, "tls-server-name": "kubernetes"},
            {},
            {"insecure": True, "tls_server_name": "kubernetes"},
            id="insecure-and-server-name",
        ),
        pytest.param(
            {},
            {"client-certificate": "c.crt", "client-key": "/keys/c.key"},
            {"cert_file": "/cfg/c.crt", "key_file": "/keys/c.key"},
            id="client-cert-files",
        ),
        pytest.param(
            {},
            {"client-certificate-data": b64("CERT"), "client-key-data": b64("KEY")},
            {"cert_data": b"CERT", "key_data": b"KEY"},
            id="client-cert-data",
        ),
        pytest.param({}, {"token": "t"}, {"token": "t"}, id="token"),
        pytest.param(
            {}, {"token": "t", "tokenFile": "tok"}, {"token_file": Path("/cfg/tok")}, id="file-wins"
        ),
        pytest.param(
            {},
            {"username": "me", "password": "pw"},
            {"basic": BasicAuth("me", "pw")},
            id="basic",
        ),
        pytest.param(
            {},
            {"auth-provider": {"name": "oidc", "config": {"id-token": "idt"}}},
            {"token": "idt"},
            id="oidc-id-token",
        ),
    ],
)
def test_target_fields(
    cluster: dict[str, Any], user: dict[str, Any], expected: dict[str, Any]
) -> None:
    chosen = target(cluster, user)
    assert chosen == Target(server="https://api:6443", context="c", **expected)


def test_exec_wins_over_token_and_resolves_a_command_with_a_slash() -> None:
    exec_body = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": "./bin/plugin",
        "args": ["get-token"],
        "env": [{"name": "A", "value": "1"}],
        "provideClusterInfo": True,
        "interactiveMode": "IfAvailable",
    }
    chosen = target(user={"exec": exec_body, "token": "ignored"})
    assert chosen.token is None
    assert chosen.exec is not None
    assert chosen.exec.command == "/cfg/bin/plugin"
    assert chosen.exec.args == ("get-token",)
    assert dict(chosen.exec.env) == {"A": "1"}
    assert chosen.exec.provide_cluster_info


def test_a_bare_exec_command_is_looked_up_on_path() -> None:
    body = {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws"}
    chosen = target(user={"exec": body})
    assert chosen.exec is not None
    assert chosen.exec.command == "aws"


def test_paths_are_relative_to_the_file_declaring_the_user() -> None:
    """A user from a second KUBECONFIG file: its tokenFile is next to that file."""
    main = parse_kubeconfig(
        config(
            clusters={"k": {"server": "https://a", "certificate-authority": "ca.crt"}},
            contexts={"c": {"cluster": "k", "user": "u"}},
            current="c",
        ),
        HERE,
    )
    users = parse_kubeconfig(config(users={"u": {"tokenFile": "token"}}), OTHER)
    chosen = choose_target(merge_kubeconfigs([main, users]))
    assert chosen.ca_file == "/cfg/ca.crt"
    assert chosen.token_file == Path("/elsewhere/token")


@pytest.mark.parametrize(
    ("user", "needle"),
    [
        pytest.param(
            {"auth-provider": {"name": "gcp"}},
            "auth-provider 'gcp' is not supported; use an exec credential plugin",
            id="gcp",
        ),
        pytest.param(
            {"client-key-data": "not base64!"}, "client-key-data is not base64", id="base64"
        ),
        pytest.param(
            {"exec": {"command": "x", "apiVersion": "client.authentication.k8s.io/v1alpha1"}},
            "apiVersion 'client.authentication.k8s.io/v1alpha1' is not one of",
            id="exec-alpha",
        ),
        pytest.param(
            {"exec": {"apiVersion": "client.authentication.k8s.io/v1"}},
            "exec: needs a command",
            id="exec-no-command",
        ),
        pytest.param(
            {
                "exec": {
                    "command": "x",
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "interactiveMode": "Always",
                }
            },
            "interactiveMode Always needs a terminal",
            id="exec-interactive",
        ),
    ],
)
def test_user_refused_with_one_line(user: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError) as caught:
        target(user=user)
    assert needle in str(caught.value)
    assert "user 'u'" in str(caught.value)


def test_secrets_stay_out_of_reprs() -> None:
    chosen = target(user={"token": "s3cret", "client-key-data": b64("KEYDATA"), "password": "pw"})
    assert "s3cret" not in repr(chosen)
    assert "KEYDATA" not in repr(chosen)
    assert b64("KEYDATA") not in repr(chosen)


# -- reading files ---------------------------------------------------------------------


def test_one_path_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist: pass --kubeconfig FILE"):
        read_kubeconfigs([str(tmp_path / "nope")])


def test_a_directory_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory, not a file"):
        read_kubeconfigs([str(tmp_path)])


def test_missing_files_of_a_list_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "b").write_text(config(current="x"))
    files = read_kubeconfigs([str(tmp_path / "a"), str(tmp_path / "b")])
    assert [f.path for f in files] == [tmp_path / "b"]
    with pytest.raises(ConfigError, match="none of the kubeconfig files"):
        read_kubeconfigs([str(tmp_path / "a"), str(tmp_path / "c")])


def test_unreadable_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "kc"
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match=r"cannot read kubeconfig .*: not UTF-8"):
        read_kubeconfigs([str(path)])


def test_loading_a_kubeconfig_imports_no_kubernetes_asyncio(tmp_path: Path) -> None:
    """kubernetes_asyncio's loader imports its generated models (~37 MiB of RSS); the
    daemon and our loader import none of it (bench/kubeconfig_rss.py measures)."""
    path = tmp_path / "kc"
    path.write_text(
        config(
            clusters={"k": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}},
            users={"u": {"token": "t"}},
            contexts={"c": {"cluster": "k", "user": "u"}},
            current="c",
        )
    )
    code = (
        "import asyncio, sys\n"
        "import probemarker.daemon.app\n"
        "from probemarker.kube.connect.config import load_kubeconfig\n"
        f"asyncio.run(load_kubeconfig({str(path)!r}))\n"
        "print(sorted(m for m in sys.modules if m.startswith('kubernetes')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        pytest.param({"cluster": "k", "namespace": "game"}, "game", id="set"),
        pytest.param({"cluster": "k"}, None, id="unset"),
    ],
)
def test_the_contexts_namespace_is_kept(context: dict[str, Any], expected: str | None) -> None:
    text = config(
        clusters={"k": {"server": "https://api:6443"}}, contexts={"c": context}, current="c"
    )
    assert choose_target(merge_kubeconfigs([parse_kubeconfig(text, HERE)])).namespace == expected
