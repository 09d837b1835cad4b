"""`{{.Result}}` in markerPolicy values, the real daemon against the sim (issue 24): the
probe's answer as a label and an annotation, written at once when it changes, refused
when it cannot go on the pod (one Warning per value, the last valid value kept), and
taken from the pod by a restarted daemon, which then writes nothing."""

from __future__ import annotations

import anyio
import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from probemarker.sim.exec.runners import ExecIO, ExecReply, ExecRequest
from tests.integration.world import (
    NS,
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


class Role:
    """A database's role command: answers `replica` with exit 1, or (`hang`) sleeps
    past the probe's timeout first, as a stuck database client would."""

    def __init__(self) -> None:
        self.hang = 0.0
        self.runs = 0

    async def __call__(self, request: ExecRequest, io: ExecIO) -> int:
        self.runs += 1
        if self.hang:
            hang, self.hang = self.hang, 0.0
            await anyio.sleep(hang)
        await io.write_stdout(b"replica\n")
        return 1


async def test_one_timed_out_run_does_not_wipe_the_role(world: World) -> None:
    """Defect 2, the database example of docs/api.md (`role: "{{.Result}}"` in both
    states, failureThreshold 3): one run that times out got no answer; before, the API
    server stored `replica`, `""`, `replica`: two writes and a flap of a label that
    Services select on."""
    role = Role()
    both = {"labels": {ROLE: "{{.Result}}"}}
    await world.create_pod("db-1", labels={"app": "game"})
    world.sim.exec_handlers.register_stream(NS, "db-1", "app", role)
    await world.apply_marker(
        marker("db", probes=[probe("role", failure=3, succeeded=both, failed=both)])
    )
    async with running_daemon(world.sim) as daemon:
        await world.wait_pod("db-1", lambda p: labels_of(p).get(ROLE) == "replica")
        await eventually(lambda: daemon.writer.depth == 0)
        writes = world.pod_writes()
        async with history(world, "db-1") as seen:
            role.hang = 2.5  # one run times out (1 s); its command ends 1.5 s later
            assert daemon.exec is not None
            holds = daemon.exec.holds
            await eventually(lambda: holds.stats.ended >= 1, within=10)
            runs = role.runs
            await eventually(lambda: role.runs >= runs + 2)  # answered again, twice
            await eventually(lambda: daemon.writer.depth == 0)
        assert all(labels_of(p).get(ROLE) == "replica" for p in seen), seen
        # The only writes are the api backend's hold of the command that outlived its
        # timeout, in the ownership record: one when it starts, one when it ends (issue
        # 30). Before: `replica`, `""`, `replica` besides.
        assert holds.stats.held_total == 1
        assert world.pod_writes() == writes + 2
        assert labels_of(world.pod("db-1"))[ROLE] == "replica"


async def test_room_for_one_of_two_rendered_annotations(world: World) -> None:
    """Defect 1: before, both values were judged alone and sent together; the API
    server refused the write (422, `Too long`), the pod got WriteRefused and neither
    value, and the full write was refused again on every retry."""
    answer = "y" * 1000  # an answer is at most 1 KiB
    big = "x" * (256 * 1024 - 1600)  # room for one answer and the record, not two
    world.script.set("g", "app", "note", ExecReply(0, answer.encode()))
    await world.create_pod("g", labels={"app": "game"}, annotations={"big": big})
    notes = {"annotations": {"game.io/a": "{{.Result}}", "game.io/b": "{{.Result}}"}}
    await world.apply_marker(
        marker(
            "game",
            probes=[probe("note", command="note", succeeded={**notes, "labels": {"up": "yes"}})],
        )
    )
    async with running_daemon(world.sim) as daemon:
        pod = await world.wait_pod("g", lambda p: labels_of(p).get("up") == "yes")
        assert annotations_of(pod)["game.io/a"] == answer  # first in claim order
        assert "game.io/b" not in annotations_of(pod)
        [warning] = [await world.wait_event("InvalidResultValue")]
        assert "game.io/b" in (warning.get("note") or warning.get("message") or "")
        await world.script.wait_calls(3)
        await eventually(lambda: daemon.writer.depth == 0)
        assert world.events("WriteRefused") == []
        refused = world.sim.accounting.count(verb="patch", resource="pods", code=422)
        assert refused == 0
        assert len(world.events("InvalidResultValue")) == 1


async def test_a_restarted_daemon_raises_no_warning_it_raised_already(world: World) -> None:
    """The record carries the Warnings (`w`): a new daemon on an unchanged situation
    (an invalid value, two markers disagreeing) adds no event."""
    world.script.set("g", "app", "map", ExecReply(0, b"Dust II (night)\n"))
    await world.create_pod("g", labels={"app": "game"})
    await world.apply_marker(game_server())
    other = probe("map", command="map", succeeded={"labels": {"game.io/up": "yes"}})
    rival = probe("up", command="map", succeeded={"labels": {"game.io/up": "no"}})
    await world.apply_marker(marker("zz", probes=[other, rival]))
    async with running_daemon(world.sim) as daemon:
        await world.wait_event("InvalidResultValue")
        await world.wait_event("ConflictingMarkers")
        await world.script.wait_calls(6)
        await eventually(lambda: daemon.writer.depth == 0)
    before = {r: len(world.events(r)) for r in ("InvalidResultValue", "ConflictingMarkers")}
    assert before == {"InvalidResultValue": 1, "ConflictingMarkers": 1}
    async with running_daemon(world.sim) as daemon:
        await world.script.wait_calls(6)
        await eventually(lambda: daemon.writer.depth == 0)
        assert daemon.engine.stats.invalid_values == {}
    after = {r: len(world.events(r)) for r in before}
    assert after == before
