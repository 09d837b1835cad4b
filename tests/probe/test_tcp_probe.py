"""The tcpSocket handler against real sockets on a pod-like 127.x address."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from types import MappingProxyType

import pytest

from probemarker.api.model import ProbeSpec, TCPSocketAction, Timing
from probemarker.probe.handler import ProbeTarget
from probemarker.probe.outcome import Outcome, Result
from probemarker.probe.runner import ProbeRunner
from probemarker.probe.tcp import TCPSocketHandler
from probemarker.watch.pods import PodUID
from tests.probe.servers import closed_port, filtered_port, tcp_listener

POD_IP = "127.0.1.170"


async def probe(port: int | str, *, ports: dict[str, int], ip: str | None = POD_IP) -> Outcome:
    target = ProbeTarget(
        "default", "db", PodUID("uid-2"), "app", pod_ip=ip, ports=MappingProxyType(ports)
    )
    spec = ProbeSpec("check", "app", TCPSocketAction(port), Timing(timeout_seconds=1))
    async with TCPSocketHandler() as handler:
        return await ProbeRunner({TCPSocketAction: handler}).run(spec, target)


Opener = Callable[[str], AbstractContextManager[int]]


@pytest.mark.parametrize(
    ("opener", "expected"),
    [
        pytest.param(tcp_listener, lambda port: Outcome.succeeded(answer=""), id="open"),
        pytest.param(
            closed_port,
            lambda port: Outcome.failed(f"cannot connect to {POD_IP}:{port}: Connection refused"),
            id="closed",
        ),
        pytest.param(
            filtered_port,
            lambda port: Outcome.failed(f"connect to {POD_IP}:{port} timed out after 1s"),
            id="filtered",
        ),
    ],
)
@pytest.mark.parametrize("named", [False, True], ids=["number", "name"])
async def test_connect(opener: Opener, expected: Callable[[int], Outcome], named: bool) -> None:
    with opener(POD_IP) as port:
        outcome = await probe("db" if named else port, ports={"db": port})
    assert outcome == expected(port)


@pytest.mark.parametrize(
    ("ip", "port", "reason"),
    [
        pytest.param(None, 5432, "pod default/db has no IP yet (status.podIP)", id="no-pod-ip"),
        pytest.param(
            POD_IP, "pg", "container app has no port named 'pg' in its ports", id="no-such-port"
        ),
    ],
)
async def test_no_address_is_unknown(ip: str | None, port: int | str, reason: str) -> None:
    outcome = await probe(port, ports={"db": 5432}, ip=ip)
    assert outcome == Outcome.unknown(reason)
    assert outcome.result is Result.UNKNOWN
