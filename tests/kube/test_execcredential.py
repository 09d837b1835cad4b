"""Exec credential plugins (execcredential.py): the ExecCredential exchange as client-go
has it, the cache until expiry, a re-run after a 401, one-line failures, a deadline."""

from __future__ import annotations

import asyncio
import sys
from asyncio.base_subprocess import BaseSubprocessTransport
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
import yaml

from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.config import ConfigError, TlsMaterial, load_kubeconfig
from probemarker.kube.connect.errors import RequestInfo
from probemarker.kube.connect.execcredential import (
    ExecCredential,
    ExecPlugin,
    ExecPluginError,
    exec_info,
    parse_exec_credential,
)
from probemarker.kube.connect.kubecontext import ExecConfig
from probemarker.sim import SimCluster

V1 = "client.authentication.k8s.io/v1"
CONFIG = ExecConfig(command="plugin", api_version=V1, where="user 'u'")
LIST = RequestInfo("list", "pods", namespace="default")
PODS = "/api/v1/namespaces/default/pods"


def answer(status: Any, *, version: str = V1, kind: str = "ExecCredential") -> bytes:
    return orjson.dumps({"apiVersion": version, "kind": kind, "status": status})


@pytest.mark.parametrize(
    ("stdout", "expected"),
    [
        pytest.param(answer({"token": "t"}), ExecCredential(token="t"), id="token"),
        pytest.param(
            answer({"token": "t", "expirationTimestamp": "2030-01-01T00:00:00Z"}),
            ExecCredential(token="t", expires_at=1893456000.0),
            id="expiring",
        ),
        pytest.param(
            answer({"clientCertificateData": "CERT", "clientKeyData": "KEY"}),
            ExecCredential(cert_data=b"CERT", key_data=b"KEY"),
            id="certificate",
        ),
    ],
)
def test_parse_answers(stdout: bytes, expected: ExecCredential) -> None:
    assert parse_exec_credential(stdout, CONFIG) == expected


@pytest.mark.parametrize(
    ("stdout", "needle"),
    [
        pytest.param(b"Please log in", "not JSON", id="not-json"),
        pytest.param(answer({"token": "t"}, kind="Other"), "not an ExecCredential", id="kind"),
        pytest.param(
            answer({"token": "t"}, version="client.authentication.k8s.io/v1beta1"),
            "not 'client.authentication.k8s.io/v1' as the kubeconfig asks",
            id="version",
        ),
        pytest.param(answer(None), "has no status", id="no-status"),
        pytest.param(answer({}), "neither a token nor a client certificate", id="empty"),
        pytest.param(
            answer({"clientCertificateData": "C"}), "only one of clientCertificateData", id="half"
        ),
        pytest.param(
            answer({"token": "t", "expirationTimestamp": "soon"}), "is not RFC 3339", id="stamp"
        ),
    ],
)
def test_parse_refuses(stdout: bytes, needle: str) -> None:
    with pytest.raises(ExecPluginError, match=needle):
        parse_exec_credential(stdout, CONFIG)


def test_exec_info_is_non_interactive_and_carries_the_cluster_when_asked() -> None:
    cluster = {"server": "https://a"}
    assert orjson.loads(exec_info(CONFIG, cluster)) == {
        "apiVersion": V1,
        "kind": "ExecCredential",
        "spec": {"interactive": False},
    }
    asking = ExecConfig(command="p", api_version=V1, provide_cluster_info=True)
    assert orjson.loads(exec_info(asking, cluster))["spec"]["cluster"] == cluster


def write_plugin(tmp_path: Path, body: str) -> ExecConfig:
    """A Python plugin; it appends a line to `runs` each time it runs."""
    script = tmp_path / "plugin.py"
    script.write_text(
        "import json, os, sys\n"
        f"open({str(tmp_path / 'runs')!r}, 'a').write('run\\n')\n"
        f"open({str(tmp_path / 'info')!r}, 'w').write(os.environ['KUBERNETES_EXEC_INFO'])\n" + body
    )
    return ExecConfig(
        command=sys.executable,
        api_version=V1,
        args=(str(script),),
        env={"PLUGIN_ENV": "from-kubeconfig"},
        where="user 'u'",
    )


def emit(status: dict[str, Any]) -> str:
    document = {"apiVersion": V1, "kind": "ExecCredential", "status": status}
    return f"print(json.dumps({document!r}))\n"


def runs(tmp_path: Path) -> int:
    return len((tmp_path / "runs").read_text().splitlines())


class Wall:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


async def test_token_cached_until_it_expires_and_rerun_after_a_401(tmp_path: Path) -> None:
    config = write_plugin(
        tmp_path, emit({"token": "t", "expirationTimestamp": "1970-01-01T00:20:00Z"})
    )
    wall = Wall()
    plugin = ExecPlugin(config, wall=wall)
    assert await plugin.authorization() == "Bearer t"
    assert await plugin.authorization() == "Bearer t"
    assert runs(tmp_path) == 1
    wall.now = 1_200.0  # the expirationTimestamp (20 minutes after the epoch)
    await plugin.authorization()
    assert runs(tmp_path) == 2
    await plugin.refresh()  # what the client does after a 401
    assert runs(tmp_path) == 3


async def test_plugin_sees_its_env(tmp_path: Path) -> None:
    config = write_plugin(
        tmp_path, "assert os.environ['PLUGIN_ENV'] == 'from-kubeconfig'\n" + emit({"token": "t"})
    )
    await ExecPlugin(config).authorization()
    assert orjson.loads((tmp_path / "info").read_text())["spec"] == {"interactive": False}


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        pytest.param(
            "sys.stderr.write('error: not logged in\\nrun: login\\n'); sys.exit(3)\n",
            "it exited with 3: error: not logged in run: login",
            id="exit-code",
        ),
        pytest.param("print('hello')\n", "its output is not JSON", id="not-json"),
        pytest.param("import time; time.sleep(60)\n", "did not answer within 0.5s", id="slow"),
    ],
)
async def test_failures_are_one_line(tmp_path: Path, body: str, needle: str) -> None:
    plugin = ExecPlugin(write_plugin(tmp_path, body), run_timeout=0.5)
    with pytest.raises(ExecPluginError) as caught:
        await plugin.authorization()
    message = str(caught.value)
    assert message.startswith(f"exec credential plugin {sys.executable!r} of user 'u': ")
    assert needle in message
    assert "\n" not in message


async def test_missing_command_shows_the_install_hint() -> None:
    config = ExecConfig(
        command="/nonexistent/gke-gcloud-auth-plugin",
        api_version=V1,
        install_hint="Install gke-gcloud-auth-plugin: gcloud components install ...",
        where="user 'u'",
    )
    with pytest.raises(ExecPluginError, match=r"cannot run it: .*\(Install gke-gcloud"):
        await ExecPlugin(config).authorization()


async def test_a_cancel_while_the_plugin_starts_still_reaps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop signal just as the plugin starts (asyncio still connecting its pipes): its
    process is killed and reaped before the cancel goes on. Unreaped, the child
    watcher's thread logs a plain-text line after the loop closed, past the daemon's
    last JSON line (test_signals' `test_sigterm_while_the_credential_plugin_hangs`)."""
    started: list[BaseSubprocessTransport] = []
    connect = BaseSubprocessTransport._connect_pipes

    async def cancelled_while_connecting(self: BaseSubprocessTransport, waiter: Any) -> None:
        started.append(self)
        scope.cancel()
        await asyncio.sleep(0.1)
        await connect(self, waiter)

    monkeypatch.setattr(BaseSubprocessTransport, "_connect_pipes", cancelled_while_connecting)
    plugin = ExecPlugin(write_plugin(tmp_path, "import time; time.sleep(60)\n"))
    with anyio.CancelScope() as scope:
        await plugin.authorization()
    assert scope.cancelled_caught
    assert [transport.get_returncode() for transport in started] == [-9]  # SIGKILL, reaped


def kubeconfig_with_plugin(sim: SimCluster, tmp_path: Path, body: str, **extra: Any) -> Path:
    config = sim.kubeconfig()
    plugin = write_plugin(tmp_path, body)
    config["users"][0]["user"] = {
        "exec": {
            "apiVersion": V1,
            "command": plugin.command,
            "args": list(plugin.args),
            "interactiveMode": "Never",
            **extra,
        }
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


async def test_plugin_with_cluster_info(tls_sim: SimCluster, tmp_path: Path) -> None:
    path = kubeconfig_with_plugin(
        tls_sim, tmp_path, emit({"token": "sim-token-1"}), provideClusterInfo=True
    )
    async with KubeClient(await load_kubeconfig(path)) as client:
        assert (await client.request("GET", PODS, info=LIST))["kind"] == "PodList"
    cluster = orjson.loads((tmp_path / "info").read_text())["spec"]["cluster"]
    assert cluster["server"] == tls_sim.url
    assert cluster["certificate-authority-data"]  # the sim's CA, base64


async def test_plugin_client_certificate_goes_into_tls(tls_sim: SimCluster, tmp_path: Path) -> None:
    from probemarker.sim.server.harness.tls import generate_tls

    material = generate_tls(tmp_path / "client")
    status = {
        "token": "sim-token-1",
        "clientCertificateData": material.cert_path.read_text(),
        "clientKeyData": material.key_path.read_text(),
    }
    connection = await load_kubeconfig(kubeconfig_with_plugin(tls_sim, tmp_path, emit(status)))
    assert connection.tls is not None
    assert connection.tls.cert_data == material.cert_path.read_bytes()
    async with KubeClient(connection) as client:
        assert (await client.request("GET", PODS, info=LIST))["kind"] == "PodList"


async def test_a_failing_plugin_is_a_config_error_at_load(
    tls_sim: SimCluster, tmp_path: Path
) -> None:
    path = kubeconfig_with_plugin(tls_sim, tmp_path, "sys.exit(1)\n")
    with pytest.raises(ConfigError, match=r"exec credential plugin .* it exited with 1"):
        await load_kubeconfig(path)


def test_key_data_is_on_disk_only_while_it_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    from probemarker.sim.server.harness.tls import generate_tls

    material = generate_tls(tmp_path / "client")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    tls = TlsMaterial(
        ca_file=str(material.ca_path),
        cert_data=material.cert_path.read_bytes(),
        key_data=material.key_path.read_bytes(),
    )
    tls.ssl_context(resume=False)
    assert list(scratch.iterdir()) == []
    assert "PRIVATE KEY" not in repr(tls)
