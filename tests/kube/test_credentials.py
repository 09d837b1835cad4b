"""Credentials and connection config: rotating token files, 401 re-read, in-cluster, errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.config import ConfigError, load_incluster, load_kubeconfig
from probemarker.kube.connect.credentials import TokenFile
from probemarker.kube.connect.errors import ApiUnauthorized, RequestInfo
from probemarker.sim import SimCluster

LIST = RequestInfo("list", "pods", namespace="default")
PODS = "/api/v1/namespaces/default/pods"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def kubeconfig_with_token_file(sim: SimCluster, tmp_path: Path, token: str) -> Path:
    """The sim's kubeconfig, its user reading the token from a file (relative path)."""
    (tmp_path / "token").write_text(token + "\n")
    config = sim.kubeconfig()
    config["users"][0]["user"] = {"tokenFile": "token"}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


async def test_token_file_reread_on_schedule(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "token"
    path.write_text("one")
    tokens = TokenFile(path, reread_after=60.0, clock=clock)
    assert await tokens.authorization() == "Bearer one"
    path.write_text("two")
    clock.now += 59.0
    assert await tokens.authorization() == "Bearer one"  # not yet due
    clock.now += 1.0
    assert await tokens.authorization() == "Bearer two"
    assert tokens.reads == 2


async def test_token_file_keeps_last_good_token(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "token"
    path.write_text("one")
    tokens = TokenFile(path, reread_after=1.0, clock=clock)
    assert await tokens.authorization() == "Bearer one"
    path.unlink()  # the kubelet swapping the file
    clock.now += 5.0
    assert await tokens.authorization() == "Bearer one"
    path.write_text("")
    clock.now += 5.0
    assert await tokens.authorization() == "Bearer one"


async def test_rotation_picked_up_without_restart(tls_sim: SimCluster, tmp_path: Path) -> None:
    connection = await load_kubeconfig(kubeconfig_with_token_file(tls_sim, tmp_path, "sim-token-1"))
    assert isinstance(connection.credentials, TokenFile)
    clock = FakeClock()
    connection.credentials._clock = clock  # a fake clock for the re-read schedule
    async with KubeClient(connection) as client:
        await client.request("GET", PODS, info=LIST)
        # The kubelet writes a new token; both are valid for a while, as for bound tokens.
        tls_sim.set_tokens("sim-token-1", "sim-token-2")
        (tmp_path / "token").write_text("sim-token-2")
        clock.now += 60.0
        await client.request("GET", PODS, info=LIST)
        tls_sim.set_tokens("sim-token-2")  # the old one expires
        await client.request("GET", PODS, info=LIST)
        assert connection.credentials.reads == 2


async def test_401_rereads_the_token_file_and_retries(tls_sim: SimCluster, tmp_path: Path) -> None:
    connection = await load_kubeconfig(kubeconfig_with_token_file(tls_sim, tmp_path, "sim-token-1"))
    async with KubeClient(connection) as client:
        await client.request("GET", PODS, info=LIST)
        # Rotated and the old token revoked before the scheduled re-read: the 401 re-reads.
        tls_sim.set_tokens("sim-token-2")
        (tmp_path / "token").write_text("sim-token-2")
        listed = await client.request("GET", PODS, info=LIST)
        assert listed["kind"] == "PodList"
        assert tls_sim.accounting.count(code=401) == 1


async def test_second_401_is_unauthorized(tls_sim: SimCluster, tmp_path: Path) -> None:
    connection = await load_kubeconfig(kubeconfig_with_token_file(tls_sim, tmp_path, "sim-token-1"))
    async with KubeClient(connection) as client:
        tls_sim.set_tokens("someone-else")
        with pytest.raises(ApiUnauthorized):
            await client.request("GET", PODS, info=LIST)


async def test_incluster_config(tls_sim: SimCluster, tmp_path: Path) -> None:
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("sim-token-1")
    assert tls_sim.ca_path is not None
    shutil.copy(tls_sim.ca_path, account / "ca.crt")
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(tls_sim.port)}
    connection = load_incluster(environ=env, account_dir=account)
    assert connection.server == f"https://127.0.0.1:{tls_sim.port}"
    async with KubeClient(connection) as client:
        assert (await client.request("GET", PODS, info=LIST))["kind"] == "PodList"


@pytest.mark.parametrize(
    ("env", "files", "message"),
    [
        pytest.param({}, True, "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT", id="no-env"),
        pytest.param(
            {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"},
            False,
            "automountServiceAccountToken",
            id="no-token",
        ),
    ],
)
def test_incluster_errors_say_the_fix(
    tmp_path: Path, env: dict[str, str], files: bool, message: str
) -> None:
    if files:
        (tmp_path / "token").write_text("t")
        (tmp_path / "ca.crt").write_text("")
    with pytest.raises(ConfigError, match=message):
        load_incluster(environ=env, account_dir=tmp_path)


def test_incluster_ipv6_host(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("t")
    (tmp_path / "ca.crt").write_text("")
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    assert load_incluster(environ=env, account_dir=tmp_path).server == "https://[fd00::1]:443"


async def test_missing_kubeconfig_says_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist: pass --kubeconfig FILE"):
        await load_kubeconfig(tmp_path / "nope")


async def test_unknown_context_says_the_fix(sim: SimCluster) -> None:
    with pytest.raises(ConfigError, match=r"context 'elsewhere'.*kubectl config get-contexts"):
        await load_kubeconfig(sim.kubeconfig_path, context="elsewhere")


async def test_exec_credential_plugin(tls_sim: SimCluster, tmp_path: Path) -> None:
    """A kubeconfig `exec` plugin (as cloud providers ship them) supplies the token."""
    import sys

    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1beta1',"
        " 'kind': 'ExecCredential', 'status': {'token': 'sim-token-1'}}))\n"
    )
    config = tls_sim.kubeconfig()
    config["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": [str(plugin)],
            "interactiveMode": "Never",
        }
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    async with KubeClient(await load_kubeconfig(path)) as client:
        assert (await client.request("GET", PODS, info=LIST))["kind"] == "PodList"


async def test_client_certificate_from_kubeconfig(tls_sim: SimCluster, tmp_path: Path) -> None:
    """Client certificates (`client-certificate`/`client-key`) are loaded into the TLS
    context (the sim does not ask for them, so this shows they load and do no harm)."""
    from probemarker.sim.server.harness.tls import generate_tls

    material = generate_tls(tmp_path / "client")  # any certificate and key pair will do
    config = tls_sim.kubeconfig()
    config["users"][0]["user"] = {
        "token": "sim-token-1",
        "client-certificate": str(material.cert_path),
        "client-key": str(material.key_path),
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    connection = await load_kubeconfig(path)
    assert connection.tls is not None
    assert connection.tls.cert_file == str(material.cert_path)
    async with KubeClient(connection) as client:
        assert (await client.request("GET", PODS, info=LIST))["kind"] == "PodList"


async def test_untrusted_server_certificate_is_unreachable(
    tls_sim: SimCluster, tmp_path: Path
) -> None:
    from probemarker.kube.connect.errors import ApiUnreachable
    from probemarker.sim.server.harness.tls import generate_tls

    other_ca = generate_tls(tmp_path / "other")
    config = tls_sim.kubeconfig()
    config["clusters"][0]["cluster"].pop("certificate-authority-data")
    config["clusters"][0]["cluster"]["certificate-authority"] = str(other_ca.ca_path)
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    async with KubeClient(await load_kubeconfig(path)) as client:
        with pytest.raises(ApiUnreachable, match=r"TLS failure.*certificate verify failed"):
            await client.request("GET", PODS, info=LIST)


async def test_token_file_of_a_user_in_a_second_kubeconfig_file(
    tls_sim: SimCluster, tmp_path: Path
) -> None:
    """KUBECONFIG lists merge; a relative `tokenFile` is relative to the file naming it."""
    import os

    config = tls_sim.kubeconfig()
    users = {"users": [{"name": "sim", "user": {"tokenFile": "token"}}]}
    config["users"] = []
    (tmp_path / "main.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "creds").mkdir()
    (tmp_path / "creds" / "users.yaml").write_text(yaml.safe_dump(users))
    (tmp_path / "creds" / "token").write_text("sim-token-1")
    paths = os.pathsep.join([str(tmp_path / "main.yaml"), str(tmp_path / "creds" / "users.yaml")])
    connection = await load_kubeconfig(paths)
    assert isinstance(connection.credentials, TokenFile)
    assert connection.credentials.path == tmp_path / "creds" / "token"
    async with KubeClient(connection) as client:
        assert (await client.request("GET", PODS, info=LIST))["kind"] == "PodList"


async def test_unreadable_kubeconfig_says_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text("clusters: [\n")
    with pytest.raises(ConfigError, match=r"is not YAML: .* at line 2.*kubectl config view"):
        await load_kubeconfig(path)


@pytest.mark.parametrize(
    ("env", "file", "expected"),
    [
        pytest.param({"POD_NAMESPACE": "a"}, "b\n", ("a", "POD_NAMESPACE"), id="downward-api"),
        pytest.param({}, "b\n", ("b", "the service account's namespace"), id="account-file"),
        pytest.param({}, None, ("default", "the default"), id="neither"),
    ],
)
def test_incluster_namespace_is_client_gos(
    tmp_path: Path, env: dict[str, str], file: str | None, expected: tuple[str, str]
) -> None:
    """client-go's inClusterClientConfig.Namespace: POD_NAMESPACE, the service
    account's namespace file, default."""
    (tmp_path / "token").write_text("t")
    (tmp_path / "ca.crt").write_text("")
    if file is not None:
        (tmp_path / "namespace").write_text(file)
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443", **env}
    connection = load_incluster(environ=env, account_dir=tmp_path)
    assert connection.namespace == expected[0]
    assert connection.namespace_from.startswith(expected[1])
