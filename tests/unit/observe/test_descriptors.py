"""observe/descriptors.py: the server's share of the open-files limit (pure), and the
soft limit raised to the hard one (in a child process, so this one keeps its own)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from probemarker.observe.descriptors import (
    ConnectionLimits,
    connection_limits,
    idle_http_connections,
)

# (soft limit, the server's limits)
LIMITS = [
    pytest.param(1024, ConnectionLimits(total=64, per_peer=16), id="container-default-1024"),
    pytest.param(1_048_576, ConnectionLimits(total=64, per_peer=16), id="large-capped-at-64"),
    pytest.param(512, ConnectionLimits(total=32, per_peer=8), id="512-a-sixteenth"),
    pytest.param(256, ConnectionLimits(total=16, per_peer=4), id="256"),
    pytest.param(100, ConnectionLimits(total=6, per_peer=2), id="100-peer-at-least-2"),
    pytest.param(40, ConnectionLimits(total=4, per_peer=2), id="tiny-at-least-4"),
    pytest.param(0, ConnectionLimits(total=4, per_peer=2), id="zero"),
]


@pytest.mark.parametrize(("soft", "expected"), LIMITS)
def test_connection_limits(soft: int, expected: ConnectionLimits) -> None:
    assert connection_limits(soft) == expected


@pytest.mark.parametrize("soft", [16, 100, 1024, 4096, 1 << 20])
def test_the_server_never_holds_more_than_a_sixteenth_above_the_floor(soft: int) -> None:
    limits = connection_limits(soft)
    assert limits.total <= max(4, soft // 16)
    assert 2 <= limits.per_peer <= limits.total


@pytest.mark.parametrize(
    ("total", "per_peer"),
    [pytest.param(4, 0, id="no-peer"), pytest.param(4, 5, id="peer-above-total")],
)
def test_limits_refuse_nonsense(total: int, per_peer: int) -> None:
    with pytest.raises(ValueError, match="per_peer"):
        ConnectionLimits(total=total, per_peer=per_peer)


@pytest.mark.parametrize(
    ("soft", "idle"),
    [
        pytest.param(1024, 128, id="container-default-1024-an-eighth"),
        pytest.param(65_536, 1024, id="large-capped-at-1024"),
        pytest.param(32, 8, id="tiny-at-least-8"),
    ],
)
def test_idle_http_connections_are_a_share_of_the_limit(soft: int, idle: int) -> None:
    assert idle_http_connections(soft) == idle


CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, ({soft}, {hard}))
from probemarker.observe.descriptors import raise_open_files_limit, open_files_limit
limit = raise_open_files_limit()
print(limit.before, limit.soft, limit.hard, limit.raised, limit.error, open_files_limit())
"""

# (soft, hard) the child starts with -> what it prints
RAISES = [
    pytest.param((256, 512), "256 512 512 True None 512", id="soft-below-hard-raised"),
    pytest.param((256, 256), "256 256 256 False None 256", id="equal-unchanged"),
]


@pytest.mark.parametrize(("start", "expected"), RAISES)
def test_raise_open_files_limit(start: tuple[int, int], expected: str) -> None:
    soft, hard = start
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(soft=soft, hard=hard)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert done.stdout.strip() == expected
