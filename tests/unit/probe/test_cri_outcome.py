"""The cri exec handler's decisions: which container, and what the runtime's answer means."""

from __future__ import annotations

import pytest

from probemarker.cri.client import CallFailed, ContainerInfo, NotConnected, Ran, RuntimeInfo
from probemarker.probe.cri import cri_outcome, exited
from probemarker.probe.criid import (
    ContainerRef,
    confirmation_problem,
    container_ref,
    ownership_problem,
)
from probemarker.probe.handler import ProbeTarget
from probemarker.probe.outcome import Outcome
from probemarker.watch.pods import PodUID

CONTAINERD = RuntimeInfo("containerd", "1.6.20", "v1")
CRIO = RuntimeInfo("cri-o", "1.30.0", "v1")
SOCK = "unix:///run/containerd/containerd.sock"
ID = "0" * 63 + "f"


@pytest.mark.parametrize(
    ("container_id", "runtime", "expected"),
    [
        (f"containerd://{ID}", CONTAINERD, ContainerRef(id=ID)),
        (f"cri-o://{ID}", CRIO, ContainerRef(id=ID)),
        ("", CONTAINERD, "no containerID yet"),
        (ID, CONTAINERD, "is not <runtime>://<id>"),
        ("containerd://", CONTAINERD, "is not <runtime>://<id>"),
        (
            f"docker://{ID}",
            CONTAINERD,
            "the container runs on 'docker' but --cri-endpoint "
            f"{SOCK} is 'containerd': point --cri-endpoint at the docker socket, or use "
            "--exec-backend api on this node",
        ),
        (f"cri-o://{ID}", CONTAINERD, "runs on 'cri-o' but"),
        (f"containerd://{ID}", CRIO, "runs on 'containerd' but"),
        pytest.param(
            f"containerd://{ID[:12]}",
            CONTAINERD,
            f"containerID 'containerd://{ID[:12]}' in the pod status is not a full "
            "containerd container ID (64 lowercase hex digits after containerd://, as the "
            "kubelet writes it): the runtime would take a prefix for whichever container's "
            "ID starts so, another pod's too; nothing is run",
            id="prefix",
        ),
        pytest.param(f"cri-o://{ID[:1]}", CRIO, "not a full cri-o container ID", id="one-digit"),
        pytest.param(f"containerd://{ID[:63]}", CONTAINERD, "not a full", id="one-short"),
        pytest.param(f"containerd://{ID}0", CONTAINERD, "not a full", id="one-long"),
        pytest.param(f"containerd://{ID.upper()}", CONTAINERD, "not a full", id="uppercase"),
        pytest.param(f"containerd:// {ID}", CONTAINERD, "not a full", id="leading-space"),
        pytest.param(f"containerd://{ID} ", CONTAINERD, "not a full", id="trailing-space"),
        pytest.param(f"containerd://{ID}\n", CONTAINERD, "\\n' in the pod", id="newline"),
        pytest.param(f"containerd://{ID[:-1]}g", CONTAINERD, "not a full", id="not-hex"),
        pytest.param(
            f"containerd://{ID[:-1]}\u0661", CONTAINERD, "not a full", id="other-script-digit"
        ),
        pytest.param(f"containerd://{ID}://{ID}", CONTAINERD, "not a full", id="two-schemes"),
        pytest.param(
            f"containerd://{ID[:-1]}/", CONTAINERD, "not a full", id="separator-in-the-id"
        ),
        pytest.param(
            "containerd://" + "a" * 5000,
            CONTAINERD,
            "containerID 'containerd://aaa",
            id="long-value-quoted-short",
        ),
    ],
)
def test_the_container_id_is_used_only_with_the_runtimes_own_scheme(
    container_id: str, runtime: RuntimeInfo, expected: ContainerRef | str
) -> None:
    ref = container_ref(container_id, runtime, endpoint=SOCK)
    if isinstance(expected, ContainerRef):
        assert ref == expected
    else:
        assert ref.id == ""
        assert expected in ref.problem
        assert len(ref.problem) < 500  # a long pod status value is quoted in part


def outcome(answer: Ran | CallFailed | NotConnected) -> Outcome:
    return cri_outcome(answer, time_limit=2.0, endpoint=SOCK, container="app", max_receive=1024)


MISSING = (
    'failed to exec in container: failed to start exec "abc": OCI runtime exec failed: exec '
    'failed: unable to start container process: exec: "nope": executable file not found in '
    "$PATH: unknown"
)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (Ran(0, b"idle\n", b""), Outcome.succeeded("idle", answer="idle")),
        (Ran(0, b"", b"warn"), Outcome.succeeded("", answer="warn")),
        (Ran(3, b"out", b"err"), Outcome.failed("err", answer="out")),
        (Ran(3, b"out", b" \x1b[0m "), Outcome.failed("out", answer="out")),
        (Ran(137, b"", b""), Outcome.failed("command exited with code 137", answer="")),
        (Ran(1, b"\xff\xfe", b""), Outcome.failed("\ufffd\ufffd", answer="\ufffd\ufffd")),
        (
            CallFailed("DEADLINE_EXCEEDED", "timeout 2s exceeded"),
            Outcome.failed("command timed out after 2s"),
        ),
        (
            # The client's own deadline (grpc's text): no verdict from the runtime.
            CallFailed("DEADLINE_EXCEEDED", "Deadline Exceeded"),
            Outcome.unknown(
                f"container runtime at {SOCK} gave no verdict on ExecSync within 12s "
                "(2s timeout + 10s grace)"
            ),
        ),
        (CallFailed("UNKNOWN", MISSING), Outcome.failed(MISSING)),
        (
            CallFailed("UNKNOWN", "container is in CONTAINER_EXITED state"),
            Outcome.failed("container app is not running: container is in CONTAINER_EXITED state"),
        ),
        (
            CallFailed("RESOURCE_EXHAUSTED", "Received message larger than max (5000 vs. 1024)"),
            Outcome.failed(
                "the command's output is larger than 1024 bytes, more than a probe may answer "
                "with over the container runtime socket"
            ),
        ),
        (
            CallFailed("NOT_FOUND", 'an error occurred when try to find container "x": not found'),
            Outcome.unknown(
                f"the container runtime at {SOCK} has no container app (the pod status may be "
                'behind): an error occurred when try to find container "x": not found'
            ),
        ),
        (
            CallFailed("UNAVAILABLE", "failed to connect to all addresses"),
            Outcome.unknown(
                f"container runtime at {SOCK}: UNAVAILABLE: failed to connect to all addresses"
            ),
        ),
        (
            CallFailed("UNKNOWN", "failed to create exec io"),
            Outcome.unknown(f"container runtime at {SOCK}: UNKNOWN: failed to create exec io"),
        ),
        (
            CallFailed("RESOURCE_EXHAUSTED", "too many calls"),
            Outcome.unknown(f"container runtime at {SOCK}: RESOURCE_EXHAUSTED: too many calls"),
        ),
        (CallFailed("CANCELLED", ""), Outcome.unknown(f"container runtime at {SOCK}: CANCELLED")),
        (NotConnected("the cri extra is missing"), Outcome.unknown("the cri extra is missing")),
    ],
)
def test_each_answer_of_the_runtime_has_one_outcome(
    answer: Ran | CallFailed | NotConnected, expected: Outcome
) -> None:
    assert outcome(answer) == expected


def test_a_call_deadline_without_the_runtimes_verdict_is_unknown_not_failed() -> None:
    # Issue 23: the kubelet judges a timeout by the runtime's verdict; a client deadline
    # that runs out first says nothing about the container.
    got = cri_outcome(
        CallFailed("DEADLINE_EXCEEDED", "Deadline Exceeded"),
        time_limit=1.0,
        endpoint=SOCK,
        container="app",
        max_receive=1024,
        grace=3.0,
    )
    assert got == Outcome.unknown(
        f"container runtime at {SOCK} gave no verdict on ExecSync within 4s (1s timeout + 3s grace)"
    )


def test_output_is_kept_to_the_cap_and_the_rest_counted() -> None:
    result = exited(Ran(0, b"a" * 5000, "é".encode() * 600), keep=1024)
    assert (len(result.stdout), result.stdout_dropped) == (1024, 5000 - 1024)
    # 512 two-byte characters fit; none is cut in half.
    assert result.stderr == "é" * 512
    assert result.stderr_dropped == 1200 - 1024


def test_hostile_output_reaches_the_pod_cleaned() -> None:
    stderr = "\x1b]0;title\x07\x1b[31mred\x1b[0m\x00\u202e".encode()
    assert outcome(Ran(1, b"", stderr)) == Outcome.failed("red", answer="red")


def kubelet(uid: str, name: str, pod: str = "gs-1") -> dict[str, str]:
    return {
        "io.kubernetes.pod.uid": uid,
        "io.kubernetes.container.name": name,
        "io.kubernetes.pod.namespace": "default",
        "io.kubernetes.pod.name": pod,
    }


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (kubelet("uid-1", "app"), ""),
        ({"io.kubernetes.pod.uid": "uid-1", "io.kubernetes.container.name": "app"}, ""),
        (
            kubelet("uid-2", "app", pod="other"),
            "the pod status names container 0000000000ab, which the runtime says is container "
            "'app' of pod default/other (uid uid-2), not 'app' of this pod (uid uid-1); nothing "
            "is run in it",
        ),
        (kubelet("uid-1", "sidecar"), "is container 'sidecar' of pod default/gs-1 (uid uid-1)"),
        ({"io.kubernetes.pod.uid": "uid-2", "io.kubernetes.container.name": "app"}, "of pod ?/?"),
        ({}, "has no kubelet labels"),
        ({"io.kubernetes.pod.uid": "uid-1"}, "has no kubelet labels"),
    ],
)
def test_the_runtimes_labels_must_name_the_probes_pod_and_container(
    labels: dict[str, str], expected: str
) -> None:
    target = ProbeTarget("default", "gs-1", PodUID("uid-1"), "app")
    problem = ownership_problem(labels, target, short_id="0000000000ab")
    if expected:
        assert expected in problem
    else:
        assert problem == ""


GS1 = ProbeTarget("default", "gs-1", PodUID("uid-1"), "app")
OTHER_ID = "1" * 64


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param(ContainerInfo(ID, kubelet("uid-1", "app")), "", id="confirmed"),
        pytest.param(
            ContainerInfo(OTHER_ID, kubelet("uid-1", "app")),
            f"the runtime answered ContainerStatus for {ID[:12]} with container "
            f"'{OTHER_ID}', not the ID asked for; nothing is run in it",
            id="another-id-answered",
        ),
        pytest.param(
            ContainerInfo("", kubelet("uid-1", "app")), "with container ''", id="no-id-answered"
        ),
        pytest.param(
            ContainerInfo(ID.upper(), kubelet("uid-1", "app")),
            "not the ID asked for",
            id="another-spelling-answered",
        ),
        pytest.param(
            ContainerInfo(ID, kubelet("uid-2", "app", pod="other")),
            f"the pod status names container {ID[:12]}, which the runtime says is container "
            "'app' of pod default/other",
            id="another-pods",
        ),
    ],
)
def test_the_runtimes_answer_must_be_for_the_id_asked_and_the_probes_container(
    answer: ContainerInfo, expected: str
) -> None:
    problem = confirmation_problem(ID, answer, GS1)
    if expected:
        assert expected in problem
    else:
        assert problem == ""
