"""`{{.Result}}` in markerPolicy values, the real daemon against the sim (issue 24): the
probe's answer as a label and an annotation, written at once when it changes, refused
when it cannot go on the pod (one Warning per value, the last valid value kept), and
taken from the pod by a restarted daemon, which then writes nothing."""

from __future__ import annotations

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from probemarker.sim.exec.runners import ExecReply
from tests.integration.world import (
    World,
    annotations_of,
    eventually,
    history,
    labels_of,
    marker,
    probe,
    running_daemon,
)

MAP, PLAYERS, ROLE = "game.io/map", "game.io/players", "db.io/role"


def game_server() -> dict[str, object]:
    """One probe: the map as a label, a status line as an annotation."""
    return marker(
        "game",
        probes=[
            probe(
                "map",
                command="map",
                succeeded={
                    "labels": {MAP: "{{ .Result }}"},
                    "annotations": {PLAYERS: "on {{.Result}}"},
                },
                failed={"labels": {MAP: "none"}},
            )
        ],
    )


async def test_the_answer_is_the_value_and_a_new_answer_is_written_at_once(
    world: World,
) -> None:
    world.script.set("g", "app", "map", ExecReply(0, b" |de_dust2| \n12 players\n"))
    await world.create_pod("g", labels={"app": "game"})
    await world.apply_marker(game_server())
    async with running_daemon(world.sim):
        # The first line, trimmed, without '|'.
        pod = await world.wait_pod("g", lambda p: labels_of(p).get(MAP) == "de_dust2")
        assert annotations_of(pod)[PLAYERS] == "on de_dust2"
        writes = world.pod_writes()
        world.script.set("g", "app", "map", ExecReply(0, b"de_inferno\n"))
        pod = await world.wait_pod("g", lambda p: labels_of(p).get(MAP) == "de_inferno")
        assert annotations_of(pod)[PLAYERS] == "on de_inferno"
        assert world.pod_writes() == writes + 1  # label and annotation in one write
        world.script.set("g", "app", "map", ExecReply(1, b"shutting down\n"))
        pod = await world.wait_pod("g", lambda p: labels_of(p).get(MAP) == "none")
        assert PLAYERS not in annotations_of(pod)  # the other state's key is cleaned up


async def test_one_probe_gives_a_database_its_role(world: World) -> None:
    role = probe("role", command="role", succeeded={"labels": {ROLE: "{{.Result}}"}})
    for name, answer in (("db-0", b"primary\n"), ("db-1", b"replica\n")):
        world.script.set(name, "app", "role", ExecReply(0, answer))
        await world.create_pod(name, labels={"app": "game"})
    await world.apply_marker(marker("db", probes=[role]))
    async with running_daemon(world.sim):
        await world.wait_pod("db-0", lambda p: labels_of(p).get(ROLE) == "primary")
        await world.wait_pod("db-1", lambda p: labels_of(p).get(ROLE) == "replica")
        # A failover: the same probe, other answers.
        world.script.set("db-0", "app", "role", ExecReply(0, b"replica\n"))
        world.script.set("db-1", "app", "role", ExecReply(0, b"primary\n"))
        await world.wait_pod("db-1", lambda p: labels_of(p).get(ROLE) == "primary")
        await world.wait_pod("db-0", lambda p: labels_of(p).get(ROLE) == "replica")


async def test_an_invalid_value_keeps_the_last_valid_one_and_is_reported_once(
    world: World,
) -> None:
    world.script.set("g", "app", "map", ExecReply(0, b"de_dust2\n"))
    await world.create_pod("g", labels={"app": "game"})
    await world.apply_marker(game_server())
    async with running_daemon(world.sim) as daemon:
        await world.wait_pod("g", lambda p: labels_of(p).get(MAP) == "de_dust2")
        world.script.set("g", "app", "map", ExecReply(0, b"Dust II (night)\n"))
        warning = await world.wait_event("InvalidResultValue")
        await world.script.wait_calls(3)  # more runs, the same bad answer
        pod = world.pod("g")
        assert labels_of(pod)[MAP] == "de_dust2"  # the last valid value stays
        # The annotation could take the value: it is written, the label is not.
        assert annotations_of(pod)[PLAYERS] == "on Dust II (night)"
        assert warning["type"] == "Warning"
        note = warning.get("note") or warning.get("message") or ""
        assert f"label '{MAP}' would be 'Dust II (night)'" in note
        assert "game/map" in note  # the marker and the probe
        assert len(world.events("InvalidResultValue")) == 1
        assert daemon.engine.stats.invalid_values == {"label": 1}
        world.script.set("g", "app", "map", ExecReply(0, b"de_nuke\n"))
        await world.wait_pod("g", lambda p: labels_of(p).get(MAP) == "de_nuke")


async def test_a_restarted_daemon_takes_the_pods_value_and_writes_nothing(
    world: World,
) -> None:
    world.script.set("g", "app", "map", ExecReply(0, b"de_dust2\n"))
    await world.create_pod("g", labels={"app": "game"})
    await world.apply_marker(game_server())
    async with running_daemon(world.sim):
        await world.wait_pod("g", lambda p: labels_of(p).get(MAP) == "de_dust2")
    writes = world.pod_writes()
    async with running_daemon(world.sim) as daemon:
        await world.script.wait_calls(3)
        await eventually(lambda: daemon.writer.depth == 0)
        assert world.pod_writes() == writes
        world.script.set("g", "app", "map", ExecReply(0, b"de_nuke\n"))
        await world.wait_pod("g", lambda p: labels_of(p).get(MAP) == "de_nuke")
        assert world.pod_writes() == writes + 1


async def test_a_marker_edited_to_use_the_result_shows_no_empty_value(world: World) -> None:
    """Until the edited probe runs, its result is not known: the pod keeps the static
    value, never an empty rendering of it."""
    world.script.set("g", "app", "map", ExecReply(0, b"de_dust2\n"))
    await world.create_pod("g", labels={"app": "game"})
    static = probe("map", command="map", period=3, succeeded={"labels": {MAP: "unknown"}})
    await world.apply_marker(marker("game", probes=[static]))
    async with running_daemon(world.sim):
        await world.wait_pod("g", lambda p: labels_of(p).get(MAP) == "unknown")
        async with history(world, "g") as seen:
            await world.apply_marker(game_server())
            await world.wait_pod("g", lambda p: labels_of(p).get(MAP) == "de_dust2")
        shown = [labels_of(p).get(MAP) for p in seen]
        assert "" not in shown, shown
        assert shown[-1] == "de_dust2"


@pytest.mark.parametrize(
    ("value", "field"),
    [
        pytest.param("{{.Players}}", "labels", id="other-field"),
        pytest.param("-{{.Result}}", "labels", id="never-a-label-value"),
    ],
)
async def test_the_api_server_refuses_a_template_it_cannot_render(
    world: World, value: str, field: str
) -> None:
    body = marker("bad", probes=[probe("p", succeeded={field: {MAP: value}})])
    with pytest.raises(ApiException) as refused:
        await world.apply_marker(body)
    assert refused.value.status == 422
    assert f"spec.probes[0].markerPolicy[0].{field}" in str(refused.value.body)
