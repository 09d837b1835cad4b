"""charts/probemarker: the same objects as manifests/, each component behind its value.

One source, no drift: `helm template` of the chart (a real helm, tests/helm.py) against
`kubectl kustomize` of an overlay of manifests/ with the same component, object by
object, for the base and every component. The only differences allowed are the
chart's decisions (docs/installation.md): no Namespace (helm installs into the
release's), and the CRD's `helm.sh/resource-policy: keep`. Then what each value does,
the schema refusing unknown keys and bad values by name, the readiness-gates policy's
API version picked per resource from what the API server serves, and the chart's
version being the package's.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

import probemarker
from tests.hackscripts import load_hack
from tests.helm import (
    CHART,
    RELEASE_NAMESPACE,
    helm_template,
    render_chart,
    require_helm,
    run_helm,
)
from tests.manifests.test_manifests import KUBECTL, MANIFESTS, kustomize, write_overlay

COMPONENTS = MANIFESTS / "components"
KEEP = {"helm.sh/resource-policy": "keep"}
MAP = "admissionregistration.k8s.io/{}/MutatingAdmissionPolicy"
MAP_BINDING = "admissionregistration.k8s.io/{}/MutatingAdmissionPolicyBinding"


def served(version: str) -> tuple[str, str]:
    return (MAP.format(version), MAP_BINDING.format(version))


Key = tuple[str, str, str]


def by_identity(docs: list[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    found = {
        (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in docs
    }
    assert len(found) == len(docs), "an object twice"
    return found


@pytest.fixture(scope="module")
def helm() -> str:
    return require_helm()


def chart_objects(
    helm: str, values: dict[str, Any] | None = None, api_versions: tuple[str, ...] = ()
) -> dict[Key, dict[str, Any]]:
    return by_identity(render_chart(helm, values, api_versions=api_versions))


def kustomize_objects(tmp_path: Path, components: tuple[str, ...]) -> dict[Key, dict[str, Any]]:
    overlay = write_overlay(tmp_path, components=tuple(COMPONENTS / c for c in components))
    return by_identity(kustomize(overlay))


# (components of the overlay, the chart's values that stand for them, API versions served)
SAME = [
    pytest.param((), {}, (), id="base"),
    pytest.param(("node-scope",), {"nodeScope": {"enabled": True}}, (), id="node-scope"),
    pytest.param(("podmonitor",), {"podMonitor": {"enabled": True}}, (), id="podmonitor"),
    pytest.param(
        ("metrics-network-policy",),
        {"metricsNetworkPolicy": {"enabled": True}},
        (),
        id="metrics-network-policy",
    ),
    pytest.param(("kruise-group",), {"kruiseGroup": {"enabled": True}}, (), id="kruise-group"),
    pytest.param(("cri",), {"execBackend": "cri"}, (), id="cri"),
    pytest.param(
        ("cri", "cri-no-exec-rbac"),
        {"execBackend": "cri", "cri": {"dropExecRule": True}},
        (),
        id="cri-no-exec-rbac",
    ),
    pytest.param(
        ("readiness-gates",), {"readinessGates": {"enabled": True}}, served("v1"), id="rg-v1"
    ),
    pytest.param(
        ("readiness-gates-v1beta1",),
        {"readinessGates": {"enabled": True}},
        served("v1beta1"),
        id="rg-v1beta1",
    ),
    pytest.param(
        ("readiness-gates-v1alpha1",),
        {"readinessGates": {"enabled": True}},
        served("v1alpha1"),
        id="rg-v1alpha1",
    ),
]


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH (kubectl kustomize)")
@pytest.mark.parametrize(("components", "values", "api_versions"), SAME)
def test_the_chart_renders_what_kustomize_renders(
    helm: str,
    tmp_path: Path,
    components: tuple[str, ...],
    values: dict[str, Any],
    api_versions: tuple[str, ...],
) -> None:
    expected = kustomize_objects(tmp_path, components)
    namespaces = [key for key in expected if key[0] == "Namespace"]
    assert namespaces == [("Namespace", "", RELEASE_NAMESPACE)]
    del expected[namespaces[0]]  # left to the release's namespace (docs/installation.md)
    got = copy.deepcopy(chart_objects(helm, values, api_versions))
    crd = got[("CustomResourceDefinition", "", "podprobemarkers.probemarker.io")]
    assert crd["metadata"].pop("annotations") == KEEP  # the chart's one addition
    assert sorted(got) == sorted(expected)
    for key, doc in expected.items():
        assert got[key] == doc, key


def test_the_default_daemonset_pod_spec_is_the_kustomize_one(helm: str, tmp_path: Path) -> None:
    """Said on its own, as the issue asks it: the pod spec is the same (and the image)."""
    (ds,) = [d for d in kustomize(write_overlay(tmp_path)) if d["kind"] == "DaemonSet"]
    got = chart_objects(helm)[("DaemonSet", RELEASE_NAMESPACE, "probemarker")]
    assert got["spec"]["template"] == ds["spec"]["template"]


# --- the readiness-gates policy's API version ---


def gate_versions(objects: dict[Key, dict[str, Any]]) -> set[str]:
    return {
        d["apiVersion"]
        for d in objects.values()
        if d["kind"] in {"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}
    }


@pytest.mark.parametrize(
    ("api_versions", "expected"),
    [
        pytest.param(served("v1") + served("v1alpha1"), "v1", id="v1-first"),
        pytest.param(served("v1beta1") + served("v1alpha1"), "v1beta1", id="v1beta1-before-alpha"),
        # the group version served, but without the resource (per resource, not per group)
        pytest.param(
            (
                "admissionregistration.k8s.io/v1",
                "admissionregistration.k8s.io/v1beta1",
                *served("v1alpha1"),
            ),
            "v1alpha1",
            id="group-versions-without-the-resource",
        ),
    ],
)
def test_readiness_gates_take_the_first_version_serving_the_resource(
    helm: str, api_versions: tuple[str, ...], expected: str
) -> None:
    objects = chart_objects(helm, {"readinessGates": {"enabled": True}}, api_versions)
    assert gate_versions(objects) == {f"admissionregistration.k8s.io/{expected}"}


def test_readiness_gates_fail_naming_the_api_and_the_feature_gate(helm: str) -> None:
    done = helm_template(
        helm,
        {"readinessGates": {"enabled": True}},
        api_versions=("admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy",),
    )
    assert done.returncode != 0
    assert "MutatingAdmissionPolicy" in done.stderr
    assert "--feature-gates=MutatingAdmissionPolicy=true" in done.stderr
    assert "readinessGates.enabled" in done.stderr


def test_no_readiness_gates_policy_by_default(helm: str) -> None:
    assert gate_versions(chart_objects(helm, api_versions=served("v1"))) == set()


# --- the CRD ---


def test_the_crd_can_be_left_out(helm: str) -> None:
    objects = chart_objects(helm, {"crds": {"install": False, "keep": True}})
    assert [k for k in objects if k[0] == "CustomResourceDefinition"] == []


def test_the_crd_is_kept_on_uninstall_unless_told(helm: str) -> None:
    key = ("CustomResourceDefinition", "", "podprobemarkers.probemarker.io")
    assert chart_objects(helm)[key]["metadata"]["annotations"] == KEEP
    dropped = chart_objects(helm, {"crds": {"install": True, "keep": False}})[key]
    assert "annotations" not in dropped["metadata"]


def test_the_crd_is_a_template_so_upgrades_apply_it() -> None:
    """helm installs crds/ once and never upgrades it; a template is applied each time."""
    assert not (CHART / "crds").exists()


@pytest.mark.parametrize(
    ("copy_name", "source"),
    [
        ("podprobemarkers.probemarker.io.yaml", "crd/podprobemarkers.probemarker.io.yaml"),
        ("node-scope-policy.yaml", "components/node-scope/validatingadmissionpolicy.yaml"),
        (
            "readiness-gates-policy.yaml",
            "components/readiness-gates/mutatingadmissionpolicy.yaml",
        ),
    ],
)
def test_the_charts_files_are_the_manifests(copy_name: str, source: str) -> None:
    copied = CHART / "files" / copy_name
    assert copied.read_bytes() == (MANIFESTS / source).read_bytes(), (
        f"cp manifests/{source} charts/probemarker/files/{copy_name}"
    )


# --- what each pod-level value does ---


def daemonset(helm: str, values: dict[str, Any]) -> dict[str, Any]:
    return chart_objects(helm, values)[("DaemonSet", RELEASE_NAMESPACE, "probemarker")]


def container(ds: dict[str, Any]) -> dict[str, Any]:
    (only,) = ds["spec"]["template"]["spec"]["containers"]
    return dict(only)


def test_the_image_tag_defaults_to_the_app_version(helm: str) -> None:
    ds = daemonset(helm, {})
    assert container(ds)["image"] == f"ghcr.io/probemarker/probemarker:{probemarker.__version__}"
    ds = daemonset(
        helm,
        {"image": {"repository": "registry.example.com/pm", "tag": "dev", "pullPolicy": "Always"}},
    )
    assert container(ds)["image"] == "registry.example.com/pm:dev"
    assert container(ds)["imagePullPolicy"] == "Always"


POD_VALUES = {
    "imagePullSecrets": [{"name": "regcred"}],
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "games"}],
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}},
    "priorityClassName": "probes-high",
}


@pytest.mark.parametrize(("key", "value"), POD_VALUES.items(), ids=list(POD_VALUES))
def test_a_pod_value_lands_in_the_pod_spec(helm: str, key: str, value: Any) -> None:
    assert daemonset(helm, {key: value})["spec"]["template"]["spec"][key] == value


def test_pod_labels_and_annotations_go_on_the_template_not_the_selector(helm: str) -> None:
    ds = daemonset(helm, {"podLabels": {"team": "sre"}, "podAnnotations": {"a.example/b": "c"}})
    meta = ds["spec"]["template"]["metadata"]
    assert meta["labels"]["team"] == "sre"
    assert meta["annotations"] == {"a.example/b": "c"}
    assert "team" not in ds["spec"]["selector"]["matchLabels"]


def test_extra_args_env_and_resources(helm: str) -> None:
    extra_env = [{"name": "PROBEMARKER_NAMESPACES", "value": "games,web"}]
    resources = {"requests": {"cpu": "100m", "memory": "96Mi"}, "limits": {"memory": "256Mi"}}
    main = container(
        daemonset(
            helm,
            {
                "extraArgs": ["--max-concurrent-probes=32"],
                "extraEnv": extra_env,
                "resources": resources,
            },
        )
    )
    assert main["args"] == ["--max-concurrent-probes=32"]
    assert main["env"][-1] == extra_env[0]
    assert main["resources"] == resources


def test_the_cri_socket_path_is_the_endpoint_the_mount_and_the_host_path(helm: str) -> None:
    socket = "/var/run/crio/crio.sock"
    ds = daemonset(
        helm, {"execBackend": "cri", "cri": {"socketPath": socket, "dropExecRule": False}}
    )
    env = {e["name"]: e.get("value") for e in container(ds)["env"]}
    assert env["PROBEMARKER_CRI_ENDPOINT"] == f"unix://{socket}"
    mounts = {m["name"]: m["mountPath"] for m in container(ds)["volumeMounts"]}
    volumes = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    assert mounts["cri-socket"] == socket
    assert volumes["cri-socket"]["hostPath"] == {"path": socket, "type": "Socket"}


def test_the_network_policy_names_the_scraper_given(helm: str) -> None:
    scraper = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "obs"}}}]
    objects = chart_objects(helm, {"metricsNetworkPolicy": {"enabled": True, "from": scraper}})
    policy = objects[("NetworkPolicy", RELEASE_NAMESPACE, "probemarker-metrics")]
    assert policy["spec"]["ingress"][0]["from"] == scraper


# --- the schema: strict, naming what is wrong ---


@pytest.mark.parametrize(
    ("values", "named"),
    [
        pytest.param({"imag": {}}, "imag", id="unknown-top-level-key"),
        pytest.param({"image": {"digest": "sha256:0"}}, "digest", id="unknown-nested-key"),
        pytest.param({"execBackend": "docker"}, "execBackend", id="bad-exec-backend"),
        pytest.param({"nodeScope": {"enabled": "yes"}}, "enabled", id="bool-as-string"),
        pytest.param({"tolerations": [{"operator": "Maybe"}]}, "operator", id="bad-toleration"),
        pytest.param({"extraEnv": [{"value": "x"}]}, "name", id="env-without-name"),
        pytest.param({"resources": {"requests": {"cpu": "lots"}}}, "cpu", id="bad-quantity"),
        pytest.param({"cri": {"dropExecRule": True}}, "execBackend: cri", id="drop-rule-with-api"),
    ],
)
def test_bad_values_fail_naming_the_key(helm: str, values: dict[str, Any], named: str) -> None:
    done = helm_template(helm, values)
    assert done.returncode != 0
    assert named in done.stderr, done.stderr


def test_the_chart_lints_strictly(helm: str) -> None:
    done = run_helm(helm, "lint", "--strict", str(CHART))
    assert done.returncode == 0, done.stdout + done.stderr


# --- the chart's metadata ---


def test_the_charts_version_is_the_packages() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2"
    assert chart["name"] == "probemarker"
    assert chart["version"] == chart["appVersion"] == probemarker.__version__
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    assert kustomization["images"][0]["newTag"] == probemarker.__version__


def value_paths(schema: dict[str, Any], prefix: str = "") -> list[str]:
    """The chart's values: a property with a description is one; one without is a group."""
    found = []
    for key, node in schema["properties"].items():
        path = f"{prefix}{key}"
        if "description" in node:
            found.append(path)
        else:
            found += value_paths(node, prefix=f"{path}.")
    return found


def commented_keys(text: str) -> dict[str, bool]:
    """Each key path of values.yaml (block style, 2-space indents): a comment right above?"""
    found: dict[str, bool] = {}
    stack: list[str] = []
    above = ""
    for line in text.splitlines():
        match = re.match(r"^( *)([A-Za-z]+):", line)
        if match is not None:
            depth = len(match[1]) // 2
            stack = [*stack[:depth], match[2]]
            found[".".join(stack)] = above.startswith("#")
        above = line.strip()
    return found


SCHEMA = json.loads((CHART / "values.schema.json").read_text())


def test_every_value_is_in_the_schema_and_documented_in_values_yaml() -> None:
    paths = value_paths(SCHEMA)
    commented = commented_keys((CHART / "values.yaml").read_text())
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    assert {p.split(".")[0] for p in paths} == {*defaults, "global"}
    for path in paths:
        if path == "global":
            continue
        assert commented.get(path), f"values.yaml: {path} has no comment above it"


def test_the_schema_refuses_unknown_keys_everywhere() -> None:
    """additionalProperties is false (or a type, for maps) in every object of ours."""

    def walk(node: dict[str, Any], where: str) -> None:
        if "properties" in node:
            assert node.get("additionalProperties") is False, where
            for key, child in node["properties"].items():
                walk(child, f"{where}.{key}")
        for key in ("items",):
            if isinstance(node.get(key), dict):
                walk(node[key], f"{where}[]")

    walk({k: v for k, v in SCHEMA.items() if k != "$schema"}, "values")


def test_the_docs_values_table_is_the_charts() -> None:
    """docs/installation.md's table is hack/chart_values.py's, from the schema and defaults."""
    module = load_hack("chart_values.py")
    assert module.main(["--check"]) == 0, "python3 hack/chart_values.py"
    table = module.table()
    for path in value_paths(SCHEMA):
        if path != "global":
            assert f"| `{path}` |" in table
