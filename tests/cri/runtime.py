"""Pods and containers on the real runtime that hack/cri-runtime.sh starts, for tests.

The pieces tests/cri/conftest.py turns into fixtures, usable directly too:

- `find_endpoint()`: PROBEMARKER_TEST_CRI_ENDPOINT, or a skip (a failure when
  PROBEMARKER_TEST_REQUIRE_CRI=1, as CI sets it);
- `run_sandbox()` / `remove_sandbox()`: a pod sandbox the way this VM runs one (the recipe
  in hack/cri-runtime.sh): host network, no hostname (CRI would set it in a UTS namespace
  of the node's), the relative cgroup parent POD_CGROUP (cgroupfs driver), process
  namespaces per container as the kubelet gives a pod without shareProcessNamespace;
- `Containers`: create and start containers in a sandbox from the busybox image, and
  remove every one it made at the end, whatever state it is in;
- `start_with_prefix()`: a container whose ID starts with the digit given (for the
  attacks on containerd's lookup of IDs by prefix);
- `RuntimeControl`: take the runtime down (containerd stopped, or killed) and bring it back
  with hack/cri-runtime.sh; the containers keep running under their shims.

Everything here speaks CRI through tests/cri/client.py, never through the daemon's code.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import grpc
import pytest

from tests.cri.client import CRIClient

ENDPOINT_ENV = "PROBEMARKER_TEST_CRI_ENDPOINT"
STATE_ENV = "PROBEMARKER_TEST_CRI_STATE"
REQUIRE_ENV = "PROBEMARKER_TEST_REQUIRE_CRI"
SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "cri-runtime.sh"
# The image hack/cri-runtime.sh builds from busybox-static and imports (also the sandbox
# image); /bin holds busybox and a link per applet (sh, sleep, echo, cat, ps, ...).
IMAGE = "localhost/probemarker/busybox:cri-test"
# The pods' cgroup parent, relative (cgroupfs driver); hack/cri-runtime.sh stop removes it.
POD_CGROUP = "probemarker-cri-test"
# The start_container fixture: (name, command=None) -> container id.
StartContainer = Callable[..., str]
# A container's command when the test gives none: keeps it running.
SLEEP_FOREVER = ("sleep", "2147483647")
START_HINT = (
    "start a runtime as root with `hack/cri-runtime.sh start DIR` and export the "
    "PROBEMARKER_TEST_CRI_* lines it prints (docs/development.md)"
)


def skip_or_fail(reason: str) -> NoReturn:
    """Skip, or fail when PROBEMARKER_TEST_REQUIRE_CRI=1 (CI, where the runtime is due)."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason}; {REQUIRE_ENV}=1 makes this a failure", pytrace=False)
    pytest.skip(reason)


def find_endpoint() -> str:
    """The runtime's CRI endpoint, or skip (fail under PROBEMARKER_TEST_REQUIRE_CRI=1)."""
    endpoint = os.environ.get(ENDPOINT_ENV, "")
    if not endpoint:
        skip_or_fail(f"{ENDPOINT_ENV} is unset: {START_HINT}")
    if not endpoint.startswith("unix:///"):
        pytest.fail(
            f"{ENDPOINT_ENV}={endpoint!r}: expected unix:///path/to/containerd.sock", pytrace=False
        )
    return endpoint


def find_state_dir() -> Path:
    """The runtime's STATE_DIR (for down/up), or skip (fail when CRI is required)."""
    state = os.environ.get(STATE_ENV, "")
    if not state:
        skip_or_fail(f"{STATE_ENV} is unset: {START_HINT}")
    if os.geteuid() != 0:
        skip_or_fail("taking the runtime down and up needs root")
    return Path(state)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def namespaces(pb: Any) -> Any:
    """The kubelet's choice for a hostNetwork pod without shareProcessNamespace."""
    return pb.NamespaceOption(network=pb.NODE, pid=pb.CONTAINER, ipc=pb.POD)


def sandbox_config(pb: Any, name: str) -> Any:
    return pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name=name, uid=uuid.uuid4().hex, namespace="cri-test"),
        labels={"probemarker.test": "cri"},
        linux=pb.LinuxPodSandboxConfig(
            cgroup_parent=POD_CGROUP,
            security_context=pb.LinuxSandboxSecurityContext(namespace_options=namespaces(pb)),
        ),
    )


def kubelet_labels(*, uid: str, container: str, namespace: str, pod: str) -> dict[str, str]:
    """The labels the kubelet creates a container with (kuberuntime/labels.go
    newContainerLabels), which the daemon's cri backend checks before it runs a probe."""
    return {
        "io.kubernetes.pod.uid": uid,
        "io.kubernetes.container.name": container,
        "io.kubernetes.pod.namespace": namespace,
        "io.kubernetes.pod.name": pod,
    }


def rpc_error(call: Callable[[], object]) -> grpc.RpcError:
    """The grpc.RpcError the call raises (the test fails if it raises none)."""
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value


def processes(cri: CRIClient, container_id: str) -> list[str]:
    """The command lines running in the container (busybox ps, through ExecSync)."""
    answer = cri.exec_sync(container_id, ["ps", "-o", "args"], timeout=10)
    assert answer.exit_code == 0, answer.stderr
    return [line.strip() for line in answer.stdout.decode().splitlines()[1:]]


def wait_for_state(cri: CRIClient, container_id: str, state: int, *, within: float) -> Any:
    """ContainerStatus until the container is in state or `within` seconds have passed
    (CRI has no watch to await); the last status."""
    limit = time.monotonic() + within
    while True:
        status = cri.container_status(container_id)
        if status.state == state or time.monotonic() > limit:
            return status
        time.sleep(0.05)


@dataclass(frozen=True, slots=True)
class Sandbox:
    """A running pod sandbox: its id and the config containers in it are created with."""

    id: str
    config: Any


def run_sandbox(cri: CRIClient, name: str) -> Sandbox:
    config = sandbox_config(cri.pb, name)
    return Sandbox(id=cri.run_pod_sandbox(config), config=config)


def remove_sandbox(cri: CRIClient, sandbox: Sandbox) -> None:
    """Stop and remove the sandbox (and whatever containers are left in it)."""
    cri.stop_pod_sandbox(sandbox.id)
    cri.remove_pod_sandbox(sandbox.id)


def ignore_not_found(error: grpc.RpcError) -> None:
    """Re-raise anything but NOT_FOUND (cleanup of what is gone already)."""
    if error.code() != grpc.StatusCode.NOT_FOUND:
        raise error


@dataclass
class Containers:
    """Containers created (and started, but for `create`) in one sandbox; `remove_all`
    removes every one of them."""

    cri: CRIClient
    sandbox: Sandbox
    started: list[str] = field(default_factory=list)

    def start(
        self,
        name: str,
        command: Sequence[str] = SLEEP_FOREVER,
        *,
        labels: Mapping[str, str] | None = None,
    ) -> str:
        """Create and start a container from IMAGE with `labels` (e.g. the kubelet's,
        `kubelet_labels`); its id (64 hex digits)."""
        container_id = self.create(name, command, labels=labels)
        self.cri.start_container(container_id)
        return container_id

    def create(
        self,
        name: str,
        command: Sequence[str] = SLEEP_FOREVER,
        *,
        labels: Mapping[str, str] | None = None,
    ) -> str:
        """Create a container as `start` does, without starting it; its id."""
        pb = self.cri.pb
        config = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=name),
            image=pb.ImageSpec(image=IMAGE),
            command=list(command),
            labels={"probemarker.test": "cri", **(labels or {})},
            linux=pb.LinuxContainerConfig(
                security_context=pb.LinuxContainerSecurityContext(namespace_options=namespaces(pb))
            ),
        )
        container_id = self.cri.create_container(self.sandbox.id, config, self.sandbox.config)
        self.started.append(container_id)
        return container_id

    def stop(self, container_id: str, *, grace: int = 0) -> None:
        """StopContainer: SIGTERM, SIGKILL after grace seconds (0: SIGKILL at once)."""
        self.cri.stop_container(container_id, grace=grace)

    def remove(self, container_id: str) -> None:
        """Stop (at once) and remove; a container removed already is fine."""
        try:
            self.cri.stop_container(container_id)
            self.cri.remove_container(container_id)
        except grpc.RpcError as error:
            ignore_not_found(error)
        if container_id in self.started:
            self.started.remove(container_id)

    def remove_all(self) -> None:
        for container_id in list(self.started):
            self.remove(container_id)


def start_with_prefix(
    containers: Containers, prefix: str, *, name: str, labels: Mapping[str, str], tries: int = 400
) -> str:
    """Start a container whose ID starts with `prefix` (one hex digit): create containers
    until one does (IDs are random: 1 in 16 per try; none in 400 tries is a chance of
    1 in 10^11), removing the others; its id."""
    for attempt in range(tries):
        container_id = containers.create(f"{name}-{attempt}", labels=labels)
        if container_id.startswith(prefix):
            containers.cri.start_container(container_id)
            return container_id
        containers.remove(container_id)
    raise AssertionError(f"no container ID starting with {prefix!r} in {tries} tries")


@dataclass
class RuntimeControl:
    """containerd down and back up (hack/cri-runtime.sh down/up on STATE_DIR)."""

    state_dir: Path
    is_down: bool = False

    def _run(self, command: str, *options: str) -> None:
        # `up` checks the CRI plugin with a Python that has grpcio: this one.
        env = {**os.environ, "PROBEMARKER_CRI_PYTHON": sys.executable}
        done = subprocess.run(
            [str(SCRIPT), command, str(self.state_dir), *options],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"hack/cri-runtime.sh {command} {self.state_dir} {' '.join(options)} exited "
                f"{done.returncode}: {done.stderr.strip()}"
            )

    def down(self, *, kill: bool = False) -> None:
        """Stop containerd (SIGTERM: its socket is removed) or kill it (SIGKILL: the
        socket file stays, connections are refused). Shims and containers keep running."""
        self._run("down", *(["--kill"] if kill else []))
        self.is_down = True

    def up(self) -> None:
        """Start containerd again with the same configuration; returns once the CRI
        plugin answers Version (a client's channel may still be in reconnect backoff)."""
        self._run("up")
        self.is_down = False
