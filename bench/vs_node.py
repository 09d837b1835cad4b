"""bench/vs_kruise.py's reading of the node, thin: the processes of each system and
their cgroups (CPU, working set), the API server's process, the node's busy time, and
`Phase`, a window of them with the audit log's marks at its ends (what they mean:
bench/vs_stats.py, where it is tested)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from bench.cri_exec import TICKS, stat_cpu
from bench.vs_stats import (
    AGENTS,
    Requests,
    Window,
    agent_pids,
    busy_seconds,
    system_requests,
    working_set_mib,
)
from tests.cluster.install import Cluster


def _cmdlines() -> dict[int, bytes]:
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with suppress(OSError):
                out[int(entry.name)] = (entry / "cmdline").read_bytes()
    return out


def _cgroup(pid: int, controller: str) -> Path:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return Path("/sys/fs/cgroup") / controllers / path.lstrip("/")
    raise SystemExit(f"pid {pid}: no {controller} cgroup")


def _groups(system: str, controller: str) -> set[Path]:
    """The cgroups of the system's agents (AGENTS), each once."""
    return {_cgroup(pid, controller) for pid in agent_pids(system, _cmdlines())}


def cgroup_cpu_seconds(system: str) -> float:
    return sum(
        int((group / "cpuacct.usage").read_text()) / 1e9 for group in _groups(system, "cpuacct")
    )


def cgroup_memory_mib(system: str) -> float:
    return sum(
        working_set_mib(
            int((group / "memory.usage_in_bytes").read_text()), (group / "memory.stat").read_text()
        )
        for group in _groups(system, "memory")
    )


def apiserver_cpu_seconds(state: Path) -> float:
    pid = int((state / "apiserver.pid").read_text())
    return stat_cpu(Path(f"/proc/{pid}/stat").read_text(), children=False)


def node_cpu_seconds() -> float:
    return busy_seconds(Path("/proc/stat").read_text(), TICKS)


@dataclass
class Phase:
    """A window: the audit log's mark and the CPU counters at its start and its end."""

    cluster: Cluster
    system: str  # "kruise", "probemarker" or BASELINE (no processes, no identities)
    started: float = 0.0
    mark: int = 0
    apiserver: float = 0.0
    node: float = 0.0
    cpu: float | None = None
    seconds: float = 0.0  # the rest is set when the window ends
    apiserver_used: float = 0.0
    node_used: float = 0.0
    cpu_used: float | None = None
    end_mark: int = 0

    def _cpu(self) -> float | None:
        return cgroup_cpu_seconds(self.system) if AGENTS[self.system] else None

    def __enter__(self) -> Phase:
        self.mark = self.cluster.audit.mark()
        self.apiserver = apiserver_cpu_seconds(self.cluster.state)
        self.node = node_cpu_seconds()
        self.cpu = self._cpu()
        self.started = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.monotonic() - self.started
        self.apiserver_used = apiserver_cpu_seconds(self.cluster.state) - self.apiserver
        self.node_used = node_cpu_seconds() - self.node
        cpu = self._cpu()
        self.cpu_used = None if cpu is None or self.cpu is None else cpu - self.cpu
        self.end_mark = self.cluster.audit.mark()

    def requests(self, namespaces: Sequence[str] = ()) -> Requests:
        """The system's requests in the window (the audit log between the two marks)."""
        events = self.cluster.audit.events(self.mark, until=self.end_mark)
        return system_requests(events, self.system, namespaces)

    def window(self, namespaces: Sequence[str]) -> Window:
        requests = self.requests(namespaces)
        return Window(self.seconds, self.apiserver_used, self.node_used, self.cpu_used,
                      requests.writes, requests.by_verb)  # fmt: skip
