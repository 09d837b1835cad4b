"""manifests/components/readiness-gates*: the MutatingAdmissionPolicy that adds readiness
gates at pod creation for the markers that opt in (docs/probes.md, "Readiness gates").

- The three components are one source: hack/readiness_gates.py writes the v1beta1 and
  v1alpha1 folders from readiness-gates/ (v1), and they are what it writes.
- Each is checked against the Go types of its API version in k8s.io/api, at the first
  Kubernetes release serving it (tests/manifests/admission_types.py extracted them into
  tests/manifests/data/admissionregistration-types.json, naming the commit): every
  field the manifests set exists there, and every enum value is one it defines. No API
  server of 1.34 or 1.36 runs here; the cluster suite applies the v1alpha1 one to a
  real 1.32 (tests/cluster/test_readiness_gates.py).
- The policy's expressions, exactly as they ship, evaluated as the API server does
  (tests/mutating_policy.py) give a pod the gates of exactly the probes the daemon's
  own matching (`match.match_pod`) runs on it, for every selector operator and every
  kind of container; idempotent; a namespace without opted-in markers is untouched.
"""

from __future__ import annotations

import copy
import itertools
import json
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from probemarker.api import rules
from probemarker.api.parse import InvalidMarker, parse_marker
from probemarker.match.match import match_pod
from probemarker.watch.pods import pod_view
from tests.hackscripts import load_hack
from tests.manifests.test_manifests import KUBECTL, MANIFESTS, documents
from tests.mutating_policy import MutatingPolicy, load

COMPONENTS = MANIFESTS / "components"
SOURCE = COMPONENTS / "readiness-gates"
FOLDERS = {
    "v1": SOURCE,
    "v1beta1": COMPONENTS / "readiness-gates-v1beta1",
    "v1alpha1": COMPONENTS / "readiness-gates-v1alpha1",
}
TYPES = json.loads(
    (Path(__file__).parent / "data" / "admissionregistration-types.json").read_text()
)
OPT_IN = "probemarker.io/inject-readiness-gates"
NS = "shop"


def _script() -> ModuleType:
    return load_hack("readiness_gates.py")


# -- one source, three components -------------------------------------------------------


def test_the_generated_components_are_what_the_script_writes_from_the_source() -> None:
    rendered = _script().render()
    assert set(rendered) == {
        folder / name
        for version, folder in FOLDERS.items()
        if version != "v1"
        for name in (
            "kustomization.yaml",
            "mutatingadmissionpolicy.yaml",
            "mutatingadmissionpolicybinding.yaml",
        )
    }
    for path, text in rendered.items():
        assert path.read_text() == text, f"{path}: run python3 hack/readiness_gates.py"


def test_the_script_check_names_a_stale_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script()
    monkeypatch.setattr(script, "COMPONENTS", tmp_path)
    assert script.main(["--check"]) == 1  # nothing written there yet
    err = capsys.readouterr().err
    assert f"{tmp_path}/readiness-gates-v1alpha1/mutatingadmissionpolicy.yaml is not what" in err
    assert script.main([]) == 0
    (tmp_path / "readiness-gates-v1beta1" / "kustomization.yaml").write_text("# edited\n")
    assert script.main(["--check"]) == 1
    assert capsys.readouterr().err.count("is not what") == 1
    done = subprocess.run(
        ["python3", str(MANIFESTS.parent / "hack" / "readiness_gates.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")


@pytest.mark.parametrize("version", sorted(FOLDERS))
def test_the_policies_differ_only_in_api_version(version: str) -> None:
    for name in ("mutatingadmissionpolicy.yaml", "mutatingadmissionpolicybinding.yaml"):
        (ours,) = documents(FOLDERS[version] / name)
        (source,) = documents(SOURCE / name)
        assert ours["apiVersion"] == f"admissionregistration.k8s.io/{version}"
        assert {**ours, "apiVersion": ""} == {**source, "apiVersion": ""}


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
@pytest.mark.parametrize("version", sorted(FOLDERS))
def test_an_overlay_with_the_component_renders(version: str, tmp_path: Path) -> None:
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    rel = Path("..") / Path(*[".."] * len(overlay.parts[1:])) / FOLDERS[version].relative_to("/")
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "components": [str(rel)],
            }
        )
    )
    done = subprocess.run(
        [str(KUBECTL), "kustomize", str(overlay)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    kinds = sorted((d["apiVersion"], d["kind"]) for d in yaml.safe_load_all(done.stdout))
    api = f"admissionregistration.k8s.io/{version}"
    assert kinds == [(api, "MutatingAdmissionPolicy"), (api, "MutatingAdmissionPolicyBinding")]


# -- against the Kubernetes API types ---------------------------------------------------

_LEAF = {"string", "bool", "int32", "int64"}
_KNOWN_OUTSIDE = {
    # metav1 types the manifests use, with the fields they set
    "metav1.ObjectMeta": {"name", "labels"},
    "metav1.LabelSelector": {"matchLabels", "matchExpressions"},
}


def _fields(structs: dict[str, Any], name: str) -> dict[str, str]:
    """JSON field -> Go type of struct `name`, inline members merged in."""
    out: dict[str, str] = {}
    for key, field in structs[name].items():
        if field["inline"]:
            inner = field["type"].removeprefix("*")
            if inner in structs:
                out.update(_fields(structs, inner))
            elif inner == "metav1.TypeMeta":
                out.update({"apiVersion": "string", "kind": "string"})
            continue
        out[key] = field["type"]
    return out


def _check(value: Any, go_type: str, tables: dict[str, Any], where: str) -> list[str]:
    structs, enums = tables["structs"], tables["enums"]
    bare = go_type.removeprefix("*")
    if bare.startswith("[]"):
        if not isinstance(value, list):
            return [f"{where}: a list ({go_type}) expected"]
        return [
            p for i, v in enumerate(value) for p in _check(v, bare[2:], tables, f"{where}[{i}]")
        ]
    if bare in _KNOWN_OUTSIDE:
        extra = set(value) - _KNOWN_OUTSIDE[bare] if isinstance(value, dict) else {"?"}
        return [f"{where}: {bare} fields not expected here: {sorted(extra)}"] if extra else []
    if bare in structs:
        if not isinstance(value, dict):
            return [f"{where}: an object ({bare}) expected"]
        fields = _fields(structs, bare)
        problems = [f"{where}.{k}: no such field in {bare}" for k in value if k not in fields]
        for key, item in value.items():
            if key in fields:
                problems += _check(item, fields[key], tables, f"{where}.{key}")
        return problems
    if bare in enums:
        return [] if value in enums[bare] else [f"{where}: {value!r} not one of {enums[bare]}"]
    if bare in _LEAF or bare in {"FailurePolicyType"}:
        return [] if isinstance(value, str | bool | int) else [f"{where}: a {bare} expected"]
    return [f"{where}: type {go_type} not known to this check"]


@pytest.mark.parametrize("version", sorted(FOLDERS))
def test_the_component_has_only_fields_and_values_of_its_api_version(version: str) -> None:
    tables = TYPES[version]
    assert tables["source"].startswith("github.com/kubernetes/api v0.")  # names the commit
    problems = []
    for name, kind in (
        ("mutatingadmissionpolicy.yaml", "MutatingAdmissionPolicy"),
        ("mutatingadmissionpolicybinding.yaml", "MutatingAdmissionPolicyBinding"),
    ):
        (doc,) = documents(FOLDERS[version] / name)
        assert doc["kind"] == kind
        assert kind in tables["structs"], f"{tables['source']} has no {kind}"
        problems += _check(doc, kind, tables, f"{version}/{name}")
    assert problems == [], f"against {tables['source']}"


# What each component is checked against: k8s.io/api (github.com/kubernetes/api) at the
# tag of the first Kubernetes release serving the MutatingAdmissionPolicy kinds in it.
CHECKED_AGAINST = {
    "v1alpha1": "github.com/kubernetes/api v0.32.0 (e622342ab4abd51157f8fd650186575bab46777c) "
    "admissionregistration/v1alpha1/types.go",
    "v1beta1": "github.com/kubernetes/api v0.34.0 (ae6c3b911ef17a4e2b10922c745c6f35bcf9b78e) "
    "admissionregistration/v1beta1/types.go",
    "v1": "github.com/kubernetes/api v0.36.0 (545bb975fe6653239af42324065cf72272186404) "
    "admissionregistration/v1/types.go",
}


def test_the_types_tables_cover_the_three_releases() -> None:
    assert {v: t["source"] for v, t in TYPES.items()} == CHECKED_AGAINST
    assert {v: t["kubernetes"] for v, t in TYPES.items()} == {
        "v1alpha1": "1.32",
        "v1beta1": "1.34",
        "v1": "1.36",
    }
    for tables in TYPES.values():
        assert tables["enums"]["PatchType"] == ["ApplyConfiguration", "JSONPatch"]
        assert set(tables["enums"]["ReinvocationPolicyType"]) == {"Never", "IfNeeded"}


def test_the_check_refuses_a_field_the_api_does_not_have() -> None:
    """The check above can fail: a made-up field and a made-up enum value are named."""
    (doc,) = documents(SOURCE / "mutatingadmissionpolicy.yaml")
    bad = copy.deepcopy(doc)
    bad["spec"]["mutationz"] = []
    bad["spec"]["reinvocationPolicy"] = "Sometimes"
    problems = _check(bad, "MutatingAdmissionPolicy", TYPES["v1alpha1"], "x")
    assert "x.spec.mutationz: no such field in MutatingAdmissionPolicySpec" in problems
    assert any("'Sometimes' not one of" in p for p in problems)


# -- what the policy does, against the daemon's matching -------------------------------


@pytest.fixture(scope="module")
def policy() -> MutatingPolicy:
    return load(
        SOURCE / "mutatingadmissionpolicy.yaml", SOURCE / "mutatingadmissionpolicybinding.yaml"
    )


def pod(
    labels: dict[str, str] | None = None,
    *,
    containers: tuple[str, ...] = ("main",),
    sidecars: tuple[str, ...] = (),
    init: tuple[str, ...] = (),
    gates: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": c, "image": "x"} for c in containers]}
    inits = [{"name": c, "image": "x"} for c in init]
    inits += [{"name": c, "image": "x", "restartPolicy": "Always"} for c in sidecars]
    if inits:
        spec["initContainers"] = inits
    if gates is not None:
        spec["readinessGates"] = [{"conditionType": g} for g in gates]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": NS, "uid": "u1", "labels": labels or {}},
        "spec": spec,
    }


def marker(
    name: str,
    probes: list[tuple[str, str | None]],
    *,
    selector: dict[str, Any] | None = None,
    opt_in: str | None = "true",
    namespace: str = NS,
) -> dict[str, Any]:
    """probes: (container, podConditionType or None: a label only)."""
    items = []
    for i, (container, condition) in enumerate(probes):
        item: dict[str, Any] = {
            "name": f"p{i}",
            "containerName": container,
            "probe": {"exec": {"command": ["true"]}},
        }
        if condition is None:
            item["markerPolicy"] = [{"state": "Succeeded", "labels": {"ok": "true"}}]
        else:
            item["podConditionType"] = condition
        items.append(item)
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if opt_in is not None:
        meta["annotations"] = {OPT_IN: opt_in}
    return {
        "apiVersion": "probemarker.io/v1alpha1",
        "kind": "PodProbeMarker",
        "metadata": meta,
        "spec": {"selector": selector or {"matchLabels": {"app": "web"}}, "probes": items},
    }


def gates(admitted: dict[str, Any]) -> list[str] | None:
    listed = admitted["spec"].get("readinessGates")
    return None if listed is None else [g["conditionType"] for g in listed]


def daemon_gates(obj: dict[str, Any], markers: list[dict[str, Any]]) -> set[str]:
    """The condition types of the probes the daemon runs on `obj` (match.match_pod)."""
    view = pod_view(obj)
    parsed = [
        parse_marker(m)
        for m in markers
        if m["metadata"].get("annotations", {}).get(OPT_IN) == "true"
    ]
    return {s.condition_type for s in match_pod(view, parsed).values() if s.condition_type}


def admit(
    policy: MutatingPolicy, obj: dict[str, Any], markers: list[dict[str, Any]]
) -> dict[str, Any]:
    done = policy.create(obj, markers, namespace=NS)
    assert done.errors == (), done.errors
    assert done.refused is None
    return done.object


def test_a_selected_pod_gets_one_gate_per_probe_condition(policy: MutatingPolicy) -> None:
    m = marker("m", [("main", "example.com/a"), ("main", None), ("side", "example.com/b")])
    admitted = admit(policy, pod({"app": "web"}, sidecars=("side",)), [m])
    assert gates(admitted) == ["example.com/a", "example.com/b"]


def test_only_probes_whose_container_the_daemon_probes(policy: MutatingPolicy) -> None:
    """A regular init container runs before the pod's containers: the daemon does not
    probe it, so no gate; nor for a container the pod does not have."""
    m = marker(
        "m",
        [
            ("main", "a.io/main"),
            ("init", "a.io/init"),
            ("gone", "a.io/gone"),
            ("side", "a.io/side"),
        ],
    )
    obj = pod({"app": "web"}, init=("init",), sidecars=("side",))
    assert gates(admit(policy, obj, [m])) == ["a.io/main", "a.io/side"]
    assert daemon_gates(obj, [m]) == {"a.io/main", "a.io/side"}


@pytest.mark.parametrize("value", [None, "false", "True", "yes", ""])
def test_a_marker_that_does_not_opt_in_adds_nothing(
    policy: MutatingPolicy, value: str | None
) -> None:
    m = marker("m", [("main", "a.io/g")], opt_in=value)
    done = policy.create(pod({"app": "web"}), [m], namespace=NS)
    assert (gates(done.object), done.invocations, done.errors) == (None, 1, ())


def test_a_namespace_without_markers_admits_pods_unchanged(policy: MutatingPolicy) -> None:
    obj = pod({"app": "web"}, gates=("user.io/own",))
    elsewhere = marker("m", [("main", "a.io/g")], namespace="other")
    done = policy.create(obj, [elsewhere], namespace=NS)
    assert done.object == obj
    assert (done.invocations, done.errors, done.refused) == (0, (), None)


def test_a_gate_the_pod_lists_is_not_added_again_and_its_own_are_kept(
    policy: MutatingPolicy,
) -> None:
    m = marker("m", [("main", "a.io/g"), ("main", "a.io/h")])
    obj = pod({"app": "web"}, gates=("user.io/first", "a.io/g"))
    assert gates(admit(policy, obj, [m])) == ["user.io/first", "a.io/g", "a.io/h"]


def test_two_markers_naming_one_type_add_it_once(policy: MutatingPolicy) -> None:
    one = marker("one", [("main", "a.io/g")])
    two = marker("two", [("main", "a.io/g"), ("main", "a.io/k")])
    assert gates(admit(policy, pod({"app": "web"}), [one, two])) == ["a.io/g", "a.io/k"]
    assert gates(admit(policy, pod({"app": "web"}), [two, one])) == ["a.io/g", "a.io/k"]


def test_admitting_the_admitted_pod_again_changes_nothing(policy: MutatingPolicy) -> None:
    """What a reinvocation (IfNeeded) does: nothing more."""
    markers = [marker("m", [("main", "a.io/g")]), marker("n", [("main", "b.io/g")])]
    once = admit(policy, pod({"app": "web"}, gates=("user.io/x",)), markers)
    assert admit(policy, once, markers) == once


def test_a_pod_the_selector_does_not_match_gets_nothing(policy: MutatingPolicy) -> None:
    m = marker("m", [("main", "a.io/g")])
    assert gates(admit(policy, pod({"app": "db"}), [m])) is None
    assert gates(admit(policy, pod(None), [m])) is None


SELECTORS: list[dict[str, Any]] = [
    {"matchLabels": {"app": "web"}},
    {"matchLabels": {"app": "web", "tier": "front"}},
    {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "back"]}]},
    {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]},
    {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
    {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]},
    {
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "NotIn", "values": ["back"]},
            {"key": "canary", "operator": "DoesNotExist"},
        ],
    },
    {
        "matchExpressions": [
            {"key": "app", "operator": "In", "values": ["web"]},
            {"key": "tier", "operator": "Exists"},
        ]
    },
]
LABELS: list[dict[str, str]] = [
    {},
    {"app": "web"},
    {"app": "web", "tier": "front"},
    {"app": "web", "tier": "back"},
    {"app": "db", "tier": "front"},
    {"tier": ""},
    {"app": "web", "canary": "1"},
]
LAYOUTS: list[dict[str, tuple[str, ...]]] = [
    {"containers": ("main",)},
    {"containers": ("other",), "sidecars": ("main",)},
    {"containers": ("other",), "init": ("main",)},
    {"containers": ("main", "side"), "init": ("side-init",), "sidecars": ("sc",)},
]


@pytest.mark.parametrize("selector", SELECTORS, ids=lambda s: json.dumps(s, sort_keys=True))
def test_the_policy_selects_exactly_as_the_daemon_matches(
    policy: MutatingPolicy, selector: dict[str, Any]
) -> None:
    """Every selector against every label set and container layout: the gates the
    policy adds are the condition types of the probes the daemon's match_pod runs."""
    m = marker(
        "m",
        [
            ("main", "a.io/main"),
            ("side", "a.io/side"),
            ("sc", "a.io/sc"),
            ("side-init", "a.io/init"),
            ("main", None),
        ],
        selector=selector,
    )
    seen = set()
    for labels, layout in itertools.product(LABELS, LAYOUTS):
        obj = pod(labels, **layout)  # type: ignore[arg-type]
        added = set(gates(admit(policy, obj, [m])) or ())
        assert added == daemon_gates(obj, [m]), (labels, layout)
        seen.add(bool(added))
    assert seen == {True, False}  # each selector both selects and does not


def test_the_choices_the_docs_state() -> None:
    """failurePolicy Ignore, reinvocation IfNeeded, pods on CREATE only, the marker as
    param, every marker of the pod's namespace, Allow without one; the work in
    matchConditions (a marker that asks for nothing skips the mutation, the costly
    part), and no `variables` (1.32 refuses a policy with matchConditions whose
    mutation reads them, kubernetes/kubernetes#134808)."""
    (doc,) = documents(SOURCE / "mutatingadmissionpolicy.yaml")
    (binding,) = documents(SOURCE / "mutatingadmissionpolicybinding.yaml")
    spec = doc["spec"]
    assert spec["failurePolicy"] == "Ignore"
    assert spec["reinvocationPolicy"] == "IfNeeded"
    assert spec["paramKind"] == {"apiVersion": "probemarker.io/v1alpha1", "kind": "PodProbeMarker"}
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
    ]
    assert [c["name"] for c in spec["matchConditions"]] == [
        "marker-opts-in",
        "the-daemon-accepts-the-marker",
        "selector-matches-the-pod",
        "a-gate-is-missing",
    ]
    assert "variables" not in spec
    assert "variables" not in yaml.safe_dump(spec["mutations"])
    assert binding["spec"]["paramRef"] == {"selector": {}, "parameterNotFoundAction": "Allow"}


def test_a_marker_that_asks_for_nothing_skips_the_mutation(policy: MutatingPolicy) -> None:
    """matchConditions stop each case before the mutation (the evaluator applies no
    patch at all, not an empty one): not opted in, not selected, nothing missing."""
    obj = pod({"app": "web"}, gates=("a.io/g",))
    for m in (
        marker("off", [("main", "a.io/h")], opt_in=None),
        marker("other", [("main", "a.io/h")], selector={"matchLabels": {"app": "db"}}),
        marker("done", [("main", "a.io/g"), ("gone", "a.io/h"), ("main", None)]),
    ):
        done = policy.create(obj, [m], namespace=NS)
        assert (done.mutated, done.object) == (0, obj), m["metadata"]["name"]


@pytest.mark.parametrize("version", sorted(FOLDERS))
def test_the_component_grants_nothing(version: str) -> None:
    """No RBAC object: the API server reads the markers itself (docs/security.md)."""
    kinds = sorted(
        d["kind"]
        for f in sorted(FOLDERS[version].glob("*.yaml"))
        if f.name != "kustomization.yaml"
        for d in documents(f)
    )
    assert kinds == ["MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"]


def test_a_false_condition_skips_the_marker_whatever_errors_came_before(
    policy: MutatingPolicy,
) -> None:
    """As the API server's matcher: every condition is evaluated, and a false one skips
    the mutation without an error, even when an earlier one failed to evaluate (here
    the validity test, on a condition type that is not a string). The evaluator once
    stopped at the first result, and reported that error."""
    m = marker("m", [("main", "a.io/g")], selector={"matchLabels": {"app": "other"}})
    m["spec"]["probes"][0]["podConditionType"] = 42
    done = policy.create(pod({"app": "web"}), [m], namespace=NS)
    assert (gates(done.object), done.mutated, done.errors) == (None, 0, ())


def test_a_marker_being_deleted_adds_nothing(policy: MutatingPolicy) -> None:
    """A marker with a deletionTimestamp (a finalizer holds it) is going: once it is
    gone the daemon's clean-up removes its condition, so a gate added now would hold
    the new pod not Ready for good (docs/probes.md, "After the marker is deleted")."""
    m = marker("m", [("main", "a.io/g")])
    m["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    m["metadata"]["finalizers"] = ["example.com/hold"]
    done = policy.create(pod({"app": "web"}), [m], namespace=NS)
    assert (gates(done.object), done.mutated, done.errors) == (None, 0, ())


def _invalid_markers() -> list[tuple[str, dict[str, Any]]]:
    """Markers the CRD refuses today but that can sit in etcd (stored before a rule,
    kept through an update by CRD validation ratcheting, which lets an annotation be
    added to them): the daemon skips each whole (an InvalidMarker Warning event)."""
    cases: list[tuple[str, dict[str, Any]]] = [
        (f"reserved {t}", marker("m", [("main", "a.io/ok"), ("main", t)]))
        for t in rules.RESERVED_CONDITION_TYPES
    ]
    cases += [
        (f"prefix {t}", marker("m", [("main", "a.io/ok"), ("main", t)]))
        for t in ("kubernetes.io/x", "K8s.IO/x")
    ]
    cases += [
        (f"not a qualified name {t!r}", marker("m", [("main", "a.io/ok"), ("main", t)]))
        for t in ("bad type", "a.io/" + "x" * 64, "-x", "a/b/c")
    ]
    cases.append(("a type twice", marker("m", [("main", "a.io/g"), ("main", "a.io/g")])))
    for requirement in (
        {"key": "tier", "operator": "NotIn"},
        {"key": "tier", "operator": "NotIn", "values": []},
        {"key": "tier", "operator": "In", "values": []},
        {"key": "tier", "operator": "DoesNotExist", "values": ["x"]},
        {"key": "app", "operator": "Exists", "values": ["web"]},
        {"key": "app", "operator": "exists"},
    ):
        selector = {"matchLabels": {"app": "web"}, "matchExpressions": [requirement]}
        cases.append(
            (f"selector {requirement}", marker("m", [("main", "a.io/g")], selector=selector))
        )
    return cases


@pytest.mark.parametrize(("case", "m"), _invalid_markers(), ids=[c for c, _ in _invalid_markers()])
def test_a_marker_the_daemon_refuses_adds_nothing(
    policy: MutatingPolicy, case: str, m: dict[str, Any]
) -> None:
    """The daemon never probes for such a marker, so a gate from it would hold the pod
    not Ready for good; and a condition type that is not a qualified name would make
    the API server refuse the pod itself (Pod validation of spec.readinessGates), which
    failurePolicy Ignore does not cover: every pod of the selected workloads refused."""
    with pytest.raises(InvalidMarker):
        parse_marker(m)
    done = policy.create(pod({"app": "web"}), [m], namespace=NS)
    assert (gates(done.object), done.mutated, done.errors) == (None, 0, ()), case


def test_a_valid_marker_beside_an_invalid_one_still_adds_its_gates(
    policy: MutatingPolicy,
) -> None:
    bad = marker("bad", [("main", "Ready")])
    good = marker("good", [("main", "a.io/g")])
    assert gates(admit(policy, pod({"app": "web"}), [bad, good])) == ["a.io/g"]
