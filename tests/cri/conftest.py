"""Fixtures for tests against a real container runtime (marker `cri`).

The runtime is the one hack/cri-runtime.sh starts; tests find it through
PROBEMARKER_TEST_CRI_ENDPOINT and skip without it (fail under
PROBEMARKER_TEST_REQUIRE_CRI=1, as in CI). Mark such tests `@pytest.mark.cri`.

- `cri_endpoint`: the endpoint (unix:///...);
- `cri`: the tests' own CRI client (tests/cri/client.py) for the session;
- `cri_sandbox`: a running pod sandbox, one per test module;
- `cri_containers` / `start_container`: start containers in that sandbox
  (`start_container(name, command=[...]) -> container id`); each test's containers are
  stopped and removed after it, passed or failed;
- `cri_runtime`: take containerd down and back up; it is brought back up after the test
  whatever happened (and before that test's containers are removed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

import pytest

from tests.cri.client import CRIClient, compile_messages
from tests.cri.runtime import (
    Containers,
    RuntimeControl,
    Sandbox,
    find_endpoint,
    find_state_dir,
    remove_sandbox,
    run_sandbox,
    unique,
)


@pytest.fixture(scope="session")
def cri_endpoint() -> str:
    return find_endpoint()


@pytest.fixture(scope="session")
def cri(cri_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CRIClient]:
    pb = compile_messages(tmp_path_factory.mktemp("cri-proto"))
    with CRIClient(cri_endpoint, pb) as client:
        yield client


@pytest.fixture(scope="module")
def cri_sandbox(cri: CRIClient, request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    sandbox = run_sandbox(cri, unique(request.module.__name__.rpartition(".")[2]))
    try:
        yield sandbox
    finally:
        remove_sandbox(cri, sandbox)


@pytest.fixture
def cri_containers(cri: CRIClient, cri_sandbox: Sandbox) -> Iterator[Containers]:
    containers = Containers(cri, cri_sandbox)
    try:
        yield containers
    finally:
        containers.remove_all()


@pytest.fixture
def start_container(cri_containers: Containers) -> Callable[..., str]:
    def start(
        name: str, command: Sequence[str] | None = None, *, labels: Mapping[str, str] | None = None
    ) -> str:
        if command is None:
            return cri_containers.start(name, labels=labels)
        return cri_containers.start(name, command, labels=labels)

    return start


@pytest.fixture
def cri_runtime(cri_containers: Containers, cri: CRIClient) -> Iterator[RuntimeControl]:
    # Depends on cri_containers so it is torn down first: the runtime is up again when
    # the test's containers are removed.
    control = RuntimeControl(state_dir=find_state_dir())
    try:
        yield control
    finally:
        if control.is_down:
            control.up()
        cri.wait_ready(timeout=30)
