"""manifests/components/node-scope: the daemon's writes to pods/status as the policy judges
them, with the expressions exactly as they ship (tests/admission_policy.py evaluates them
as kube-apiserver does, with cel-python; the samples are tests/manifests/
node_scope_samples.py). The real kube-apiserver 1.32 transcript of the same cases is in
docs/security.md (hack/prove-node-scope.sh).
"""

from __future__ import annotations

import copy
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from probemarker.api import rules
from probemarker.write.ownership import OWNED_KEY
from tests.admission_policy import Decision, Policy, load
from tests.manifests.node_scope_samples import (
    DAEMON,
    NODE_NAME_KEY,
    add,
    admitted_object,
    bound_extra,
    daemon_write,
    key,
    remove,
    replace,
    request_of,
    stored_pod,
)
from tests.manifests.test_manifests import MANIFESTS, documents, kustomize, write_overlay

COMPONENT = MANIFESTS / "components" / "node-scope"
POLICY_FILE = COMPONENT / "validatingadmissionpolicy.yaml"
BINDING_FILE = COMPONENT / "validatingadmissionpolicybinding.yaml"
KUBECTL = shutil.which("kubectl")
DENIED = "ValidatingAdmissionPolicy 'probemarker-node-scope' with binding 'probemarker-node-scope' denied request: "


@pytest.fixture(scope="module")
def policy() -> Policy:
    return load(POLICY_FILE, BINDING_FILE)


def judge(
    policy: Policy, old: dict[str, Any], ops: list[dict[str, Any]], **request: Any
) -> Decision:
    return policy.admit(request_of(old, **request), admitted_object(old, ops), old)


def assert_clean(decision: Decision) -> None:
    """No expression of the policy failed to evaluate (a guard missing somewhere)."""
    assert decision.errors == ()


# -- the daemon's own writes are allowed ------------------------------------------------


def test_the_daemons_own_write_is_allowed(policy: Policy) -> None:
    old = stored_pod()
    ops = daemon_write(old)
    new = admitted_object(old, ops)
    # The write does what the daemon means: label, annotations (with the record), condition.
    assert new["metadata"]["labels"]["example.com/idle"] == "true"
    assert new["metadata"]["annotations"]["controller.kubernetes.io/pod-deletion-cost"] == "-10"
    assert OWNED_KEY in new["metadata"]["annotations"]
    assert [c["type"] for c in new["status"]["conditions"]][-1] == "example.com/Idle"
    decision = judge(policy, old, ops, extra=bound_extra())
    assert (decision.matched, decision.allowed) == (True, True), decision.message
    assert_clean(decision)


def test_the_daemons_clean_up_write_is_allowed(policy: Policy) -> None:
    """After the marker is deleted the daemon removes what it wrote, record included."""
    first = stored_pod()
    written = admitted_object(first, daemon_write(first))
    ops = daemon_write(written, live=False)
    assert any(op["op"] == "remove" for op in ops)
    cleaned = admitted_object(written, ops)
    assert "example.com/idle" not in cleaned["metadata"]["labels"]
    assert OWNED_KEY not in cleaned["metadata"].get("annotations", {})
    decision = judge(policy, written, ops, extra=bound_extra())
    assert decision.allowed, decision.message
    assert_clean(decision)


ALLOWED = [
    pytest.param([], id="nothing-changes"),
    pytest.param(
        [add(f"/metadata/labels/{key('app.kubernetes.io/part-of')}", "shop")],
        id="app.kubernetes.io-label",
    ),
    pytest.param(
        [add(f"/metadata/annotations/{key('controller.kubernetes.io/pod-deletion-cost')}", "5")],
        id="controller.kubernetes.io-annotation",
    ),
    pytest.param([add(f"/metadata/labels/{key('x.k8s.io/y')}", "1")], id="subdomain-of-k8s.io"),
    pytest.param(
        [add(f"/metadata/labels/{key('kubernetes.io.example.com/y')}", "1")],
        id="kubernetes.io-as-a-label-of-a-domain",
    ),
    pytest.param(
        [add(f"/metadata/annotations/{key(OWNED_KEY)}", '{"#uid":"x"}')], id="the-ownership-record"
    ),
    pytest.param(
        [{"op": "remove", "path": f"/metadata/labels/{key('app.kubernetes.io/name')}"}],
        id="removing-an-app.kubernetes.io-label",
    ),
    pytest.param(
        [
            add(
                "/status/conditions/-",
                {"type": "example.com/Idle", "status": "False", "reason": "ProbeFailed"},
            )
        ],
        id="a-condition-of-its-own-type",
    ),
    pytest.param(
        [
            add(
                "/status/conditions/-",
                {"type": "app.kubernetes.io/Idle", "status": "True", "reason": "ProbeSucceeded"},
            )
        ],
        id="a-condition-type-under-a-subdomain-of-kubernetes.io",
    ),
    pytest.param(
        [{"op": "replace", "path": "/metadata/ownerReferences", "value": []}],
        id="ownerReferences-(reset-by-the-status-strategy)",
    ),
    pytest.param(
        [{"op": "replace", "path": "/spec/nodeName", "value": "node-b"}],
        id="spec-(reset-by-the-status-strategy)",
    ),
]


@pytest.mark.parametrize("ops", ALLOWED)
def test_labels_annotations_and_own_conditions_are_allowed(
    policy: Policy, ops: list[dict[str, Any]]
) -> None:
    decision = judge(policy, stored_pod(), ops, extra=bound_extra())
    assert (decision.matched, decision.allowed) == (True, True), decision.message
    assert_clean(decision)


# -- what is denied -----------------------------------------------------------------------


LABEL = "/metadata/labels/"
ANNOTATION = "/metadata/annotations/"
METADATA = (
    "probemarker may change only the labels and annotations of a pod's metadata, not metadata."
)
STATUS = "probemarker may change only the conditions of a pod's status, not status."
RESERVED_KEY = ": the prefixes kubernetes.io/ and k8s.io/ belong to Kubernetes (subdomains such as app.kubernetes.io/ are allowed)"

DENIED_WRITES = [
    pytest.param([replace("/status/phase", "Succeeded")], STATUS + "phase", id="phase"),
    pytest.param(
        [replace("/status/podIP", "10.244.9.9"), replace("/status/podIPs", [{"ip": "10.244.9.9"}])],
        STATUS + "podIP",  # podIP or podIPs, whichever the map gives first
        id="podIP",
    ),
    pytest.param([replace("/status/hostIP", "10.0.0.99")], STATUS + "hostIP", id="hostIP"),
    pytest.param(
        [replace("/status/containerStatuses/0/ready", False)],
        STATUS + "containerStatuses",
        id="containerStatuses",
    ),
    pytest.param([remove("/status/startTime")], STATUS + "startTime", id="a-status-field-removed"),
    pytest.param(
        [add("/status/nominatedNodeName", "node-b")],
        STATUS + "nominatedNodeName",
        id="a-status-field-added",
    ),
    pytest.param(
        [add("/metadata/finalizers", ["example.com/hold"])],
        METADATA + "finalizers",
        id="finalizers",
    ),
    pytest.param(
        [add("/metadata/deletionGracePeriodSeconds", 0)],
        METADATA + "deletionGracePeriodSeconds",
        id="deletionGracePeriodSeconds",
    ),
    pytest.param(
        [replace("/metadata/generateName", "x-")], METADATA + "generateName", id="generateName"
    ),
    pytest.param(
        [
            {"op": "test", "path": "/status/conditions/2/type", "value": "Ready"},
            replace("/status/conditions/2/status", "False"),
        ],
        "probemarker may not add, change or remove the condition Ready: Kubernetes, the kubelet or Kruise own that type",
        id="Ready-changed",
    ),
    pytest.param([remove("/status/conditions/2")], "the condition Ready:", id="Ready-removed"),
    pytest.param(
        [add("/status/conditions/4/message", "moved")],
        "the condition PodScheduled:",
        id="PodScheduled-message",
    ),
    pytest.param(
        [
            add(
                "/status/conditions/-",
                {"type": "DisruptionTarget", "status": "True", "reason": "Eviction"},
            )
        ],
        "the condition DisruptionTarget:",
        id="DisruptionTarget-added",
    ),
    pytest.param(
        [add(LABEL + key("kubernetes.io/hostname"), "node-b")],
        "the label kubernetes.io/hostname" + RESERVED_KEY,
        id="kubernetes.io-label-added",
    ),
    pytest.param(
        [replace(LABEL + key("kubernetes.io/os"), "windows")],
        "the label kubernetes.io/os:",
        id="kubernetes.io-label-changed",
    ),
    pytest.param(
        [remove(LABEL + key("kubernetes.io/os"))],
        "the label kubernetes.io/os:",
        id="kubernetes.io-label-removed",
    ),
    pytest.param(
        [add(LABEL + key("k8s.io/owner"), "me")], "the label k8s.io/owner:", id="k8s.io-label-added"
    ),
    pytest.param(
        [add(ANNOTATION + key("k8s.io/owner"), "me")],
        "the annotation k8s.io/owner" + RESERVED_KEY,
        id="k8s.io-annotation-added",
    ),
    pytest.param(
        [replace(ANNOTATION + key("kubernetes.io/config.source"), "file")],
        "the annotation kubernetes.io/config.source:",
        id="kubernetes.io-annotation-changed",
    ),
    pytest.param(
        [remove(ANNOTATION + key("kubernetes.io/config.source"))],
        "the annotation kubernetes.io/config.source:",
        id="kubernetes.io-annotation-removed",
    ),
    pytest.param(
        # Annotation key prefixes are compared lower-cased by Kubernetes: so is ours.
        [add(ANNOTATION + key("Kubernetes.IO/x"), "1")],
        "the annotation Kubernetes.IO/x:",
        id="kubernetes.io-annotation-in-upper-case",
    ),
]


@pytest.mark.parametrize(("ops", "message"), DENIED_WRITES)
def test_writes_beyond_labels_annotations_and_own_conditions_are_denied(
    policy: Policy, ops: list[dict[str, Any]], message: str
) -> None:
    decision = judge(policy, stored_pod(), ops, extra=bound_extra())
    assert (decision.matched, decision.allowed) == (True, False)
    assert decision.message.startswith(DENIED), decision.message
    assert message in decision.message
    assert decision.reason == "Forbidden"  # a 403, not a 422 (see the policy's comment)
    assert_clean(decision)


@pytest.mark.parametrize("reserved", rules.RESERVED_CONDITION_TYPES)
def test_every_reserved_condition_type_is_denied(policy: Policy, reserved: str) -> None:
    old = stored_pod()
    ops = [
        add("/status/conditions/-", {"type": reserved, "status": "False", "reason": "ProbeFailed"})
    ]
    decision = judge(policy, old, ops, extra=bound_extra())
    assert not decision.allowed
    assert f"the condition {reserved}:" in decision.message
    assert_clean(decision)


@pytest.mark.parametrize("reserved", ["kubernetes.io/Idle", "k8s.io/Ready", "K8s.IO/x"])
@pytest.mark.parametrize("change", ["add", "replace", "remove"])
def test_a_condition_type_under_a_reserved_prefix_is_denied(
    policy: Policy, reserved: str, change: str
) -> None:
    """Kubernetes reserves condition types under kubernetes.io/ and k8s.io/ as it
    reserves such keys: the daemon may neither add one nor change or remove one that
    something else wrote."""
    condition = {"type": reserved, "status": "False", "reason": "ProbeFailed"}
    old = stored_pod()
    if change != "add":
        old = copy.deepcopy(old)
        old["status"]["conditions"].append(condition)
    last = len(old["status"]["conditions"]) - 1
    ops = {
        "add": [add("/status/conditions/-", condition)],
        "replace": [replace(f"/status/conditions/{last}/status", "True")],
        "remove": [{"op": "remove", "path": f"/status/conditions/{last}"}],
    }[change]
    decision = judge(policy, old, ops, extra=bound_extra())
    assert (decision.matched, decision.allowed) == (True, False), decision.message
    assert f"the condition {reserved}:" in decision.message
    assert_clean(decision)


@pytest.mark.parametrize(
    ("old", "extra", "message"),
    [
        pytest.param(
            stored_pod(node="node-b"),
            bound_extra("node-a"),
            "probemarker may write only pods on its own node (token node: node-a, pod node: node-b)",
            id="a-pod-on-another-node",
        ),
        pytest.param(
            stored_pod(node=None),
            bound_extra("node-a"),
            "probemarker may write only pods on its own node (token node: node-a, pod node: <none>)",
            id="a-pod-on-no-node",
        ),
        pytest.param(
            stored_pod(),
            {"authentication.kubernetes.io/credential-id": ["JTI=1"]},
            "probemarker's token names no node (user extra authentication.kubernetes.io/node-name)",
            id="a-token-bound-to-no-pod",
        ),
        pytest.param(
            stored_pod(),
            None,
            "probemarker's token names no node",
            id="a-user-with-no-extra-at-all",
        ),
        pytest.param(
            stored_pod(),
            {NODE_NAME_KEY: ["node-a", "node-b"]},
            "probemarker's token names no node",
            id="two-node-names",
        ),
        pytest.param(
            stored_pod(),
            {NODE_NAME_KEY: []},
            "probemarker's token names no node",
            id="no-node-name-value",
        ),
    ],
)
def test_only_pods_on_the_tokens_node_are_written(
    policy: Policy, old: dict[str, Any], extra: dict[str, list[str]] | None, message: str
) -> None:
    """Denied cleanly, never an evaluation error, whatever the token carries."""
    decision = judge(policy, old, daemon_write(old), extra=extra)
    assert (decision.matched, decision.allowed) == (True, False)
    assert decision.message.startswith(DENIED), decision.message
    assert message in decision.message
    assert decision.reason == "Forbidden"
    assert_clean(decision)


def test_a_changed_spec_is_denied_should_a_server_ever_keep_it(policy: Policy) -> None:
    """pods/status resets the spec (PrepareForUpdate: newPod.Spec = oldPod.Spec), so this
    only guards against that changing: the object is given with the spec changed."""
    old = stored_pod()
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["image"] = "registry.example/other:1"
    decision = policy.admit(request_of(old, extra=bound_extra()), new, old)
    assert not decision.allowed
    assert decision.message == DENIED + "probemarker may not change a pod's spec"


# -- who is matched ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("user", "matched"),
    [
        pytest.param(DAEMON, True, id="the-daemon"),
        pytest.param(
            "system:serviceaccount:ops:probemarker", True, id="the-daemon-in-another-namespace"
        ),
        pytest.param(
            "system:serviceaccount:probemarker-system:default",
            False,
            id="another-account-beside-it",
        ),
        pytest.param("system:serviceaccount:shop:probemarker-x", False, id="a-longer-name"),
        pytest.param("system:node:node-a", False, id="the-kubelet"),
        pytest.param("kubernetes-admin", False, id="an-admin"),
    ],
)
def test_the_policy_holds_only_the_daemons_service_account(
    policy: Policy, user: str, matched: bool
) -> None:
    """Other users are untouched: a phase change by the kubelet goes through."""
    old = stored_pod()
    decision = judge(
        policy, old, [replace("/status/phase", "Succeeded")], user=user, extra=bound_extra()
    )
    assert decision.matched is matched
    assert decision.allowed is not matched
    assert_clean(decision)


def test_a_user_without_a_username_is_not_matched_and_nothing_fails(policy: Policy) -> None:
    old = stored_pod()
    request = request_of(old)
    del request["userInfo"]["username"]
    decision = policy.admit(request, admitted_object(old, []), old)
    assert (decision.matched, decision.allowed, decision.errors) == (False, True, ())


@pytest.mark.parametrize(
    ("operation", "subresource", "matched"),
    [
        pytest.param("UPDATE", "status", True, id="pods/status-update"),
        pytest.param("UPDATE", "", False, id="pods-update-(not-granted-by-rbac)"),
        pytest.param("CREATE", "", False, id="pods-create"),
        pytest.param("UPDATE", "ephemeralcontainers", False, id="another-subresource"),
    ],
)
def test_the_policy_matches_pods_status_updates(
    policy: Policy, operation: str, subresource: str, matched: bool
) -> None:
    old = stored_pod()
    request = request_of(
        old, operation=operation, subresource=subresource, extra=bound_extra("node-b")
    )
    assert policy.matches_request(request) is matched


# -- the expressions themselves ---------------------------------------------------------


def variable(policy: Policy, name: str) -> Any:
    """A constant variable's value."""
    (expression,) = [e for n, e in policy.variables if n == name]
    return expression.program.evaluate({})


def test_the_reserved_condition_types_are_the_projects(policy: Policy) -> None:
    assert list(variable(policy, "reservedConditionTypes")) == list(rules.RESERVED_CONDITION_TYPES)


def test_the_reserved_key_pattern_is_the_projects(policy: Policy) -> None:
    assert str(variable(policy, "reservedKeyPattern")) == rules.RESERVED_KEY_PREFIX_RE


# Functions of the base CEL language, which every release from 1.30 has. Kubernetes'
# libraries (lowerAscii, join, split, ..., and the `[?key]` optional syntax of 1.29+
# when compiled as a new expression on older compatibility versions) are left out.
BASE_CEL = {
    "has",
    "size",
    "matches",
    "startsWith",
    "endsWith",
    "filter",
    "all",
    "exists",
    "map",
    "dyn",
}


STRING_LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


def test_the_expressions_use_only_the_base_cel_language(policy: Policy) -> None:
    for expression in policy.expressions():
        code = STRING_LITERAL.sub("''", expression.source)
        called = set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(", code))
        assert called <= BASE_CEL, (expression.where, called - BASE_CEL)
        assert "[?" not in code, expression.where
        assert ".?" not in code, expression.where


def test_every_validation_says_what_is_refused(policy: Policy) -> None:
    raw = yaml.safe_load(POLICY_FILE.read_text())
    for i, validation in enumerate(raw["spec"]["validations"]):
        assert validation.get("reason") == "Forbidden", i
        assert validation["message"].startswith("probemarker"), i
        assert "\n" not in validation["message"], i  # kube-apiserver refuses line breaks


def test_every_message_expression_evaluates_on_every_sample(policy: Policy) -> None:
    """kube-apiserver evaluates each messageExpression on every request: none may fail,
    whichever validation fails (or none)."""
    old = stored_pod()
    requests: list[tuple[list[dict[str, Any]], dict[str, Any] | None]] = [
        (daemon_write(old), bound_extra()),
        (daemon_write(old), None),
        ([replace("/status/phase", "Failed")], bound_extra("node-b")),
        ([add("/metadata/finalizers", ["x"])], bound_extra()),
    ]
    with_messages = sum(1 for v in policy.validations if v.message_expression is not None)
    for ops, extra in requests:
        decision = judge(policy, old, ops, extra=extra)
        assert_clean(decision)
        assert len(decision.messages) == with_messages


def test_a_variable_that_fails_fails_what_refers_to_it(policy: Policy) -> None:
    """The evaluator itself: an error is a denial naming it, recorded in `errors` (a policy
    whose guard was missing would fail this way on a real server)."""
    old = stored_pod()
    request = request_of(old, extra=bound_extra())
    broken = {**old, "metadata": "not a map"}
    decision = policy.admit(request, broken, old)
    assert not decision.allowed
    assert decision.errors != ()


def test_the_loader_refuses_what_it_does_not_model(tmp_path: Path) -> None:
    raw = yaml.safe_load(POLICY_FILE.read_text())
    raw["spec"]["paramKind"] = {"apiVersion": "v1", "kind": "ConfigMap"}
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ValueError, match=r"not modelled by this evaluator: spec\.paramKind"):
        load(path, BINDING_FILE)


# -- the component ------------------------------------------------------------------------


def test_the_component_lists_the_policy_and_its_binding() -> None:
    component = yaml.safe_load((COMPONENT / "kustomization.yaml").read_text())
    assert (component["apiVersion"], component["kind"]) == (
        "kustomize.config.k8s.io/v1alpha1",
        "Component",
    )
    assert component["resources"] == [POLICY_FILE.name, BINDING_FILE.name]
    (policy_doc,) = documents(POLICY_FILE)
    (binding_doc,) = documents(BINDING_FILE)
    assert (
        policy_doc["apiVersion"] == binding_doc["apiVersion"] == "admissionregistration.k8s.io/v1"
    )
    assert policy_doc["spec"]["failurePolicy"] == "Fail"
    assert binding_doc["spec"] == {
        "policyName": policy_doc["metadata"]["name"],
        "validationActions": ["Deny"],
    }


def daemon_username(rendered: list[dict[str, Any]]) -> str:
    """The username of the ServiceAccount the rendered ClusterRoleBinding names."""
    (binding,) = [d for d in rendered if d["kind"] == "ClusterRoleBinding"]
    (subject,) = binding["subjects"]
    return f"system:serviceaccount:{subject['namespace']}:{subject['name']}"


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH (kubectl kustomize)")
@pytest.mark.parametrize(
    "fields",
    [pytest.param({}, id="as-shipped"), pytest.param({"namespace": "ops"}, id="another-namespace")],
)
def test_an_overlay_with_the_component_renders_and_holds_its_daemon(
    tmp_path: Path, policy: Policy, fields: dict[str, Any]
) -> None:
    rendered = kustomize(write_overlay(tmp_path, components=(COMPONENT,), **fields))
    kinds = [d["kind"] for d in rendered]
    assert (
        kinds.count("ValidatingAdmissionPolicy")
        == kinds.count("ValidatingAdmissionPolicyBinding")
        == 1
    )
    (vap,) = [d for d in rendered if d["kind"] == "ValidatingAdmissionPolicy"]
    (expected,) = documents(POLICY_FILE)
    # kustomize's `namespace:` also stamps cluster-scoped kinds it does not know; the API
    # server drops a namespace on a cluster-scoped object (rest.BeforeCreate).
    vap["metadata"].pop("namespace", None)
    assert vap == expected
    # The policy follows the ServiceAccount the role is granted to, wherever it moved.
    old = stored_pod(node="node-b")
    user = daemon_username(rendered)
    decision = judge(policy, old, [], user=user, extra=bound_extra("node-a"))
    assert (decision.matched, decision.allowed) == (True, False), user
