"""bench/vs_kruise.py's and bench/kruise.py's pure parts: the audit log's counts, the
statistics, the delays and flaps read from a pod watch, the changes made to Kruise's
config/default, the Kruise releases the user gives (`--kruise LABEL=SOURCE`, checked
before anything is installed), what is said of the Kruise that ran, and the table and
JSON with several Kruise releases or none (the bench itself needs a real node and is
not run in CI)."""

from __future__ import annotations

import argparse
import hashlib
import itertools
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
from bench.vs_kruise import (
    ALONE,
    answer_after,
    command_line,
    condition_expected,
    count_requests,
    delays,
    document,
    flaps,
    label_value,
    measure_order,
    parse_args,
    parse_systems,
    percentile,
    plan,
    report,
    schedule,
    sequences,
    summary_ms,
    table,
    uptime_cs,
    working_set_mib,
)
from tests.cluster.kube import AuditLog

MANAGER_USER = "system:serviceaccount:kruise-system:kruise-manager"
DAEMON_USER = "system:serviceaccount:kruise-system:kruise-daemon"
OURS = "system:serviceaccount:probemarker-system:probemarker"


def _event(audit_id: str, user: str, verb: str, resource: str, *, sub: str | None = None,
           namespace: str | None = "ns", stage: str = "ResponseComplete") -> dict[str, Any]:  # fmt: skip
    ref: dict[str, Any] = {"resource": resource}
    if sub:
        ref["subresource"] = sub
    if namespace:
        ref["namespace"] = namespace
    return {"auditID": audit_id, "stage": stage, "verb": verb, "user": {"username": user},
            "objectRef": ref}  # fmt: skip


def test_count_requests_counts_each_request_once_and_writes_by_resource() -> None:
    events = [
        # a watch logs two stages under one auditID: one request
        _event("w1", MANAGER_USER, "watch", "pods", stage="ResponseStarted"),
        _event("w1", MANAGER_USER, "watch", "pods"),
        _event("a", MANAGER_USER, "update", "pods", sub="status"),
        _event("b", DAEMON_USER, "update", "nodepodprobes", sub="status", namespace=None),
        _event("c", DAEMON_USER, "patch", "events"),
        _event("d", MANAGER_USER, "update", "leases", namespace="kruise-system"),
        _event("e", OURS, "patch", "pods", sub="status"),  # another system: not counted
    ]
    found = count_requests(events, (MANAGER_USER, DAEMON_USER))
    assert found.by_verb == {"watch": 1, "update": 3, "patch": 1}
    assert found.writes == {"pods/status": 1, "nodepodprobes/status": 1, "events": 1, "leases": 1}
    assert found.object_writes() == 2  # pods and NodePodProbes
    assert found.pod_writes() == 1
    assert found.event_writes() == 1
    assert found.all_writes() == 4


def test_count_requests_exec_is_a_request_not_a_write() -> None:
    # pods/exec over a WebSocket is a GET; over SPDY a POST (verb create): neither stores
    events = [
        _event("x1", OURS, "get", "pods", sub="exec"),
        _event("x2", OURS, "create", "pods", sub="exec"),
        _event("x3", OURS, "create", "pods", sub="portforward"),
    ]
    found = count_requests(events, (OURS,))
    assert found.by_verb == {"get": 1, "create": 2}
    assert found.writes == {}


def test_count_requests_keeps_the_bench_namespace_and_cluster_scoped_writes() -> None:
    events = [
        _event("1", DAEMON_USER, "update", "nodepodprobes", sub="status", namespace=None),
        _event("2", MANAGER_USER, "update", "pods", sub="status", namespace="vs-kruise"),
        _event("3", MANAGER_USER, "update", "leases", namespace="kruise-system"),
    ]
    found = count_requests(events, (MANAGER_USER, DAEMON_USER), namespaces=["vs-kruise"])
    assert found.writes == {"nodepodprobes/status": 1, "pods/status": 1}
    assert found.by_verb == {"update": 3}  # every request counts by verb


def test_audit_log_events_between_two_marks(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    assert list(log.events(log.mark())) == []  # no log yet
    log.path.write_text(json.dumps({"auditID": "before"}) + "\n")
    start = log.mark()
    with log.path.open("a") as handle:
        handle.write(json.dumps({"auditID": "in"}) + "\n")
    end = log.mark()
    with log.path.open("a") as handle:
        handle.write(json.dumps({"auditID": "after"}) + "\n")
    assert [e["auditID"] for e in log.events(start, until=end)] == ["in"]
    assert [e["auditID"] for e in log.events(start)] == ["in", "after"]


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([5.0], 90, 5.0),
        ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0], 90, 9.0),
        ([10.0, 1.0, 2.0], 50, 2.0),
        ([1.0, 2.0], 100, 2.0),
        ([1.0, 2.0], 1, 1.0),
    ],
)
def test_percentile_is_nearest_rank(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == expected


def test_summary_ms() -> None:
    assert summary_ms([]) is None
    assert summary_ms([0.1, 0.3, 0.2]) == {"median": 200.0, "p90": 300.0, "max": 300.0}


def test_schedule_is_seeded_spaced_and_the_same_for_every_system() -> None:
    first, again = schedule(20, 32), schedule(20, 32)
    assert first == again
    assert schedule(20, 33) != first
    for times in first[:50]:
        assert len(times) == 20
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert all(400 <= gap <= 800 for gap in gaps)
        assert 400 <= times[0] <= 1100
    # centiseconds: phases other than whole seconds occur
    assert {t % 100 for times in first for t in times} == set(range(100))


def test_uptime_in_centiseconds_as_the_pods_script_reads_it() -> None:
    assert uptime_cs("350735.47 1386913.33\n") == 35073547
    assert uptime_cs("12.05 3.00") == 1205


def _pod(name: str, label: str | None) -> dict[str, Any]:
    labels = {} if label is None else {"vs.bench/answer": label}
    return {"metadata": {"name": name, "labels": labels}, "status": {}}


def test_delays_take_the_first_new_value_after_each_flip_and_before_the_next() -> None:
    seen = [
        (9.0, _pod("a", "yes")),
        (10.4, _pod("b", "no")),  # another pod
        (10.6, _pod("a", "no")),  # flip 0 at 10.0: 0.6 s
        (20.0, _pod("a", "no")),  # a relist: the same value again
        (30.9, _pod("a", "no")),  # flip 2 at 30: the value it brings
    ]
    found, missed = delays(seen, "a", [10.0, 15.0, 30.0], label_value, answer_after)
    # flip 1 (to "yes" at 15) was never seen before flip 2: missed, not matched late
    assert found == pytest.approx([0.6, 0.9])
    assert missed == 1
    assert [answer_after(i) for i in range(3)] == ["no", "yes", "no"]
    assert [condition_expected(i) for i in range(2)] == ["False", "True"]


def test_sequences_and_flaps_count_changes_after_a_moment() -> None:
    seen = [
        (1.0, _pod("a", "yes")),
        (2.0, _pod("a", "yes")),
        (3.0, _pod("a", None)),  # the label gone for a moment
        (4.0, _pod("a", "yes")),
        (5.0, _pod("b", "no")),
    ]
    assert sequences(seen, 1.5, label_value) == {"a": ["yes", None, "yes"], "b": ["no"]}
    assert flaps(seen, 1.5, label_value) == 2
    assert flaps(seen, 3.5, label_value) == 0


def test_the_cgroup_working_set() -> None:
    memory_stat = "cache 100\ntotal_inactive_file 1048576\ntotal_active_file 5\n"
    assert working_set_mib(3 * 2**20, memory_stat) == pytest.approx(2.0)
    assert working_set_mib(2**20, "total_inactive_file 4194304\n") == 0.0


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


ROW = {"latency_ms": {"median": 600.0, "p90": 900.4, "max": 1000.0}, "restart_flaps": 0,
       "left_after_delete": {"labels": 0, "conditions": 0, "pods": 20}}  # fmt: skip


def test_table_prints_every_system_given_in_its_order() -> None:
    text = table({"kruise v1.5.4": ROW, "probemarker-api": ROW})
    assert text.splitlines()[0] == "| | kruise v1.5.4 | probemarker-api |"
    assert text.splitlines()[1] == "|---|---|---|"
    assert "| 600 / 900 / 1000 | 600 / 900 / 1000 |" in text
    assert "0 labels, 0 conditions of 20 pods" in text


def test_table_has_a_column_for_each_kruise_beside_both_backends() -> None:
    fixed = {**ROW, "restart_flaps": 3}
    text = table({"kruise v1.5.4": ROW, "kruise v1.5.4+#2007": fixed,
                  "probemarker-api": ROW, "probemarker-cri": ROW})  # fmt: skip
    lines = text.splitlines()
    assert (
        lines[0] == "| | kruise v1.5.4 | kruise v1.5.4+#2007 | probemarker-api | probemarker-cri |"
    )
    assert lines[1] == "|---|" + "---|" * 4
    flaps_row = next(line for line in lines if line.startswith("| label/condition flaps"))
    assert flaps_row.endswith("| 0 | 3 | 0 | 0 |")
    missed = next(line for line in lines if line.startswith("| flips never seen"))
    assert missed.endswith("| - | - | - | - |")  # a figure not measured: a dash, not a zero


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


def test_plan_a_column_for_each_kruise_then_probemarkers_and_the_order_measured() -> None:
    sources = parse_sources(["v1.5.4=/k/1.5.4", "v1.5.4+#2007=/k/2007"])
    columns = plan(sources, ["probemarker-api", "probemarker-cri"])
    assert [(c.name, c.system, c.namespace, c.backend) for c in columns] == [
        ("kruise v1.5.4", "kruise", "vs-kruise-1", ""),
        ("kruise v1.5.4+#2007", "kruise", "vs-kruise-2", ""),
        ("probemarker-api", "probemarker", "vs-probemarker-api", "api"),
        ("probemarker-cri", "probemarker", "vs-probemarker-cri", "cri"),
    ]
    assert [c.source for c in columns] == [*sources, None, None]
    for column in columns:  # a namespace is a DNS label, whatever the Kruise's label
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", column.namespace)
    # probemarker first, with no Kruise installed; then each Kruise in turn, as given
    assert [c.name for c in measure_order(columns)] == [
        "probemarker-api", "probemarker-cri", "kruise v1.5.4", "kruise v1.5.4+#2007",
    ]  # fmt: skip
    assert [c.name for c in plan([], ["probemarker-api"])] == ["probemarker-api"]


def test_without_kruise_the_output_and_the_json_say_probemarker_alone() -> None:
    args = parse_args(["--pods", "5", "--flips", "3"])
    doc = document(args, server="v1.32.0", ran=[],
                   results={"probemarker-api": ROW, "probemarker-cri": ROW})  # fmt: skip
    assert ALONE == "no Kruise given: probemarker alone"
    assert doc["kruise"] == []
    assert doc["probemarker_alone"] is True
    assert doc["note"] == ALONE
    assert list(doc["results"]) == ["probemarker-api", "probemarker-cri"]
    assert doc["command"] == "python bench/vs_kruise.py --pods 5 --flips 3 --seed 32"
    assert json.loads(json.dumps(doc)) == doc
    lines = report(doc).splitlines()
    assert lines[0].startswith("Kubernetes v1.32.0, one node; probemarker ")
    assert lines[1] == ALONE
    assert lines[2] == "5 pods a system, 3 flips a pod, exec probe period 1 s, thresholds 1"
    assert "| | probemarker-api | probemarker-cri |" in lines
    assert not any(line.startswith("Kruise ") for line in lines)  # no Kruise said to have run
    assert lines[-1] == f"command: {doc['command']}"


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
    results = {"kruise v1.5.4": ROW, "kruise v1.5.4+#2007": ROW, "probemarker-cri": ROW}
    doc = document(args, server="v1.32.0", ran=ran, results=results)
    assert doc["probemarker_alone"] is False
    assert doc["note"] is None
    assert [(k["label"], k["source"], k["version"]) for k in doc["kruise"]] == [
        ("v1.5.4", given[0].partition("=")[2], None),
        ("v1.5.4+#2007", str(folder), f"revision {REVISION}"),
    ]
    assert list(doc["results"]) == list(results)
    assert json.loads(json.dumps(doc)) == doc
    text = report(doc)
    assert ALONE not in text
    lines = text.splitlines()
    assert lines[1] == describe(ran[0])
    assert lines[2] == describe(ran[1])
    assert "installed, measured and removed in turn" in lines[3]
    assert "| | kruise v1.5.4 | kruise v1.5.4+#2007 | probemarker-cri |" in lines
    # the command measures the same again, each --kruise as given
    again = parse_args(_argv(doc["command"]))
    assert again.kruise == given
    assert again.systems == "probemarker-cri"


def _argv(command: str) -> list[str]:
    words = shlex.split(command)
    assert words[:2] == ["python", "bench/vs_kruise.py"]
    return words[2:]


def test_command_line_keeps_the_default_systems_out() -> None:
    args = argparse.Namespace(pods=20, flips=20, seed=32, systems="probemarker-api,probemarker-cri",
                              kruise=["v1.5.4=/k"])  # fmt: skip
    assert command_line(args) == (
        "python bench/vs_kruise.py --pods 20 --flips 20 --seed 32 --kruise v1.5.4=/k"
    )
