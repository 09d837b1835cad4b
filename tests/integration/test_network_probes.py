"""httpGet and tcpSocket probes end to end: the real daemon against the sim, with real
servers bound to each simulated pod's own 127.x address.

The sim's kubelet gives each pod a unique IP (127.0.1.N); on Linux all of 127/8 is
on the loopback, so a test server listens on exactly the address the pod reports,
and a probe that went anywhere else would find nothing there.
"""

from __future__ import annotations

from probemarker import __version__
from tests.integration.world import World, condition, flag, labels_of, marker, probe, running_daemon
from tests.probe.servers import closed_port, free_port, http_server, tcp_listener
from tests.probe.test_grpc_probe import NOT_SERVING, SERVING, grpc_server


def http(port: int | str, path: str) -> dict[str, object]:
    return {"httpGet": {"port": port, "path": path}}


async def test_http_probes_mark_the_pod(world: World) -> None:
    port = free_port("127.0.0.1")  # declared in the pod spec before the server binds it
    pod = await world.create_pod("web", labels={"app": "game"}, ports={"app": {"http": port}})
    ip = pod["status"]["podIP"]
    probes = [
        flag("healthy", action=http("http", "/ok")),  # a named port
        flag("broken", action=http(port, "/status/500")),  # a number
        probe(
            "idle",
            action=http("http", "/ok"),
            condition="game.example.com/idle",
            succeeded={"labels": {"idle": "true"}},
        ),
    ]
    async with http_server(ip, port=port) as server:
        await world.apply_marker(marker("m", probes=probes))
        async with running_daemon(world.sim):
            found = await world.wait_pod(
                "web",
                lambda p: (
                    labels_of(p).get("healthy") == "yes"
                    and labels_of(p).get("broken") == "no"
                    and condition(p, "game.example.com/idle") is not None
                ),
            )
    idle = condition(found, "game.example.com/idle")
    assert idle is not None
    assert (idle["status"], idle["message"]) == ("True", "all good")
    assert {r.headers["User-Agent"] for r in server.requests} == {f"probemarker/{__version__}"}


async def test_an_html_error_page_is_not_the_condition_message(world: World) -> None:
    # A web server's 404 page in the condition made `kubectl describe` a page of markup;
    # the kubelet says only the status, and so does the condition (issue 23).
    pod = await world.create_pod("site", labels={"app": "game"})
    ip = pod["status"]["podIP"]
    async with http_server(ip) as server:
        page_probe = probe(
            "page", action=http(server.port, "/html-404"), condition="game.example.com/page"
        )
        await world.apply_marker(marker("m", probes=[page_probe]))
        async with running_daemon(world.sim):
            found = await world.wait_pod(
                "site", lambda p: condition(p, "game.example.com/page") is not None
            )
    page = condition(found, "game.example.com/page")
    assert page is not None
    assert (page["status"], page["reason"], page["message"]) == (
        "False",
        "ProbeFailed",
        "HTTP probe failed with statuscode: 404",
    )


async def test_a_named_port_of_a_native_sidecar(world: World) -> None:
    port = free_port("127.0.0.1")  # declared in the pod spec before the server binds it
    pod = await world.create_pod(
        "proxy", labels={"app": "game"}, sidecars=("envoy",), ports={"envoy": {"admin": port}}
    )
    probes = [flag("ready", container="envoy", action=http("admin", "/ok"))]
    async with http_server(pod["status"]["podIP"], port=port):
        await world.apply_marker(marker("m", probes=probes))
        async with running_daemon(world.sim):
            await world.wait_pod("proxy", lambda p: labels_of(p).get("ready") == "yes")


async def test_tcp_probes_open_and_closed(world: World) -> None:
    pod = await world.create_pod("db", labels={"app": "game"})
    ip = pod["status"]["podIP"]
    with tcp_listener(ip) as open_port, closed_port(ip) as shut:
        probes = [
            flag("listening", action={"tcpSocket": {"port": open_port}}),
            flag("shut", action={"tcpSocket": {"port": shut}}),
        ]
        await world.apply_marker(marker("m", probes=probes))
        async with running_daemon(world.sim):
            await world.wait_pod(
                "db",
                lambda p: (
                    labels_of(p).get("listening") == "yes" and labels_of(p).get("shut") == "no"
                ),
            )


async def test_an_unknown_port_name_decides_nothing_and_says_so_once(world: World) -> None:
    await world.create_pod("web", labels={"app": "game"}, ports={"app": {"http": 8080}})
    probes = [
        flag("clock"),  # an exec probe: its runs tell the test that time has passed
        flag("web", action={"tcpSocket": {"port": "metrics"}}),
    ]
    await world.apply_marker(marker("m", probes=probes))
    async with running_daemon(world.sim) as daemon:
        event = await world.wait_event("PortNotFound")
        await world.script.wait_calls(3)  # the broken probe had its runs too
        assert daemon.engine.stats.runs[("tcpSocket", "Unknown")] >= 2
    assert event["type"] == "Warning"
    assert event["message"] == (
        "m/web on container app: port 'metrics' is not among the ports of container app. "
        "The probe decides nothing until this is fixed."
    )
    assert event["involvedObject"]["name"] == "web"
    assert len(world.events("PortNotFound")) == 1
    labels = labels_of(world.pod("web"))
    assert labels.get("clock") == "yes"
    assert "web" not in labels


async def test_grpc_probes_mark_the_pod(world: World) -> None:
    pod = await world.create_pod("rpc", labels={"app": "game"})
    async with grpc_server(pod["status"]["podIP"]) as server:
        await server.health.set("", SERVING)
        await server.health.set("db", NOT_SERVING)
        probes = [
            flag("overall", action={"grpc": {"port": server.port}}),
            flag("db", action={"grpc": {"port": server.port, "service": "db"}}),
        ]
        await world.apply_marker(marker("m", probes=probes))
        async with running_daemon(world.sim):
            await world.wait_pod(
                "rpc",
                lambda p: labels_of(p).get("overall") == "yes" and labels_of(p).get("db") == "no",
            )
            await server.health.set("db", SERVING)  # the database came up
            await world.wait_pod("rpc", lambda p: labels_of(p).get("db") == "yes")
    # grpc adds its own product tokens after ours.
    assert server.health.user_agents
    assert all(a.startswith(f"probemarker/{__version__}") for a in server.health.user_agents)
