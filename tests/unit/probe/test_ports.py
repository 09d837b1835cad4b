"""Where a network probe connects: the pod IP (as an IP address only) and the port."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from probemarker.api.model import ExecAction, GRPCAction, Handler, HTTPGetAction, TCPSocketAction
from probemarker.probe.handler import ProbeTarget
from probemarker.probe.ports import Address, NoAddress, address_of, pod_address, unresolved_port
from probemarker.watch.pods import PodUID

PORTS = MappingProxyType({"http": 8080, "admin": 9901})


def target(ip: str | None) -> ProbeTarget:
    return ProbeTarget("ns", "web", PodUID("u"), "app", pod_ip=ip, ports=PORTS)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param("10.1.2.3", "10.1.2.3", id="ipv4"),
        pytest.param("fd00:0:0::1", "fd00::1", id="ipv6-canonical"),
        pytest.param("127.0.1.5", "127.0.1.5", id="loopback-as-the-sim-uses"),
        pytest.param(None, None, id="none"),
        pytest.param("", None, id="empty"),
        pytest.param("localhost", None, id="a-name"),
        pytest.param("127.1", None, id="short-form"),
        pytest.param("0x7f.0.0.1", None, id="hex-form"),
        pytest.param("010.0.0.1", None, id="octal-looking"),
        pytest.param("fe80::1%eth0", None, id="zone"),
        pytest.param("0.0.0.0", None, id="unspecified-v4"),
        pytest.param("::", None, id="unspecified-v6"),
        pytest.param("224.0.0.1", None, id="multicast"),
        pytest.param("x@10.0.0.1", None, id="userinfo"),
        pytest.param("10.0.0.1:80", None, id="with-port"),
        pytest.param(" 10.0.0.1", None, id="space"),
    ],
)
def test_pod_address(given: str | None, expected: str | None) -> None:
    assert pod_address(given) == expected


@pytest.mark.parametrize(
    ("ip", "port", "expected"),
    [
        pytest.param("10.0.0.1", 80, Address("10.0.0.1", 80), id="number"),
        pytest.param("10.0.0.1", "admin", Address("10.0.0.1", 9901), id="name"),
        pytest.param("fd00::1", "http", Address("fd00::1", 8080), id="ipv6"),
        pytest.param(None, 80, NoAddress("pod ns/web has no IP yet (status.podIP)"), id="no-ip"),
        pytest.param(
            "localhost",
            80,
            NoAddress(
                "pod ns/web has status.podIP 'localhost', which is not one host's IP address"
            ),
            id="not-an-ip",
        ),
        pytest.param(
            "10.0.0.1",
            "metrics",
            NoAddress("container app has no port named 'metrics' in its ports"),
            id="unknown-name",
        ),
        pytest.param(
            "10.0.0.1", 0, NoAddress("port 0 is not a TCP port number (1-65535)"), id="zero"
        ),
    ],
)
def test_address_of(ip: str | None, port: int | str, expected: Address | NoAddress) -> None:
    assert address_of(port, target(ip)) == expected


def test_authority_brackets_ipv6() -> None:
    assert Address("fd00::1", 80).authority == "[fd00::1]:80"
    assert Address("10.0.0.1", 80).authority == "10.0.0.1:80"


@pytest.mark.parametrize(
    ("action", "missing"),
    [
        pytest.param(HTTPGetAction(port="http"), None, id="http-known-name"),
        pytest.param(HTTPGetAction(port="metrics"), "metrics", id="http-unknown-name"),
        pytest.param(TCPSocketAction(port="nope"), "nope", id="tcp-unknown-name"),
        pytest.param(TCPSocketAction(port=5432), None, id="number"),
        pytest.param(GRPCAction(port=9000), None, id="grpc-numbers-only"),
        pytest.param(ExecAction(("true",)), None, id="exec"),
    ],
)
def test_unresolved_port(action: Handler, missing: str | None) -> None:
    assert unresolved_port(action, PORTS) == missing
