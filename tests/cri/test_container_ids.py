"""A pod status's containerID against containerd's own lookup of container IDs.

containerd's CRI store finds a container through a truncindex (`containerStore.Get`):
any unique prefix of an ID names the container, for ContainerStatus and ExecSync
alike. So a pod status whose containerID is a prefix (anyone who may patch
`pods/status` can write one) would name the pod's own container while it is the only
match, and another pod's container once that one is gone and a new one shares the
digits. The daemon's cri backend must send the runtime nothing but the full ID the
kubelet writes, confirmed by the runtime for the probe's pod and container: each test
here gives the daemon's handler a pod status that is not that, on the real runtime,
and checks with the tests' own client that the command (`touch` of a file) ran
nowhere.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from probemarker.api.model import ExecAction
from probemarker.cri.client import RuntimeClient
from probemarker.cri.endpoint import socket_path
from probemarker.probe.cri import CRIExecHandler
from probemarker.probe.handler import ProbeTarget
from probemarker.probe.outcome import Outcome, Result
from probemarker.watch.pods import PodUID
from tests.cri.client import CRIClient
from tests.cri.runtime import Containers, StartContainer, kubelet_labels, start_with_prefix

pytestmark = pytest.mark.cri

UID = "7d1c6f4e-2b8a-4e61-9d3e-5a0b1c2d3e4f"
OURS = kubelet_labels(uid=UID, container="app", namespace="default", pod="gs-1")
# Another pod's container, in another namespace.
THEIRS = kubelet_labels(
    uid="e3b0c442-98fc-4c14-9afb-f4c8996fb924", container="app", namespace="bank", pod="vault"
)
TOUCH = ExecAction(command=("touch", "/tmp/ran"))
REFUSED = "is not a full containerd container ID (64 lowercase hex digits after containerd://"


def target(container_id: str) -> ProbeTarget:
    return ProbeTarget(
        "default", "gs-1", PodUID(UID), "app", container_id=f"containerd://{container_id}"
    )


def ran_in(cri: CRIClient, container_id: str) -> bool:
    """Whether the probe's command ran in the container (it leaves /tmp/ran)."""
    return cri.exec_sync(container_id, ["ls", "/tmp/ran"], timeout=5).exit_code == 0


def resolves_to(cri: CRIClient, spelling: str) -> str:
    """The container ID containerd's lookup gives `spelling` (the test's precondition)."""
    return str(cri.container_status(spelling).id)


@pytest.mark.parametrize(
    "length", [pytest.param(12, id="prefix-12"), pytest.param(63, id="one-short")]
)
async def test_a_prefix_of_the_pods_own_container_runs_nothing(
    cri: CRIClient, cri_endpoint: str, start_container: StartContainer, length: int
) -> None:
    container_id = start_container("own", labels=OURS)
    prefix = container_id[:length]
    assert resolves_to(cri, prefix) == container_id  # containerd takes the prefix
    async with CRIExecHandler(RuntimeClient(socket_path(cri_endpoint))) as handler:
        with anyio.fail_after(20):
            got = await handler.run(TOUCH, target(prefix), time_limit=5.0)
    assert got.result is Result.UNKNOWN
    assert f"containerID 'containerd://{prefix}' in the pod status {REFUSED}" in got.message
    assert not ran_in(cri, container_id)


async def test_a_prefix_that_later_resolves_to_another_pods_container_runs_nothing_there(
    cri: CRIClient, cri_endpoint: str, cri_containers: Containers
) -> None:
    # The attack: the pod status says `containerd://<one digit>`. While the pod's own
    # container is the only one with that digit first, the prefix names it; once it is
    # gone, another pod's container (namespace bank) whose ID starts so takes the name.
    own = cri_containers.start("own", labels=OURS)
    prefix = own[:1]
    assert resolves_to(cri, prefix) == own
    async with CRIExecHandler(RuntimeClient(socket_path(cri_endpoint))) as handler:
        with anyio.fail_after(120):
            first = await handler.run(TOUCH, target(prefix), time_limit=5.0)
            ran_in_own = ran_in(cri, own)
            await anyio.to_thread.run_sync(cri_containers.remove, own)
            theirs = await anyio.to_thread.run_sync(
                lambda: start_with_prefix(cri_containers, prefix, name="vault", labels=THEIRS)
            )
            assert resolves_to(cri, prefix) == theirs  # the same string, another pod's
            second = await handler.run(TOUCH, target(prefix), time_limit=5.0)
    # One assertion of everything seen, so a failure shows where the command ran.
    seen = {
        "first": first.result,
        "second": second.result,
        "ran in the pod's container": ran_in_own,
        "ran in the bank's container": ran_in(cri, theirs),
    }
    assert seen == {
        "first": Result.UNKNOWN,
        "second": Result.UNKNOWN,
        "ran in the pod's container": False,
        "ran in the bank's container": False,
    }
    assert REFUSED in first.message
    assert REFUSED in second.message


@pytest.mark.parametrize(
    "spell",
    [
        pytest.param(str.upper, id="uppercase"),
        pytest.param(lambda full: f" {full}", id="leading-space"),
        pytest.param(lambda full: f"{full} ", id="trailing-space"),
        pytest.param(lambda full: f"{full}\n", id="trailing-newline"),
    ],
)
async def test_another_spelling_of_the_full_id_runs_nothing(
    cri: CRIClient, cri_endpoint: str, start_container: StartContainer, spell: Callable[[str], str]
) -> None:
    container_id = start_container("spelled", labels=OURS)
    async with CRIExecHandler(RuntimeClient(socket_path(cri_endpoint))) as handler:
        with anyio.fail_after(20):
            got = await handler.run(TOUCH, target(spell(container_id)), time_limit=5.0)
            ran_before = ran_in(cri, container_id)
            # The same container under its full ID is the pod's, and runs the command.
            full = await handler.run(TOUCH, target(container_id), time_limit=5.0)
    assert got.result is Result.UNKNOWN
    assert REFUSED in got.message
    assert not ran_before
    assert full == Outcome.succeeded("", answer="")  # an exit status: an empty answer
    assert ran_in(cri, container_id)
