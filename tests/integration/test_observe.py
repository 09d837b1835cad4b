"""The health and metrics server of the real daemon against the sim, over real HTTP.

/metrics is parsed with prometheus-client's own parser, and its numbers must follow
what the daemon did (probe runs, transitions, writes, API requests). /readyz says what
a daemon that is not ready waits for (a CRD not installed) and turns 200 once it is;
/healthz stays 200 through an API problem and turns 503 when the event loop or an
informer stops keeping time: the daemon's clock is made to jump (as a hung process
would see it), never a wall-clock wait for a real deadline.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import aiohttp
import anyio
import pytest
from kubernetes_asyncio import client
from prometheus_client.parser import text_string_to_metric_families

from probemarker.daemon.app import Daemon
from probemarker.daemon.assembly import client_settings
from probemarker.kit.clock import MonotonicClock
from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.config import load_kubeconfig
from probemarker.observe.descriptors import idle_http_connections, open_files_limit
from probemarker.sim import SimCluster
from probemarker.sim.exec.runners import ExecReply
from tests.integration.world import (
    Script,
    World,
    flag,
    labels_of,
    marker,
    running_daemon,
    settings,
    started_daemon,
)
from tests.probe.servers import http_server

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
LOCAL = "127.0.0.1:0"


class SkewClock(MonotonicClock):
    """The real monotonic clock, moved on by `skew` seconds when a test says so."""

    def __init__(self) -> None:
        self.skew = 0.0

    def now(self) -> float:
        return super().now() + self.skew


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        yield session


async def get(http: aiohttp.ClientSession, port: int | None, path: str) -> tuple[int, str]:
    assert port is not None
    async with http.get(f"http://127.0.0.1:{port}{path}") as response:
        return response.status, await response.text()


async def scrape(http: aiohttp.ClientSession, port: int | None) -> Samples:
    status, text = await get(http, port, "/metrics")
    assert status == 200
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def wait_for(condition: Callable[[], bool], *, within: float = 10.0) -> None:
    """Until `condition` holds; it depends on the daemon's I/O, so a short pause apart."""
    with anyio.fail_after(within):
        while not condition():  # noqa: ASYNC110 (no event to await: the daemon's state)
            await anyio.sleep(0.01)


async def test_metrics_follow_what_the_daemon_does(
    world: World, http: aiohttp.ClientSession
) -> None:
    await world.create_pod("gs-1", labels={"app": "game"})
    await world.apply_marker(marker("m", probes=[flag("idle")]))
    async with running_daemon(world.sim, metrics_address=LOCAL) as daemon:
        await world.wait_pod("gs-1", lambda p: labels_of(p).get("idle") == "yes")
        await wait_for(lambda: daemon.writer.stats.writes >= 1)
        first = await scrape(http, daemon.metrics_port)

        assert value(first, "probemarker_probe_runs_total", kind="exec", result="Succeeded") >= 1
        assert value(first, "probemarker_probe_duration_seconds_count", kind="exec") >= 1
        assert (
            value(first, "probemarker_probe_duration_seconds_bucket", kind="exec", le="+Inf") >= 1
        )
        assert value(first, "probemarker_transitions_total", state="Succeeded") == 1
        assert value(first, "probemarker_probes_tracked") == 1
        assert value(first, "probemarker_pod_writes_total", outcome="written") >= 1
        patches = value(
            first,
            "probemarker_api_requests_total",
            verb="patch",
            resource="pods/status",
            code="200",
        )
        assert patches >= 1
        assert value(first, "probemarker_informer_lists_total", informer="pods") == 1
        assert value(first, "probemarker_informer_synced", informer="podprobemarkers") == 1
        assert value(first, "probemarker_events_written_total", action="create") >= 1
        assert ("probemarker_write_queue_depth", ()) in first
        # the httpGet probes' idle connections: their share of the open-files limit
        assert value(first, "probemarker_http_probe_connections_idle_limit") == (
            idle_http_connections(open_files_limit())
        )
        assert ("probemarker_http_probe_connections_idle", ()) in first
        build = [k for k in first if k[0] == "probemarker_build_info"]
        assert len(build) == 1
        assert dict(build[0][1])["version"]
        # No pod, marker or UID in any label: the series do not grow with the cluster.
        # A namespace only in `pod_namespace`, of the probemarker_namespace_* families, and
        # only one with pods on the node (issue 40).
        uid = world.pod("gs-1")["metadata"]["uid"]
        labels = {v for _, pairs in first for k, v in pairs if k != "pod_namespace"}
        assert not labels & {"gs-1", "m", uid, "default"}
        by_namespace = {name for name, pairs in first if dict(pairs).get("pod_namespace")}
        assert by_namespace
        assert all(name.startswith("probemarker_namespace_") for name in by_namespace)
        assert ("probemarker_namespace_probes_running", (("pod_namespace", "default"),)) in first
        assert (
            value(first, "probemarker_namespace_pod_writes_sent_total", pod_namespace="default")
            >= 1
        )

        world.script.set("gs-1", "app", "check", ExecReply(1, b"busy\n"))
        await world.wait_pod("gs-1", lambda p: labels_of(p).get("idle") == "no")
        await wait_for(lambda: daemon.engine.stats.transitions["Failed"] >= 1)
        second = await scrape(http, daemon.metrics_port)
        assert value(second, "probemarker_probe_runs_total", kind="exec", result="Failed") >= 1
        assert value(second, "probemarker_transitions_total", state="Failed") == 1
        assert value(
            second, "probemarker_probe_runs_total", kind="exec", result="Succeeded"
        ) >= value(first, "probemarker_probe_runs_total", kind="exec", result="Succeeded")
        assert (
            value(
                second,
                "probemarker_api_requests_total",
                verb="patch",
                resource="pods/status",
                code="200",
            )
            > patches
        )


async def test_readyz_names_a_missing_crd_until_it_is_installed(
    http: aiohttp.ClientSession,
) -> None:
    async with (
        SimCluster(node_names=("node-1",)) as sim,
        client.ApiClient(sim.configuration()) as api,
    ):
        world = World(sim, api, Script())
        async with started_daemon(sim, metrics_address=LOCAL) as daemon:
            with anyio.fail_after(10):
                await daemon.serving.wait()
            await wait_for(lambda: daemon.markers.problem is not None)
            status, body = await get(http, daemon.metrics_port, "/readyz")
            assert status == 503
            assert body.startswith("informer podprobemarkers: waiting for its first list: ")
            assert "CRD is not installed" in body
            # Not a liveness failure: a restart would not install the CRD.
            assert (await get(http, daemon.metrics_port, "/healthz"))[0] == 200

            await world.install_crd()
            with anyio.fail_after(10):
                await daemon.ready.wait()
            assert await get(http, daemon.metrics_port, "/readyz") == (200, "ok\n")


async def test_healthz_fails_when_the_loop_or_an_informer_stops_keeping_time(
    world: World, http: aiohttp.ClientSession
) -> None:
    clock = SkewClock()
    async with running_daemon(world.sim, metrics_address=LOCAL, clock=clock) as daemon:
        port = daemon.metrics_port
        status, body = await get(http, port, "/healthz")
        assert status == 200
        assert body.startswith("ok: event loop late ")

        clock.skew += 100.0  # the loop missed its heartbeat by far; no deadline is near
        status, body = await get(http, port, "/healthz")
        assert status == 503
        assert body.startswith("event loop: ")
        assert "informer" not in body

        # Every informer loop far past its read deadline (630 s at most, + 60 s).
        clock.skew += 10_000.0
        status, body = await get(http, port, "/healthz")
        assert status == 503
        assert "informer podprobemarkers: hung " in body
        # The heartbeat catches up within two beats; the markers' watch has no line to
        # read (no marker changes), so it stays hung: the informer alone is named.
        await wait_for(lambda: daemon.heartbeat.late() < 1.0)
        status, body = await get(http, port, "/healthz")
        assert status == 503
        assert "event loop" not in body
        assert "informer podprobemarkers: hung " in body


async def test_the_server_closes_with_the_daemon(world: World, http: aiohttp.ClientSession) -> None:
    async with running_daemon(world.sim, metrics_address=LOCAL) as daemon:
        port = daemon.metrics_port
        assert (await get(http, port, "/readyz"))[0] == 200
    with pytest.raises(aiohttp.ClientConnectionError):
        await get(http, port, "/healthz")


async def test_a_stopping_daemon_stays_ready_until_its_server_closes(
    world: World, http: aiohttp.ClientSession
) -> None:
    """The kubelet probes the readiness of a pod being deleted until its container
    stops, and each failure is a Warning `Unhealthy` event: a normal stop answers
    /readyz 200 (`ok: stopping`) all through the shutdown grace, here held open by an
    httpGet probe that has not been answered yet."""
    pod = await world.create_pod("gs-1", labels={"app": "game"})
    async with http_server(pod["status"]["podIP"]) as server:
        action = {"httpGet": {"port": server.port, "path": "/slow-headers"}}
        await world.apply_marker(marker("m", probes=[flag("slow", action=action, timeout=30)]))
        run = settings(world.sim, metrics_address=LOCAL, shutdown_grace_seconds=30.0)
        connection = await load_kubeconfig(world.sim.kubeconfig_path)
        async with KubeClient(connection, settings=client_settings(run)) as kube:
            daemon, stop = Daemon(kube, run), anyio.Event()
            async with anyio.create_task_group() as group:
                group.start_soon(lambda: daemon.run(stop=stop))
                with anyio.fail_after(10):
                    await daemon.ready.wait()
                    await server.arrived.wait()  # the probe run is in flight
                port = daemon.metrics_port
                assert await get(http, port, "/readyz") == (200, "ok\n")
                stop.set()
                with anyio.fail_after(10):
                    await daemon.stopping.wait()
                assert await get(http, port, "/readyz") == (200, "ok: stopping\n")
                assert (await get(http, port, "/healthz"))[0] == 200
                server.release.set()  # the run ends; the stop completes
    with pytest.raises(aiohttp.ClientConnectionError):
        await get(http, port, "/readyz")


async def test_no_server_when_the_address_is_0(world: World) -> None:
    async with running_daemon(world.sim, metrics_address="0") as daemon:
        assert daemon.metrics_port is None
        assert not daemon.serving.is_set()
        assert daemon.snapshot().probes == 0  # the numbers are there for whoever asks


async def test_a_daemon_stopped_before_it_is_ready_closes_everything(
    http: aiohttp.ClientSession,
) -> None:
    """The server, the informers' streams, the writer's: nothing is left open (an
    unclosed stream is a ResourceWarning, an error in this suite)."""
    async with SimCluster(node_names=("node-1",)) as sim:
        async with started_daemon(sim, metrics_address=LOCAL) as daemon:
            await wait_for(lambda: daemon.markers.problem is not None)
            port = daemon.metrics_port
            assert (await get(http, port, "/readyz"))[0] == 503
        assert not daemon.ready.is_set()
        with pytest.raises(aiohttp.ClientConnectionError):
            await get(http, port, "/readyz")
