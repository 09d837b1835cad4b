"""bench/vs_kruise.py's, bench/vs_report.py's and bench/kruise.py's pure parts: the
changes made to Kruise's config/default, the Kruise releases the user gives (`--kruise
LABEL=SOURCE`, checked before anything is installed), what is said of the Kruise that
ran, the columns and their order, and the table, the report and the JSON with several
Kruise releases or none, with many runs or few (the bench itself needs a real node and
is not run in CI; what it counts: tests/unit/test_bench_vs_stats.py)."""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from bench.kruise import (
    CHANGES,
    DAEMON,
    GO_INFO_END,
    GO_INFO_START,
    MANAGER,
    Source,
    build_info,
    built_image,
    check_loaded,
    check_source,
    customize,
    describe,
    has_image,
    identity,
    normalize_ref,
    parse_source,
    parse_sources,
    recorded_version,
)
from bench.vs_plan import (
    CASES,
    PHASES,
    case_of,
    churn_plan,
    marker_doc,
    parse_args,
    parse_systems,
    plan,
)
from bench.vs_report import (
    ALONE,
    EXEC_ONLY,
    FEW_RUNS,
    ROWS,
    cell,
    command_line,
    document,
    report,
    table,
)
from bench.vs_stats import BASELINE, Run, Window, figures, restart_figures, rounds


def _workload(kind: str, name: str, container: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name},
            "spec": {"template": {"spec": {"containers": [container], **spec}}}}  # fmt: skip


def _config_default() -> list[dict[str, Any]]:
    env = [{"name": "KUBE_CACHE_MUTATION_DETECTOR", "value": "true"}]
    limits = {"limits": {"cpu": "100m", "memory": "200Mi"}}
    return [
        _workload("Deployment", MANAGER, {"name": "manager", "image": "controller:latest",
                  "args": ["--v=5", "--feature-gates=AllAlpha=true"], "env": env,
                  "resources": limits}),
        _workload("DaemonSet", DAEMON, {"name": "daemon", "image": "controller:latest",
                  "args": ["-v=5"], "env": env, "resources": limits},
                  volumes=[{"name": "runtime-socket", "hostPath": {"path": "/var/run"}}]),
        {"kind": "MutatingWebhookConfiguration", "metadata": {"name": "m"}, "webhooks": [
            {"name": "mpod.kb.io", "failurePolicy": "Fail", "rules": [{"resources": ["pods"]}]},
            {"name": "mcloneset.kb.io", "failurePolicy": "Fail",
             "rules": [{"resources": ["clonesets"]}]},
        ]},
        {"kind": "ValidatingWebhookConfiguration", "metadata": {"name": "v"}, "webhooks": [
            {"name": "vpodeviction.kb.io", "failurePolicy": "Fail",
             "rules": [{"resources": ["pods/eviction"]}]},
        ]},
    ]  # fmt: skip


def test_customize_applies_the_helm_charts_production_values_and_the_nodes_socket() -> None:
    docs = _config_default()
    out = customize(docs, "localhost/kruise:v1.5.4", Path("/run/pmcri.x/containerd.sock"))
    assert docs == _config_default()  # the input is kept
    manager = out[0]["spec"]["template"]["spec"]["containers"][0]
    daemon = out[1]["spec"]["template"]["spec"]["containers"][0]
    for container in (manager, daemon):
        assert container["image"] == "localhost/kruise:v1.5.4"
        assert container["imagePullPolicy"] == "Never"
        assert container["env"] == [{"name": "KUBE_CACHE_MUTATION_DETECTOR", "value": "false"}]
        assert container["resources"] == {"limits": {"memory": "200Mi"}}
        assert "--feature-gates=ImagePullJobGate=true" in container["args"]
        assert not any("AllAlpha" in arg for arg in container["args"])
    assert "--enable-leader-election" in manager["args"]
    assert "--socket-file=containerd.sock" in daemon["args"]
    assert out[1]["spec"]["template"]["spec"]["volumes"] == [
        {"name": "runtime-socket", "hostPath": {"path": "/run/pmcri.x", "type": "Directory"}}
    ]
    policies = {hook["name"]: hook["failurePolicy"] for doc in out[2:] for hook in doc["webhooks"]}
    assert policies == {"mpod.kb.io": "Ignore", "mcloneset.kb.io": "Fail",
                        "vpodeviction.kb.io": "Ignore"}  # fmt: skip
    assert len(CHANGES) == 6


def test_customize_names_what_config_default_lacks() -> None:
    with pytest.raises(SystemExit, match="renders no DaemonSet kruise-daemon"):
        customize(_config_default()[:1], "i", Path("/run/containerd.sock"))


# -- the Kruise the user brings: --kruise LABEL=SOURCE ------------------------------------

RELEASED = "docker.io/openkruise/kruise-manager:v1.5.4"


def _one_line(error: pytest.ExceptionInfo[SystemExit]) -> str:
    message = str(error.value.code)
    assert "\n" not in message
    return message


def test_parse_source_an_image_in_the_node_and_its_release_config() -> None:
    source = parse_source(f"v1.5.4=image:{RELEASED},config=/src/kruise-1.5.4/config")
    assert source == Source(
        "v1.5.4", f"image:{RELEASED},config=/src/kruise-1.5.4/config",
        Path("/src/kruise-1.5.4/config"), image=RELEASED,
    )  # fmt: skip
    assert not source.built
    assert source.image_ref() == RELEASED  # the user's image, as given


def test_parse_source_a_folder_of_the_two_programs() -> None:
    source = parse_source("v1.5.4+#2007=/k/2007")
    assert source.label == "v1.5.4+#2007"
    assert source.text == "/k/2007"
    assert source.folder == Path("/k/2007")
    assert source.config == Path("/k/2007/config")  # the folder's own config/
    assert source.built
    assert source.image_ref() == built_image("v1.5.4+#2007")
    other = parse_source("v1.9.0=/k/bin,config=/src/kruise-1.9.0/config")
    assert (other.folder, other.config) == (Path("/k/bin"), Path("/src/kruise-1.9.0/config"))


def test_parse_source_an_image_by_digest() -> None:
    ref = "openkruise/kruise-manager@sha256:" + "a" * 64
    assert parse_source(f"d=image:{ref},config=c").image == ref


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("v1.5.4", "--kruise 'v1.5.4': write LABEL=SOURCE, e.g. --kruise v1.5.4=image:"),
        ("=/k/2007", "--kruise '=/k/2007': write LABEL=SOURCE"),
        ("v 1=/k", "--kruise 'v 1': a label is 1 to 63 letters"),
        ("a|b=/k", "--kruise 'a|b': a label is"),
        ("-v1=/k", "--kruise '-v1': a label is"),
        ("v1.5.4=", "--kruise v1.5.4: no SOURCE; write v1.5.4=image:REF,config=DIR or v1.5.4=DIR"),
        (f"v1.5.4=image:{RELEASED}",
         f"--kruise v1.5.4: image:{RELEASED} needs the same release's manifests: add ,config=DIR"),
        ("v1.5.4=image:,config=/c", "--kruise v1.5.4: 'image:' names no image"),
        ("v1.5.4=image:a b,config=/c", "--kruise v1.5.4: 'image:a b' names no image"),
        ("v1.5.4=image:a,b,config=/c", "--kruise v1.5.4: 'image:a,b' names no image"),
        ("v1.5.4=/k,config=", "--kruise v1.5.4: config= names no folder"),
    ],
)  # fmt: skip
def test_parse_source_names_the_flag_the_label_and_the_fix(value: str, message: str) -> None:
    with pytest.raises(SystemExit) as error:
        parse_source(value)
    assert _one_line(error).startswith(message)


def test_kruise_is_repeatable_in_order_and_each_label_once() -> None:
    values = [f"v1.5.4=image:{RELEASED},config=/c", "v1.5.4+#2007=/k/2007"]
    assert parse_args(["--kruise", values[0], "--kruise", values[1]]).kruise == values
    assert parse_args([]).kruise == []
    assert [s.label for s in parse_sources(values)] == ["v1.5.4", "v1.5.4+#2007"]
    assert parse_sources([]) == []
    with pytest.raises(SystemExit) as error:
        parse_sources([*values, "v1.5.4=/k/other"])
    assert _one_line(error).startswith("--kruise v1.5.4: given twice; give each Kruise a label")


def _release(folder: Path, *, programs: tuple[str, ...] = ("manager", "kruise-daemon"),
             mode: int = 0o755, config: bool = True) -> Path:  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    for name in programs:
        (folder / name).write_bytes(b"\x7fELF not a program")
        (folder / name).chmod(mode)
    if config:
        (folder / "config" / "default").mkdir(parents=True)
        (folder / "config" / "default" / "kustomization.yaml").write_text("resources: []\n")
    return folder


def test_check_source_accepts_a_folder_and_an_image_with_their_config(tmp_path: Path) -> None:
    folder = _release(tmp_path / "kruise")
    check_source(parse_source(f"a={folder}"))
    check_source(parse_source(f"b=image:{RELEASED},config={folder / 'config'}"))
    bare = _release(tmp_path / "bin", config=False)  # the config/ given apart
    check_source(parse_source(f"c={bare},config={folder / 'config'}"))


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda root: root / "none", "no folder {root}/none; give a folder holding Kruise's"),
        (lambda root: _release(root / "k", programs=("manager",)),
         "{root}/k has no kruise-daemon; put Kruise's two programs there"),
        (lambda root: _release(root / "k", mode=0o644), "{root}/k/manager is not executable; chmod +x"),
        (lambda root: _release(root / "k", config=False),
         "{root}/k/config has no default/kustomization.yaml; copy the release's config/ into {root}/k"),
    ],
)  # fmt: skip
def test_check_source_fails_at_once_on_a_missing_part(
    tmp_path: Path, build: Any, message: str
) -> None:
    folder = build(tmp_path)
    with pytest.raises(SystemExit) as error:
        check_source(parse_source(f"v1.5.4={folder}"))
    assert _one_line(error).startswith("--kruise v1.5.4: " + message.format(root=tmp_path))


def test_check_source_an_image_needs_a_real_config_folder(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as error:
        check_source(parse_source(f"v1.5.4=image:{RELEASED},config={tmp_path}"))
    assert _one_line(error) == (
        f"--kruise v1.5.4: {tmp_path} has no default/kustomization.yaml; "
        "give the release's config/ folder as config=DIR"
    )


def test_the_image_built_for_a_label_is_its_own_and_a_valid_name() -> None:
    one, two = built_image("v1.5.4"), built_image("v1.5.4+#2007")
    assert one == built_image("v1.5.4")
    assert len({one, two, built_image("v1.5.4--2007")}) == 3  # + and # replaced: the hash tells
    for image in (one, two):
        repository, _, tag = image.rpartition(":")
        assert repository == "localhost/probemarker-bench-kruise"
        assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", tag)
    digest = hashlib.sha256(b"v1.5.4+#2007").hexdigest()[:8]
    assert two == f"localhost/probemarker-bench-kruise:v1.5.4--2007-{digest}"


@pytest.mark.parametrize(
    ("ref", "named"),
    [
        ("openkruise/kruise-manager:v1.5.4", RELEASED),
        (RELEASED, RELEASED),
        ("busybox", "docker.io/library/busybox:latest"),
        ("localhost/kruise:v1", "localhost/kruise:v1"),
        ("registry.example:5000/kruise", "registry.example:5000/kruise:latest"),
        ("openkruise/kruise-manager@sha256:ab", "docker.io/openkruise/kruise-manager@sha256:ab"),
    ],
)
def test_normalize_ref_as_containerd_names_images(ref: str, named: str) -> None:
    assert normalize_ref(ref) == named


def test_check_loaded_looks_in_the_nodes_image_list() -> None:
    listing = f"localhost/probemarker:0.1.0\n{RELEASED}\n"
    assert has_image(listing, "openkruise/kruise-manager:v1.5.4")
    assert not has_image(listing, "openkruise/kruise-manager:v1.9.0")
    check_loaded(parse_source("v1.5.4=image:openkruise/kruise-manager:v1.5.4,config=c"), listing)
    check_loaded(parse_source("v1.5.4=/k"), "")  # the bench builds and loads that one itself
    with pytest.raises(SystemExit) as error:
        check_loaded(
            parse_source("v1.9.0=image:openkruise/kruise-manager:v1.9.0,config=c"), listing
        )
    assert _one_line(error) == (
        "--kruise v1.9.0: the node's containerd has no image openkruise/kruise-manager:v1.9.0; "
        "load it first: podman pull openkruise/kruise-manager:v1.9.0 && "
        "hack/cluster.sh load-image openkruise/kruise-manager:v1.9.0"
    )


# -- what ran ------------------------------------------------------------------------------


def _program(record: str) -> bytes:
    """A Go program's bytes around its module record, as the Go toolchain marks it."""
    return b"\x7fELF code\x00" + GO_INFO_START + record.encode() + GO_INFO_END + b"\x00more"


RECORD = "path\tgithub.com/openkruise/kruise\nmod\tgithub.com/openkruise/kruise\t{version}\t\n"
REVISION = "c5bc8a08" + "0" * 32


@pytest.mark.parametrize(
    ("program", "build", "version"),
    [
        # a release's Dockerfile builds from copied sources: no version, no VCS
        (_program(RECORD.format(version="(devel)") + "build\t-compiler=gc\n"),
         {"module": "github.com/openkruise/kruise", "version": "(devel)"}, None),
        # built in a git checkout: the revision, and whether the tree was changed
        (_program(RECORD.format(version="(devel)") + f"build\tvcs=git\nbuild\tvcs.revision={REVISION}\n"
                  "build\tvcs.time=2025-01-01T00:00:00Z\nbuild\tvcs.modified=true\n"),
         {"module": "github.com/openkruise/kruise", "version": "(devel)", "vcs.revision": REVISION,
          "vcs.time": "2025-01-01T00:00:00Z", "vcs.modified": "true"},
         f"revision {REVISION} (modified)"),
        (_program(RECORD.format(version="v1.5.4")),
         {"module": "github.com/openkruise/kruise", "version": "v1.5.4"}, "v1.5.4"),
        (b"\x7fELF no record here", {}, None),
        (GO_INFO_START + b"mod\tx\tv1\t\n", {}, None),  # a start marker and no end
    ],
)  # fmt: skip
def test_the_version_a_go_program_records(
    program: bytes, build: dict[str, str], version: str | None
) -> None:
    assert build_info(program) == build
    assert recorded_version(build_info(program)) == version


def test_identity_and_its_line_say_which_kruise_ran() -> None:
    source = parse_source(f"v1.5.4=image:{RELEASED},config=/src/kruise-1.5.4/config")
    status = {"image": RELEASED, "imageID": "sha256:" + "b" * 64}
    ran = identity(source, status, build_info(_program(RECORD.format(version="(devel)"))))
    assert ran == {
        "label": "v1.5.4",
        "source": f"image:{RELEASED},config=/src/kruise-1.5.4/config",
        "image": RELEASED,
        "image_id": "sha256:" + "b" * 64,
        "manager_build": {"module": "github.com/openkruise/kruise", "version": "(devel)"},
        "version": None,  # the manager records none: not invented from the tag
    }
    assert describe(ran) == (
        f"Kruise v1.5.4: --kruise v1.5.4=image:{RELEASED},config=/src/kruise-1.5.4/config; "
        f"image {RELEASED} (sha256:{'b' * 64}); the manager records no version"
    )
    built = identity(parse_source("fix=/k/2007"), {}, {"vcs.revision": REVISION})
    assert built["image"] == built_image("fix")  # no pod status read: the image it was given
    assert built["image_id"] is None
    assert describe(built).endswith(f"; the manager records revision {REVISION}")


# -- the columns, the order, the output ------------------------------------------------------


def test_parse_systems_chooses_probemarkers_backends() -> None:
    assert parse_systems("probemarker-api,probemarker-cri") == [
        "probemarker-api",
        "probemarker-cri",
    ]
    assert parse_systems("probemarker-cri,probemarker-api") == [
        "probemarker-api",
        "probemarker-cri",
    ]
    assert parse_systems("") == []  # only the Kruise given
    with pytest.raises(SystemExit, match="Kruise is measured when given, by --kruise LABEL="):
        parse_systems("kruise,probemarker-api")
    with pytest.raises(SystemExit, match=r"--systems: unknown \['probemarker-x'\]"):
        parse_systems("probemarker-x")


def test_plan_the_baseline_then_each_kruise_then_probemarkers() -> None:
    sources = parse_sources(["v1.5.4=/k/1.5.4", "v1.5.4+#2007=/k/2007"])
    columns = plan(sources, ["probemarker-api", "probemarker-cri"])
    assert [(c.name, c.system, c.namespace, c.backend) for c in columns] == [
        (BASELINE, BASELINE, "vs-neither", ""),
        ("kruise v1.5.4", "kruise", "vs-kruise-1", ""),
        ("kruise v1.5.4+#2007", "kruise", "vs-kruise-2", ""),
        ("probemarker-api", "probemarker", "vs-probemarker-api", "api"),
        ("probemarker-cri", "probemarker", "vs-probemarker-cri", "cri"),
    ]
    assert [c.source for c in columns] == [None, *sources, None, None]
    for column in columns:  # a namespace is a DNS label, whatever the Kruise's label
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", column.namespace)
    assert [c.name for c in plan([], ["probemarker-api"])] == [BASELINE, "probemarker-api"]
    assert plan([], []) == []  # a baseline alone measures nothing
    # round 2 (index 1) starts at the second column
    assert [c.name for c in rounds(columns, 3)[1]] == [
        "kruise v1.5.4", "kruise v1.5.4+#2007", "probemarker-api", "probemarker-cri", BASELINE,
    ]  # fmt: skip


# a made-up run of each column: probemarker-api's API server CPU well above the others'
CPU = {BASELINE: 1.2, "probemarker-api": 2.4, "probemarker-cri": 1.4, "kruise v1.5.4": 1.5}


def _runs(columns: list[str], runs: int, cpu: dict[str, float] = CPU) -> list[Run]:
    out = []
    for round_, ordered in enumerate(rounds(columns, runs)):
        for position, column in enumerate(ordered):
            jitter = 0.01 * round_
            system = None if column == BASELINE else 0.5
            flips = Window(
                60.0,
                cpu[column] + jitter,
                10.0 + jitter,
                system,
                {"pods/status": 40} if system else {},
                {"patch": 40} if system else {},
            )
            quiet = Window(30.0, 0.5, 4.0, None if system is None else 0.1, {}, {})
            out.append(Run(column, round_, position, 40, flips, quiet,
                           label_delays=() if system is None else (0.5 + jitter, 0.7),
                           condition_delays=() if system is None else (0.5, 0.7),
                           missed_labels=None if system is None else 0,
                           missed_conditions=None if system is None else 0,
                           phases={} if system is None else {"restart_flaps": 0}))  # fmt: skip
    return out


def _row(text: str, title: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"| {title}"))


def test_without_kruise_the_output_and_the_json_say_probemarker_alone() -> None:
    args = parse_args(["--pods", "5", "--flips", "8"])
    columns = [BASELINE, "probemarker-api", "probemarker-cri"]
    doc = document(args, server="v1.32.0", ran=[], columns=columns, runs=_runs(columns, 3))
    assert ALONE == "no Kruise given: probemarker alone"
    assert doc["kruise"] == []
    assert doc["probemarker_alone"] is True
    assert doc["note"] == ALONE
    assert (doc["runs"], doc["runs_note"], doc["complete"]) == (3, None, True)
    so_far = document(args, server="v1.32.0", ran=[], columns=columns, runs=_runs(columns, 3)[:4])
    assert so_far["complete"] is False  # the JSON written after each run of a longer one
    assert so_far["order"] == [[BASELINE, "probemarker-api", "probemarker-cri"],
                               ["probemarker-api"]]  # fmt: skip
    # one run a column so far, though 3 are asked: the JSON written meanwhile ranks nothing
    assert set(so_far["verdicts"].values()) == {"-"}
    assert any(v != "-" for v in doc["verdicts"].values())
    assert list(doc["results"]) == columns
    assert doc["order"] == [
        [BASELINE, "probemarker-api", "probemarker-cri"],
        ["probemarker-api", "probemarker-cri", BASELINE],
        ["probemarker-cri", BASELINE, "probemarker-api"],
    ]
    assert doc["command"] == (
        "python bench/vs_kruise.py --case a --runs 3 --pods 5 --flips 8 --seed 32"
    )
    # every run's raw figures and its figures over its round's baseline
    assert len(doc["raw"]) == 9
    first_api = next(r for r in doc["raw"] if r["run"]["column"] == "probemarker-api")
    assert first_api["run"]["flips"]["apiserver_cpu"] == 2.4
    assert first_api["figures"]["apiserver_cpu_ms_per_transition"] == pytest.approx(30.0)
    assert doc["verdicts"]["apiserver_cpu_ms_per_transition"] == "probemarker-cri"
    assert doc["verdicts"]["restart_flaps"] == "tie: probemarker-api, probemarker-cri"
    assert json.loads(json.dumps(doc)) == doc
    text = report(doc)
    lines = text.splitlines()
    assert lines[0].startswith("Kubernetes v1.32.0, one node; probemarker ")
    assert lines[1] == ALONE
    assert lines[2] == "case a: the worst case today: period 1 s, 20 pods, flips at known moments"
    assert lines[3] == "5 pods a system, 8 flips a pod, exec probe period 1 s, thresholds 1"
    assert lines[4] == EXEC_ONLY == doc["probes_note"]  # issue 41: HTTP said not run
    assert lines[5].startswith(
        "3 runs a column, in rotated order (round r starts at column r mod 3)"
    )
    assert "| | neither | probemarker-api | probemarker-cri | lowest |" in lines
    assert not any(line.startswith("Kruise ") for line in lines)  # no Kruise said to have run
    assert "round 2: probemarker-api, probemarker-cri, neither" in lines
    assert lines[-1] == f"command: {doc['command']}"
    # each figure its median (min-max); the baseline's background as read, no verdict of its own
    assert _row(text, "API server CPU per transition over the baseline, ms") == (
        "| API server CPU per transition over the baseline, ms | - | 30 | 5 | probemarker-cri |"
    )
    assert _row(text, "API server CPU during the flips, as read") == (
        "| API server CPU during the flips, as read, mcores | 20.2 (20-20.3) | 40.2 (40-40.3) "
        "| 23.5 (23.3-23.7) |  |"
    )
    assert _row(text, "flip -> label").endswith(
        "| - | 520 / 700 / 700 / 700 (6 flips) | 520 / 700 / 700 / 700 (6 flips) |  |"
    )
    assert _row(text, "label/condition flaps").endswith(
        "| - | 0 | 0 | tie: probemarker-api, probemarker-cri |"
    )


@pytest.mark.parametrize("runs", [1, 2])
def test_fewer_than_three_runs_are_said_and_rank_nothing(runs: int) -> None:
    args = parse_args(["--runs", str(runs)])
    columns = [BASELINE, "probemarker-api", "probemarker-cri"]
    doc = document(args, server="v1.32.0", ran=[], columns=columns, runs=_runs(columns, runs))
    assert doc["runs_note"] == FEW_RUNS.format(min=3)
    assert set(doc["verdicts"].values()) == {"-"}
    lines = report(doc).splitlines()
    assert lines[6] == (
        "fewer than 3 runs a column: the ranges say little, no row is ranked (a look, "
        "not a comparison)"
    )
    assert len(doc["order"]) == runs


def test_the_table_says_tie_where_the_ranges_overlap() -> None:
    spread = {"median": 10, "min": 8, "max": 12, "runs": 3}
    summaries = {
        BASELINE: {"apiserver_cpu_mcores": {"median": 5, "min": 5, "max": 5, "runs": 3}},
        "kruise v1.5.4": {"steady_writes_per_min": {"median": 480, "min": 470, "max": 490, "runs": 3},
                          "cpu_mcores": spread},
        "probemarker-cri": {"steady_writes_per_min": {"median": 0, "min": 0, "max": 0, "runs": 3},
                            "cpu_mcores": {**spread, "median": 9, "max": 11}},
    }  # fmt: skip
    text = table(summaries, 3)
    assert text.splitlines()[0] == "| | neither | kruise v1.5.4 | probemarker-cri | lowest |"
    assert text.splitlines()[1] == "|---|---|---|---|---|"
    assert _row(text, "writes a minute, nothing flipping").endswith(
        "| - | 480 (470-490) | 0 | probemarker-cri |"
    )
    assert _row(text, "the system's CPU during the flips").endswith(
        "| - | 10 (8-12) | 9 (8-11) | tie: probemarker-cri, kruise v1.5.4 |"
    )
    assert "flips never labelled" not in text  # no column has it: another case's row


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "-"),
        ({"median": 2.5, "min": 1.25, "max": 3, "runs": 3}, "2.5 (1.25-3)"),
        ({"median": 4.0, "min": 4.0, "max": 4.0, "runs": 3}, "4"),
        ({"p50": 501.4, "p90": 900.6, "p99": 1000.0, "max": 1200.0, "flips": 1200},
         "501 / 901 / 1000 / 1200 (1200 flips)"),
        ({"pods/status": {"median": 20, "min": 20, "max": 21, "runs": 3}}, "pods/status 20 (20-21)"),
        ({}, "none"),
        (["3/3", "2/3"], "3/3 or 2/3"),
        ([{"pods": 0}], "pods 0"),
        ("3/3", "3/3"),
    ],
)  # fmt: skip
def test_cell(value: Any, text: str) -> None:
    assert cell(value) == text


def test_with_two_kruise_the_output_and_the_json_name_each(tmp_path: Path) -> None:
    folder = _release(tmp_path / "k 2007")  # a space: the command quotes it
    given = [f"v1.5.4=image:{RELEASED},config=/src/kruise-1.5.4/config", f"v1.5.4+#2007={folder}"]
    args = parse_args(["--kruise", given[0], "--kruise", given[1], "--systems", "probemarker-cri"])
    first, second = parse_sources(args.kruise)
    ran = [
        identity(first, {"image": RELEASED, "imageID": "sha256:1"}, {}),
        identity(second, {"image": built_image(second.label), "imageID": "sha256:2"},
                 {"vcs.revision": REVISION}),
    ]  # fmt: skip
    columns = [c.name for c in plan([first, second], parse_systems(args.systems))]
    assert columns == [BASELINE, "kruise v1.5.4", "kruise v1.5.4+#2007", "probemarker-cri"]
    cpu = {**CPU, "kruise v1.5.4+#2007": 1.5}
    doc = document(args, server="v1.32.0", ran=ran, columns=columns, runs=_runs(columns, 3, cpu))
    assert doc["probemarker_alone"] is False
    assert doc["note"] is None
    assert [(k["label"], k["source"], k["version"]) for k in doc["kruise"]] == [
        ("v1.5.4", given[0].partition("=")[2], None),
        ("v1.5.4+#2007", str(folder), f"revision {REVISION}"),
    ]
    assert list(doc["results"]) == columns
    assert json.loads(json.dumps(doc)) == doc
    text = report(doc)
    assert ALONE not in text
    lines = text.splitlines()
    assert lines[1] == describe(ran[0])
    assert lines[2] == describe(ran[1])
    assert "each system installed alone for its runs" in lines[3]
    assert "| | neither | kruise v1.5.4 | kruise v1.5.4+#2007 | probemarker-cri | lowest |" in lines
    # the command measures the same again, each --kruise as given
    again = parse_args(_argv(doc["command"]))
    assert again.kruise == given
    assert again.systems == "probemarker-cri"
    assert again.runs == 3


def _argv(command: str) -> list[str]:
    words = shlex.split(command)
    assert words[:2] == ["python", "bench/vs_kruise.py"]
    return words[2:]


def test_command_line_keeps_the_default_systems_out() -> None:
    args = argparse.Namespace(case="a", runs=5, pods=20, flips=20, seed=32,
                              systems="probemarker-api,probemarker-cri", kruise=["v1.5.4=/k"])  # fmt: skip
    assert command_line(args) == (
        "python bench/vs_kruise.py --case a --runs 5 --pods 20 --flips 20 --seed 32 "
        "--kruise v1.5.4=/k"
    )
    args.case = "b"  # no flips in case b: no --flips, no --seed
    assert command_line(args) == (
        "python bench/vs_kruise.py --case b --runs 5 --pods 20 --kruise v1.5.4=/k"
    )


@pytest.mark.parametrize(
    "argv", [["--runs", "0"], ["--pods", "0"], ["--pods", "1001"], ["--flips", "0"]]
)
def test_parse_args_refuses_nothing_to_measure(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(argv)


# -- the cases -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "pods", "period", "baseline", "hourly"),
    [("a", 20, 1, True, False), ("b", 100, 10, True, True), ("c", 0, 1, True, False),
     ("d", 100, 10, False, False), ("bd", 100, 10, True, True)],
)  # fmt: skip
def test_the_cases_parameters(
    case: str, pods: int, period: int, baseline: bool, hourly: bool
) -> None:
    args = parse_args(["--case", case])
    assert args.pods == pods  # the case's, unless --pods
    found = CASES[case]
    assert (found.period, found.baseline, found.hourly) == (period, baseline, hourly)
    assert parse_args(["--case", case, "--pods", "7"]).pods == 7
    assert list(found.phases) == [p for p in PHASES if p in found.phases]  # in order
    assert parse_args([]).case == "a"


def test_case_b_is_ten_minutes_at_rest_and_c_a_hundred_pods_churned() -> None:
    assert CASES["b"].quiet_seconds == 600
    assert CASES["c"].churn_pods == 100
    assert "restart" in CASES["d"].phases
    assert "flips" not in CASES["d"].phases


def test_case_bd_is_b_then_d_on_one_node() -> None:
    both, b, d = CASES["bd"], CASES["b"], CASES["d"]
    assert (both.pods, both.period, both.quiet_seconds) == (b.pods, b.period, b.quiet_seconds)
    assert (both.pods, both.period) == (d.pods, d.period)
    assert both.phases == ("start", "quiet", "restart")  # at rest first, then the restart


@pytest.mark.parametrize(
    ("argv", "seconds"),
    [(["--case", "b"], 600.0), (["--case", "b", "--quiet-seconds", "240"], 240.0),
     (["--case", "bd", "--quiet-seconds", "30"], 30.0), (["--case", "a"], 30.0),
     (["--case", "a", "--quiet-seconds", "3600"], 3600.0)],
)  # fmt: skip
def test_quiet_seconds_sets_the_window_at_rest(argv: list[str], seconds: float) -> None:
    args = parse_args(argv)
    assert case_of(args).quiet_seconds == seconds
    assert CASES[args.case].quiet_seconds in (30, 600)  # the case itself is left as it is


@pytest.mark.parametrize(
    ("argv", "says"),
    [(["--case", "d", "--quiet-seconds", "60"], "case d has no window at rest"),
     (["--case", "c", "--quiet-seconds", "60"], "case c has no window at rest"),
     (["--case", "b", "--quiet-seconds", "29"], "--quiet-seconds 29: give 30..3600 s"),
     (["--case", "b", "--quiet-seconds", "3601"], "--quiet-seconds 3601: give 30..3600 s")],
)  # fmt: skip
def test_quiet_seconds_refused_where_it_means_nothing(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse_args(argv)
    assert says in capsys.readouterr().err


def test_a_shortened_window_at_rest_is_in_the_command_and_the_report() -> None:
    args = parse_args(["--case", "bd", "--quiet-seconds", "240", "--kruise", "v1.5.4=/k"])
    columns = [BASELINE, "probemarker-cri"]
    quiet = {BASELINE: Window(240, 4.0, 12.0, None, {}, {}),
             "probemarker-cri": Window(240, 6.0, 20.0, 2.0, {}, {})}  # fmt: skip
    runs = [
        Run(column, round_, position, 0, None, quiet[column],
            phases={} if column == BASELINE else {"restart_writes": 0, "restart_flaps": 0})
        for round_, ordered in enumerate(rounds(columns, 3))
        for position, column in enumerate(ordered)
    ]  # fmt: skip
    doc = document(args, server="v1.32.0", ran=[], columns=columns, runs=runs)
    assert doc["command"] == (
        "python bench/vs_kruise.py --case bd --runs 3 --pods 100 --quiet-seconds 240 "
        "--kruise v1.5.4=/k"
    )
    assert (doc["quiet_seconds"], doc["quiet_seconds_case"]) == (240, 600)
    text = report(doc)
    assert "at rest: 240 s a run, not the case's 600 s (--quiet-seconds)" in text
    assert _row(text, "writes (pods, NodePodProbes) from its node agent's restart").endswith(
        "| - | 0 | - |"
    )
    same = report(document(parse_args(["--case", "bd"]), server="v1.32.0", ran=[],
                           columns=columns, runs=runs))  # fmt: skip
    assert "--quiet-seconds" not in same


def test_a_case_without_a_cpu_window_has_no_baseline_column() -> None:
    assert [c.name for c in plan([], ["probemarker-api"], baseline=False)] == ["probemarker-api"]


@pytest.mark.parametrize(
    ("pods", "interval", "lifetime", "steps"),
    [
        (0, 3.0, 30.0, []),
        (1, 3.0, 30.0, [(0.0, "create", "c000"), (30.0, "delete", "c000")]),
        (3, 5.0, 10.0, [(0.0, "create", "c000"), (5.0, "create", "c001"),
                        (10.0, "delete", "c000"), (10.0, "create", "c002"),
                        (15.0, "delete", "c001"), (20.0, "delete", "c002")]),
    ],
)  # fmt: skip
def test_churn_plan_creates_at_a_steady_rate_and_deletes_after_the_lifetime(
    pods: int, interval: float, lifetime: float, steps: list[tuple[float, str, str]]
) -> None:
    assert churn_plan(pods, interval, lifetime) == steps


def test_churn_plan_of_case_c_keeps_about_ten_pods_alive() -> None:
    case = CASES["c"]
    steps = churn_plan(case.churn_pods, case.churn_interval, case.churn_lifetime)
    alive, most = 0, 0
    for _, action, _ in steps:
        alive += 1 if action == "create" else -1
        most = max(most, alive)
    assert (len(steps), alive, most) == (200, 0, 10)


@pytest.mark.parametrize("period", [1, 10])
def test_marker_doc_the_same_spec_in_either_group(period: int) -> None:
    docs = {
        system: marker_doc(system, "vs", "ns", selector={"app": "vs"}, command=["true"],
                           key="k", condition_type="k", period=period)
        for system in ("kruise", "probemarker")
    }  # fmt: skip
    assert docs["kruise"]["apiVersion"] == "apps.kruise.io/v1alpha1"
    assert docs["probemarker"]["apiVersion"] == "probemarker.io/v1alpha1"
    assert docs["kruise"]["spec"] == docs["probemarker"]["spec"]
    probe = docs["kruise"]["spec"]["probes"][0]
    assert probe["probe"]["periodSeconds"] == period
    assert probe["podConditionType"] == "k"


def test_case_c_report_names_the_case_and_shows_its_rows_only() -> None:
    args = parse_args(["--case", "c"])
    columns = [BASELINE, "probemarker-cri"]
    churn = {BASELINE: Window(360, 18.0, 54.0, None, {}, {}),
             "probemarker-cri": Window(360, 20.0, 60.0, 3.6, {"pods/status": 100, "events": 100}, {})}  # fmt: skip
    runs = [
        Run(column, round_, position, 0, None, None, churn=churn[column], lifecycles=100,
            phases={} if column == BASELINE else {"start_writes": 0})
        for round_, ordered in enumerate(rounds(columns, 3))
        for position, column in enumerate(ordered)
    ]  # fmt: skip
    doc = document(args, server="v1.32.0", ran=[], columns=columns, runs=runs)
    assert doc["case"] == "c"
    text = report(doc)
    lines = text.splitlines()
    assert lines[2].startswith("case c: pod churn: a pod created every 3 s")
    assert lines[3] == "no pods but the churn's, exec probe period 1 s, thresholds 1"
    assert _row(text, "writes per pod lifecycle").endswith("| - | 1 | - |")  # one system: no rank
    assert _row(text, "API server CPU per pod lifecycle over the baseline, ms").endswith(
        "| - | 20 | - |"
    )
    assert "flip -> label" not in text
    assert doc["command"] == "python bench/vs_kruise.py --case c --runs 3 --pods 0"


def test_case_d_has_no_baseline_and_says_so() -> None:
    args = parse_args(["--case", "d", "--kruise", "v1.5.4=/k"])
    columns = ["kruise v1.5.4", "probemarker-cri"]
    runs = [
        Run(column, round_, position, 0, None, None,
            phases={"restart_writes": 28 if column.startswith("kruise") else 0, "restart_flaps": 0})
        for round_, ordered in enumerate(rounds(columns, 3))
        for position, column in enumerate(ordered)
    ]  # fmt: skip
    doc = document(args, server="v1.32.0", ran=[], columns=columns, runs=runs)
    text = report(doc)
    assert "no baseline run (no CPU window in this case)" in text
    assert "`neither`" not in text.splitlines()[4]
    assert _row(text, "writes (pods, NodePodProbes) from its node agent's restart").endswith(
        "| 28 | 0 | probemarker-cri |"
    )


@pytest.mark.parametrize("hourly", [False, True])
def test_every_figure_a_run_gives_has_a_row(hourly: bool) -> None:
    window = Window(60.0, 1.0, 2.0, 0.5, {"pods/status": 1}, {"patch": 1})
    background = Window(60.0, 1.0, 2.0, None, {}, {})
    run = Run("probemarker-api", 0, 0, 10, window, window, label_delays=(0.5,),
              missed_labels=0, missed_conditions=0, churn=window, lifecycles=3,
              phases=restart_figures({"pods/status": 1}))  # fmt: skip
    base = Run(BASELINE, 0, 1, 10, background, background, churn=background, lifecycles=3)
    given = set(figures(run, base, hourly=hourly)) | set(figures(base, base, hourly=hourly))
    assert given - {key for key, _, _ in ROWS} == set()
