"""`probemarker check` against the sim over real HTTP and real exec WebSockets: what it
prints, that the patch it prints is what the daemon then writes, and that it writes
nothing itself."""

from __future__ import annotations

import dataclasses
import io
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from probemarker.check.marker import UsageError
from probemarker.check.run import CheckOptions, run_check
from probemarker.daemon.settings import RunSettings
from probemarker.sim.exec.runners import ExecReply
from probemarker.sim.store.patch import apply_json_patch
from tests.integration.world import (
    NS,
    OWNED,
    World,
    annotations_of,
    condition,
    flag,
    labels_of,
    marker,
    probe,
    running_daemon,
)
from tests.probe.servers import closed_port, http_server

WRITES = ("create", "update", "patch", "delete", "deletecollection")
IDLE = "game.example.com/idle"


def idle_marker(name: str = "idle") -> dict[str, Any]:
    return marker(
        name,
        probes=[
            probe(
                "idle",
                command="idle",
                condition=IDLE,
                succeeded={"labels": {"idle": "true"}},
                failed={"labels": {"idle": "false"}},
            )
        ],
    )


async def check(world: World, tmp_path: Path, options: CheckOptions) -> tuple[int, str, str]:
    """Run check in-process against the sim; (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    settings = RunSettings(kubeconfig=str(world.sim.kubeconfig_path))
    code = await run_check(options, settings, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def marker_file(tmp_path: Path, body: Mapping[str, Any]) -> str:
    path = tmp_path / "marker.yaml"
    path.write_text(yaml.safe_dump(dict(body)))
    return str(path)


def writes(world: World) -> list[Any]:
    return [r for r in world.sim.accounting if r.verb in WRITES]


def our_state(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    """What a patch of the daemon decides on a pod: labels, annotations, our condition
    (times left out: each writer stamps its own)."""
    found = condition(dict(pod), IDLE)
    shown = None if found is None else (found["status"], found["reason"], found.get("message"))
    return labels_of(dict(pod)), annotations_of(dict(pod)), shown


async def test_check_prints_the_patch_the_daemon_then_writes_and_writes_nothing(
    world: World, tmp_path: Path
) -> None:
    world.script.set("game-0", "app", "idle", ExecReply(0, b"idle since 5 min\n"))
    before = await world.create_pod("game-0", labels={"app": "game"})
    path = marker_file(tmp_path, idle_marker())
    world.sim.accounting.reset()

    code, out, err = await check(world, tmp_path, CheckOptions(file=path, output="json"))

    assert (code, err) == (0, "")
    assert writes(world) == []  # no PATCH, POST, PUT or DELETE from check
    assert (
        world.pod("game-0")["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    )
    assert world.events("ProbeSucceeded") == []
    assert world.sim.accounting.count(verb="get", resource="pods", subresource="exec") == 1
    report = orjson.loads(out)
    assert report["wrote"] is False
    [pod] = report["pods"]
    [result] = pod["probes"]
    assert (result["status"], result["message"], result["via"]) == (
        "Succeeded",
        "idle since 5 min",
        "pods/exec",
    )
    assert result["values"] == {"labels": {"idle": "true"}, "annotations": {}}
    expected = our_state(apply_json_patch(world.pod("game-0"), pod["patch"]))
    assert expected[0]["idle"] == "true"

    await world.apply_marker(idle_marker())
    async with running_daemon(world.sim):
        written = await world.wait_pod("game-0", lambda p: OWNED in annotations_of(p))
    assert our_state(written) == expected


async def test_the_printed_patch_applies_and_the_daemon_then_has_nothing_to_write(
    world: World, tmp_path: Path
) -> None:
    world.script.set("game-0", "app", "idle", ExecReply(1, b"", b"busy\n"))
    await world.create_pod("game-0", labels={"app": "game"})
    code, out, _ = await check(
        world, tmp_path, CheckOptions(file=marker_file(tmp_path, idle_marker()), output="json")
    )
    assert code == 1
    [pod] = orjson.loads(out)["pods"]
    assert pod["probes"][0]["status"] == "Failed"
    await world.core.patch_namespaced_pod_status("game-0", NS, pod["patch"])
    assert labels_of(world.pod("game-0"))["idle"] == "false"
    await world.apply_marker(idle_marker())
    world.sim.accounting.reset()
    async with running_daemon(world.sim):
        await world.script.wait_calls(2)  # decided at the first run; written by now if at all
    assert world.pod_writes() == 0  # the pod already showed what the daemon decided


async def test_another_markers_keys_are_kept(world: World, tmp_path: Path) -> None:
    # The pod carries keys of marker "other" (recorded); check knows only "idle", and
    # must not propose removing what "other" wrote.
    await world.create_pod("game-0", labels={"app": "game"})
    await world.apply_marker(marker("other", probes=[flag("ready", command="ready")]))
    async with running_daemon(world.sim):
        await world.wait_pod("game-0", lambda p: labels_of(p).get("ready") == "yes")
    code, out, _ = await check(
        world, tmp_path, CheckOptions(file=marker_file(tmp_path, idle_marker()), output="json")
    )
    assert code == 0
    [pod] = orjson.loads(out)["pods"]
    assert pod["heldMarkers"] == ["other"]
    assert not [op for op in pod["patch"] if op["op"] == "remove"]
    after = apply_json_patch(world.pod("game-0"), pod["patch"])
    assert labels_of(after)["ready"] == "yes"
    assert "other#ready" in annotations_of(after)[OWNED]


async def test_marker_from_the_cluster_and_text_output(world: World, tmp_path: Path) -> None:
    await world.create_pod("game-0", labels={"app": "game"})
    await world.apply_marker(idle_marker())
    code, out, err = await check(world, tmp_path, CheckOptions(marker=f"{NS}/idle"))
    assert (code, err) == (0, "")
    assert f"PodProbeMarker {NS}/idle (from the cluster)" in out
    assert "Nothing is written to the cluster: no patch, no event." in out
    assert "probe idle (container app, exec, via pods/exec): Succeeded" in out
    assert "would set label idle=true" in out
    assert "as if decided: the daemon waits for 1 consecutive Succeeded result" in out
    assert '"op": "add", "path": "/metadata/labels/idle", "value": "true"' in out
    assert "wrote nothing; exit 0" in out


async def test_check_says_whether_the_pod_gates_on_the_probes_condition(
    world: World, tmp_path: Path
) -> None:
    """A condition decides Ready only for a pod whose spec.readinessGates lists it."""
    world.script.set("game-0", "app", "idle", ExecReply(0, b"idle\n"))
    world.script.set("game-1", "app", "idle", ExecReply(0, b"idle\n"))
    await world.create_pod("game-0", labels={"app": "game"}, readiness_gates=("other.io/x", IDLE))
    await world.create_pod("game-1", labels={"app": "game"})
    await world.apply_marker(idle_marker())
    code, out, err = await check(world, tmp_path, CheckOptions(marker=f"{NS}/idle"))
    assert (code, err) == (0, "")
    gated, open_ = out.split("\npod ")[1:3]
    assert gated.startswith(f"{NS}/game-0")
    assert f"readiness gate: the pod's spec.readinessGates lists {IDLE}" in gated
    assert open_.startswith(f"{NS}/game-1")
    assert (
        f"no readiness gate: the pod's spec.readinessGates does not list {IDLE}, so this "
        "condition does not affect the pod's Ready"
    ) in open_
    code, out, _ = await check(world, tmp_path, CheckOptions(marker=f"{NS}/idle", output="json"))
    assert [p["probes"][0]["readinessGate"] for p in orjson.loads(out)["pods"]] == [
        {"conditionType": IDLE, "gated": True},
        {"conditionType": IDLE, "gated": False},
    ]


async def test_a_marker_missing_from_the_cluster_is_a_usage_error(
    world: World, tmp_path: Path
) -> None:
    with pytest.raises(UsageError, match="PodProbeMarker nope not found in namespace default"):
        await check(world, tmp_path, CheckOptions(marker=f"{NS}/nope"))


async def test_pods_not_found_not_selected_or_terminating(world: World, tmp_path: Path) -> None:
    await world.create_pod("other-app", labels={"app": "web"})
    await world.create_pod("leaving", labels={"app": "game"})
    await world.core.patch_namespaced_pod(
        "leaving", NS, {"metadata": {"finalizers": ["example.com/hold"]}}
    )
    await world.core.delete_namespaced_pod("leaving", NS)
    await world.wait_pod("leaving", lambda p: p["metadata"].get("deletionTimestamp") is not None)
    pods = (f"{NS}/ghost", f"{NS}/other-app", f"{NS}/leaving")
    path = marker_file(tmp_path, idle_marker())
    code, out, _ = await check(world, tmp_path, CheckOptions(file=path, pods=pods))
    assert code == 1
    assert f"pod {NS}/ghost: skipped: pod {NS}/ghost not found" in out
    assert (
        f"pod {NS}/other-app: skipped: not selected: the marker's selector 'app=game' "
        "does not match the pod's labels"
    ) in out
    assert f"pod {NS}/leaving: skipped: the pod is terminating" in out
    assert "0 probe runs" in out
    await world.core.patch_namespaced_pod("leaving", NS, {"metadata": {"finalizers": None}})


async def test_network_probes_are_not_reachable_from_here(world: World, tmp_path: Path) -> None:
    await world.create_pod("web", labels={"app": "game"})
    body = marker(
        "net",
        probes=[
            flag("http", action={"httpGet": {"port": 8080, "path": "/"}}),
            flag("tcp", action={"tcpSocket": {"port": 8080}}),
        ],
    )
    code, out, _ = await check(
        world, tmp_path, CheckOptions(file=marker_file(tmp_path, body), output="json")
    )
    assert code == 1
    [pod] = orjson.loads(out)["pods"]
    assert [p["status"] for p in pod["probes"]] == ["NotReachable", "NotReachable"]
    assert all(p["message"].startswith("not reachable from here") for p in pod["probes"])
    assert pod["patch"] == []  # not decided: nothing changes
    code, text, _ = await check(world, tmp_path, CheckOptions(file=marker_file(tmp_path, body)))
    assert "Unknown (not reachable from here)" in text


async def test_via_api_proxy_sends_http_get_through_the_api_server(
    world: World, tmp_path: Path
) -> None:
    pod = await world.create_pod("web", labels={"app": "game"})
    ip = pod["status"]["podIP"]
    async with http_server(ip) as server:
        body = marker(
            "net",
            probes=[
                flag("ok", action={"httpGet": {"port": server.port, "path": "/ok"}}),
                flag("bad", action={"httpGet": {"port": server.port, "path": "/status/500"}}),
                flag("tcp", action={"tcpSocket": {"port": server.port}}),
            ],
        )
        with closed_port(ip) as closed:
            body["spec"]["probes"].append(
                flag("closed", action={"httpGet": {"port": closed, "path": "/"}})
            )
            world.sim.accounting.reset()
            code, out, _ = await check(
                world,
                tmp_path,
                CheckOptions(file=marker_file(tmp_path, body), via_api_proxy=True, output="json"),
            )
    report = orjson.loads(out)
    assert code == 1
    assert report["viaApiProxy"] is True
    got = {p["probe"]: (p["status"], p["via"], p["message"]) for p in report["pods"][0]["probes"]}
    assert got["ok"] == ("Succeeded", "the API server's pod proxy", "all good")
    assert got["bad"][:2] == ("Failed", "the API server's pod proxy")
    assert got["bad"][2].startswith("HTTP probe failed with statuscode: 500")
    assert got["closed"][0] == "Failed"
    assert "error trying to reach service: dial tcp" in got["closed"][2]
    assert got["closed"][2].endswith("connect: connection refused")
    assert got["tcp"][0] == "NotReachable"
    assert sorted(r.path for r in server.requests) == ["/ok", "/status/500"]
    assert world.sim.accounting.count(verb="get", resource="pods", subresource="proxy") == 3
    assert writes(world) == []


async def test_direct_wins_over_via_api_proxy_as_the_report_says(
    world: World, tmp_path: Path
) -> None:
    """With both options (the command line refuses them together; a caller of run_check
    may not), httpGet connects to the pod IP, as plan.route reports: nothing goes
    through pods/proxy."""
    pod = await world.create_pod("web", labels={"app": "game"})
    async with http_server(pod["status"]["podIP"]) as server:
        body = marker(
            "net", probes=[flag("ok", action={"httpGet": {"port": server.port, "path": "/ok"}})]
        )
        world.sim.accounting.reset()
        options = CheckOptions(
            file=marker_file(tmp_path, body), direct=True, via_api_proxy=True, output="json"
        )
        _, out, _ = await check(world, tmp_path, options)
    [probe] = orjson.loads(out)["pods"][0]["probes"]
    assert (probe["status"], probe["via"]) == ("Succeeded", "the pod IP")
    assert [r.path for r in server.requests] == ["/ok"]
    assert world.sim.accounting.count(verb="get", resource="pods", subresource="proxy") == 0


async def test_result_values_are_rendered_and_refused_ones_named(
    world: World, tmp_path: Path
) -> None:
    world.script.set("game-0", "app", "map", ExecReply(0, b" de_dust2| \n12 players\n"))
    world.script.set("game-1", "app", "map", ExecReply(0, b"not a label value!\n"))
    for name in ("game-0", "game-1"):
        await world.create_pod(name, labels={"app": "game"})
    body = marker(
        "maps",
        probes=[
            probe(
                "map",
                command="map",
                succeeded={
                    "labels": {"map": "{{ .Result }}", "up": "yes"},
                    "annotations": {"game.example.com/map": "on {{.Result}}"},
                },
            )
        ],
    )
    code, out, _ = await check(
        world, tmp_path, CheckOptions(file=marker_file(tmp_path, body), output="json")
    )
    assert code == 0
    pods = {p["pod"]: p for p in orjson.loads(out)["pods"]}
    good = pods[f"{NS}/game-0"]["probes"][0]
    assert good["result"] == "de_dust2"  # first line, trimmed, | removed (kruise-game's rule)
    assert good["values"]["labels"] == {"map": "de_dust2", "up": "yes"}
    assert good["values"]["annotations"] == {"game.example.com/map": "on de_dust2"}
    assert good["invalid"] == []
    bad = pods[f"{NS}/game-1"]["probes"][0]
    assert [(i["kind"], i["key"], i["value"]) for i in bad["invalid"]] == [
        ("label", "map", "not a label value!")
    ]
    assert not [op for op in pods[f"{NS}/game-1"]["patch"] if op["path"] == "/metadata/labels/map"]
    expected = {
        name: our_state(apply_json_patch(world.pod(name.split("/")[1]), pod["patch"]))
        for name, pod in pods.items()
    }
    await world.apply_marker(body)
    async with running_daemon(world.sim):
        for name in ("game-0", "game-1"):
            written = await world.wait_pod(name, lambda p: OWNED in annotations_of(p))
            assert our_state(written)[:2] == expected[f"{NS}/{name}"][:2]


async def test_a_hostile_marker_and_probe_output_reach_the_terminal_escaped(
    world: World, tmp_path: Path
) -> None:
    """What the API server lets a marker author through (a probe name with a C1 CSI and
    a bidi override, annotation values with OSC 52 and raw newlines) and what a
    container prints reach `check --marker`'s text escaped; the JSON holds them as
    they are, escaped as JSON."""
    osc52 = "\x1b]52;c;cm0gLXJmIC8=\x07"
    world.script.set(
        "game-0", "app", "idle", ExecReply(0, "idle\u200e\u061c\x1b[31m|\nforged line\n".encode())
    )
    await world.create_pod("game-0", labels={"app": "game"})
    name = "idle\x9b2J\u202e"
    body = marker(
        "hostile",
        probes=[
            probe(
                name,
                command="idle",
                condition=IDLE,
                succeeded={
                    "labels": {"idle": "true"},
                    "annotations": {"game.example.com/note": f"{osc52}\n\u2066{{{{.Result}}}}"},
                },
            )
        ],
    )
    await world.apply_marker(body)
    code, out, err = await check(world, tmp_path, CheckOptions(marker=f"{NS}/hostile"))
    assert (code, err) == (0, "")
    assert [c for c in out if c != "\n" and unicodedata.category(c)[0] == "C"] == []
    assert "  probe idle\\x9b2J\\u202e (container app, exec, via pods/exec): Succeeded" in out
    assert "    message: idle\\u200e\\u061c|\\nforged line" in out
    assert "{{.Result}}: 'idle\\u200e\\u061c'" in out
    assert (
        "would set annotation game.example.com/note="
        "\\x1b]52;c;cm0gLXJmIC8=\\x07\\n\\u2066idle\\u200e\\u061c"
    ) in out
    assert not [line for line in out.splitlines() if line.startswith("forged")]

    code, out, _ = await check(world, tmp_path, CheckOptions(marker=f"{NS}/hostile", output="json"))
    assert [c for c in out if c not in "\n" and unicodedata.category(c)[0] == "C"] == []
    [result] = orjson.loads(out)["pods"][0]["probes"]
    assert result["probe"] == name
    assert result["values"]["annotations"]["game.example.com/note"] == (
        f"{osc52}\n\u2066idle\u200e\u061c"
    )


def kubeconfig_with_namespace(world: World, tmp_path: Path, namespace: str | None) -> str:
    """The sim's kubeconfig, its context set to `namespace` (`kubectl config
    set-context --current --namespace`); None: a context without one."""
    config = yaml.safe_load(world.sim.kubeconfig_path.read_text())
    for context in config["contexts"]:
        context["context"].pop("namespace", None)
        if namespace is not None:
            context["context"]["namespace"] = namespace
    path = tmp_path / f"kubeconfig-{len(list(tmp_path.iterdir()))}"
    path.write_text(yaml.safe_dump(config))
    return str(path)


@pytest.mark.parametrize(
    ("file_namespace", "flag", "context", "expected"),
    [
        pytest.param(
            None, None, "game", ("game", "the namespace of kubeconfig context"), id="context"
        ),
        pytest.param(
            None, None, None, ("default", "the default: kubeconfig context"), id="default"
        ),
        pytest.param(None, "web", "game", ("web", "--namespace"), id="flag-over-context"),
        pytest.param("db", None, "game", ("db", "metadata.namespace in"), id="file-over-context"),
        pytest.param("db", "db", "game", ("db", "metadata.namespace in"), id="file-and-flag"),
    ],
)
async def test_a_marker_file_takes_its_namespace_as_kubectl_apply_does(
    world: World,
    tmp_path: Path,
    file_namespace: str | None,
    flag: str | None,
    context: str | None,
    expected: tuple[str, str],
) -> None:
    """metadata.namespace, else -n, else the kubeconfig context's, else default; the
    report says which and why (a file's namespace that differs from -n is an error,
    test_check_cli.py)."""
    body = idle_marker()
    if file_namespace is None:
        del body["metadata"]["namespace"]
    else:
        body["metadata"]["namespace"] = file_namespace
    path = marker_file(tmp_path, body)
    kubeconfig = kubeconfig_with_namespace(world, tmp_path, context)
    options = CheckOptions(file=path, namespace=flag, output="json")
    out = io.StringIO()
    await run_check(options, RunSettings(kubeconfig=kubeconfig), out=out, err=io.StringIO())
    report = orjson.loads(out.getvalue())
    namespace, why = expected
    assert report["marker"] == f"{namespace}/idle"
    assert report["namespace"] == namespace
    assert report["namespaceFrom"].startswith(why)
    out = io.StringIO()
    options = dataclasses.replace(options, output="text")
    await run_check(options, RunSettings(kubeconfig=kubeconfig), out=out, err=io.StringIO())
    assert f"\nNamespace {namespace}: {why}" in out.getvalue()


async def test_a_marker_file_in_the_contexts_namespace_checks_its_pods(
    world: World, tmp_path: Path
) -> None:
    """The pods checked are those of the context's namespace, as `kubectl apply -f`
    would have put the marker there."""
    await world.create_pod("game-0", labels={"app": "game"})
    body = idle_marker()
    del body["metadata"]["namespace"]
    out = io.StringIO()
    settings = RunSettings(kubeconfig=kubeconfig_with_namespace(world, tmp_path, NS))
    code = await run_check(
        CheckOptions(file=marker_file(tmp_path, body)), settings, out=out, err=io.StringIO()
    )
    assert code == 0
    assert f"pod {NS}/game-0" in out.getvalue()
    code = await run_check(
        CheckOptions(file=marker_file(tmp_path, body)),
        RunSettings(kubeconfig=kubeconfig_with_namespace(world, tmp_path, "elsewhere")),
        out=(out := io.StringIO()),
        err=io.StringIO(),
    )
    assert code == 1
    assert "No pod in namespace elsewhere is selected by 'app=game'." in out.getvalue()


async def test_a_context_namespace_that_is_not_a_name_is_a_usage_error(
    world: World, tmp_path: Path
) -> None:
    body = idle_marker()
    del body["metadata"]["namespace"]
    settings = RunSettings(kubeconfig=kubeconfig_with_namespace(world, tmp_path, "Game/x"))
    with pytest.raises(UsageError, match=r"default namespace 'Game/x' .* pass --namespace NS"):
        await run_check(
            CheckOptions(file=marker_file(tmp_path, body)),
            settings,
            out=io.StringIO(),
            err=io.StringIO(),
        )
