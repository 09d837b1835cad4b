"""tests/rbac_check.py on hand-made requests: it refuses what kube-apiserver's RBAC
authorizer refuses (wrong verb, wrong group, a subresource for its resource, pods patch,
URLs outside discovery) and lets through what the role or the default discovery roles
grant, wildcards, `*/subresource` and resourceNames included.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from probemarker.sim.server.harness.accounting import RequestRecord
from tests.rbac_check import PolicyRule, allows, disallowed, load_cluster_role, needed_verbs


def rec(
    verb: str,
    resource: str,
    subresource: str = "",
    *,
    group: str = "",
    name: str = "",
    namespace: str = "default",
    path: str = "",
    code: int = 200,
) -> RequestRecord:
    return RequestRecord(
        verb,
        resource,
        subresource,
        code,
        group=group,
        version="v1",
        namespace=namespace if resource else "",
        name=name,
        path=path,
    )


def url(verb: str, path: str, code: int = 200) -> RequestRecord:
    return RequestRecord(verb, "", "", code, path=path)


# -- the daemon's role ----------------------------------------------------------------

ALLOWED = [
    pytest.param(rec("list", "pods", namespace=""), id="list-pods-all-namespaces"),
    pytest.param(rec("watch", "pods", namespace=""), id="watch-pods"),
    pytest.param(rec("get", "pods", name="web"), id="get-pod"),
    pytest.param(rec("patch", "pods", "status", name="web"), id="patch-pods-status"),
    pytest.param(rec("patch", "pods", "status", name="web", code=422), id="refused-patch-too"),
    pytest.param(rec("get", "pods", "exec", name="web"), id="exec-websocket-get"),
    pytest.param(rec("create", "pods", "exec", name="web"), id="exec-spdy-post"),
    pytest.param(rec("create", "events", group="events.k8s.io"), id="create-event"),
    pytest.param(rec("patch", "events", group="events.k8s.io", name="e.1"), id="patch-event"),
    pytest.param(rec("list", "podprobemarkers", group="probemarker.io"), id="list-markers"),
    pytest.param(rec("watch", "podprobemarkers", group="probemarker.io"), id="watch-markers"),
    pytest.param(rec("get", "podprobemarkers", group="probemarker.io", name="m"), id="get-marker"),
    pytest.param(url("get", "/version"), id="discovery-version"),
    pytest.param(url("get", "/api/v1"), id="discovery-core"),
    pytest.param(url("get", "/apis/probemarker.io/v1alpha1"), id="discovery-group"),
    pytest.param(url("get", "/openapi/v3"), id="openapi"),
    pytest.param(url("get", "/healthz"), id="healthz"),
]

REFUSED = [
    pytest.param(
        rec("patch", "pods", name="web"),
        "patch pods 'web' in API group '' in namespace 'default' [HTTP 200]: no rule grants patch",
        id="pods-patch",
    ),
    pytest.param(
        rec("update", "pods", "status", name="web"),
        "update pods/status 'web' in API group '' in namespace 'default' [HTTP 200]: "
        "no rule grants update",
        id="wrong-verb-on-status",
    ),
    pytest.param(
        rec("get", "pods", "log", name="web"),
        "get pods/log 'web' in API group '' in namespace 'default' [HTTP 200]: no rule grants get",
        id="subresource-not-granted-by-its-resource",
    ),
    pytest.param(
        rec("create", "events"),
        "create events in API group '' in namespace 'default' [HTTP 200]: no rule grants create",
        id="core-v1-events-wrong-group",
    ),
    pytest.param(
        rec("list", "podprobemarkers", group="apps.kruise.io"),
        "list podprobemarkers in API group 'apps.kruise.io' in namespace 'default' "
        "[HTTP 200]: no rule grants list",
        id="kruise-group",
    ),
    pytest.param(
        rec("patch", "podprobemarkers", "status", group="probemarker.io", name="m"),
        "patch podprobemarkers/status 'm' in API group 'probemarker.io' in namespace "
        "'default' [HTTP 200]: no rule grants patch",
        id="marker-status",
    ),
    pytest.param(
        rec("get", "secrets", name="token"),
        "get secrets 'token' in API group '' in namespace 'default' [HTTP 200]: no rule grants get",
        id="secrets",
    ),
    pytest.param(
        rec("get", "nodes", name="node-1", namespace=""),
        "get nodes 'node-1' in API group '' (cluster-wide) [HTTP 200]: no rule grants get",
        id="nodes",
    ),
    pytest.param(
        rec("delete", "pods", name="web", code=404),
        "delete pods 'web' in API group '' in namespace 'default' [HTTP 404]: "
        "no rule grants delete",
        id="delete-even-if-it-failed",
    ),
    pytest.param(
        url("post", "/version"),
        "post /version (non-resource URL) [HTTP 200]: no rule grants post",
        id="non-resource-wrong-verb",
    ),
    pytest.param(
        url("get", "/metrics"),
        "get /metrics (non-resource URL) [HTTP 200]: no rule grants get",
        id="non-resource-outside-discovery",
    ),
    pytest.param(
        url("get", "/logs/kube-apiserver.log"),
        "get /logs/kube-apiserver.log (non-resource URL) [HTTP 200]: no rule grants get",
        id="non-resource-logs",
    ),
]


@pytest.mark.parametrize("record", ALLOWED)
def test_the_role_allows(record: RequestRecord) -> None:
    assert disallowed([record]) == []


@pytest.mark.parametrize(("record", "line"), REFUSED)
def test_the_role_refuses(record: RequestRecord, line: str) -> None:
    assert disallowed([record]) == [line]


def test_lines_come_in_request_order_one_per_refused_request() -> None:
    records = [
        rec("list", "pods"),
        rec("patch", "pods", name="a"),
        rec("get", "pods", name="a"),
        rec("patch", "pods", name="b"),
    ]
    lines = disallowed(records)
    assert [line.split(" [")[0] for line in lines] == [
        "patch pods 'a' in API group '' in namespace 'default'",
        "patch pods 'b' in API group '' in namespace 'default'",
    ]


# -- exec: get and create ---------------------------------------------------------------

GET_ONLY = (PolicyRule(verbs=("get",), api_groups=("",), resources=("pods/exec",)),)
CREATE_ONLY = (PolicyRule(verbs=("create",), api_groups=("",), resources=("pods/exec",)),)


@pytest.mark.parametrize(
    ("rules", "record", "line"),
    [
        pytest.param(
            GET_ONLY,
            rec("get", "pods", "exec", name="web", code=101),
            "get pods/exec 'web' in API group '' in namespace 'default' [HTTP 101]: no rule "
            "grants create (kube-apiserver 1.35+ also authorises a WebSocket upgrade as create)",
            id="websocket-without-create-refused-from-1.35",
        ),
        pytest.param(
            CREATE_ONLY,
            rec("get", "pods", "exec", name="web", code=101),
            "get pods/exec 'web' in API group '' in namespace 'default' [HTTP 101]: no rule "
            "grants get",
            id="websocket-without-get-refused-by-the-filter",
        ),
        pytest.param(
            CREATE_ONLY, rec("create", "pods", "exec", name="web", code=101), None, id="spdy"
        ),
        pytest.param(
            GET_ONLY,
            rec("create", "pods", "exec", name="web", code=101),
            "create pods/exec 'web' in API group '' in namespace 'default' [HTTP 101]: no rule "
            "grants create",
            id="spdy-without-create",
        ),
    ],
)
def test_exec_needs_get_and_create_for_a_websocket(
    rules: tuple[PolicyRule, ...], record: RequestRecord, line: str | None
) -> None:
    assert disallowed([record], rules=rules) == ([] if line is None else [line])


@pytest.mark.parametrize(
    ("record", "verbs"),
    [
        pytest.param(rec("get", "pods", "exec"), ("get", "create"), id="exec-get"),
        pytest.param(rec("get", "pods", "attach"), ("get", "create"), id="attach-get"),
        pytest.param(rec("get", "pods", "portforward"), ("get", "create"), id="portforward"),
        pytest.param(rec("create", "pods", "exec"), ("create",), id="exec-create"),
        pytest.param(rec("get", "pods", "log"), ("get",), id="log-is-not-connect"),
        pytest.param(rec("get", "pods", "proxy"), ("get",), id="proxy-not-covered-by-the-gate"),
        pytest.param(rec("get", "pods", "exec", group="x.io"), ("get",), id="other-group"),
    ],
)
def test_needed_verbs(record: RequestRecord, verbs: tuple[str, ...]) -> None:
    assert needed_verbs(record) == verbs


# -- matching as the RBAC authorizer matches ------------------------------------------


def rule(*verbs: str, groups: tuple[str, ...] = ("",), **kw: tuple[str, ...]) -> PolicyRule:
    return PolicyRule(verbs=verbs, api_groups=groups, **kw)


@pytest.mark.parametrize(
    ("granted", "record", "verb", "allowed"),
    [
        pytest.param(rule("*", resources=("pods",)), rec("delete", "pods"), "delete", True,
                     id="verb-wildcard"),
        pytest.param(rule("get", groups=("*",), resources=("pods",)),
                     rec("get", "pods", group="x.io"), "get", True, id="group-wildcard"),
        pytest.param(rule("get", resources=("*",)), rec("get", "pods", "log"), "get", True,
                     id="resource-wildcard-covers-subresources"),
        pytest.param(rule("get", resources=("*/exec",)), rec("get", "pods", "exec"), "get",
                     True, id="star-slash-subresource"),
        pytest.param(rule("get", resources=("*/exec",)), rec("get", "pods"), "get", False,
                     id="star-slash-subresource-not-the-resource"),
        pytest.param(rule("get", resources=("*/exec",)), rec("get", "pods", "execx"), "get",
                     False, id="star-slash-subresource-exact"),
        pytest.param(rule("get", resources=("pods/*",)), rec("get", "pods", "exec"), "get",
                     False, id="resource-slash-star-is-literal"),
        pytest.param(rule("get", resources=("pods",)), rec("get", "pods", "status"), "get",
                     False, id="resource-does-not-cover-its-subresource"),
        pytest.param(rule("patch", resources=("pods/status",)), rec("patch", "pods"), "patch",
                     False, id="subresource-does-not-cover-its-resource"),
        pytest.param(rule("get", resources=("pods",), resource_names=("web",)),
                     rec("get", "pods", name="web"), "get", True, id="resource-name"),
        pytest.param(rule("get", resources=("pods",), resource_names=("web",)),
                     rec("get", "pods", name="db"), "get", False, id="other-name"),
        pytest.param(rule("list", resources=("pods",), resource_names=("web",)),
                     rec("list", "pods"), "list", False, id="names-never-match-a-collection"),
        pytest.param(rule("get", groups=(), non_resource_urls=("/metrics",)),
                     url("get", "/metrics"), "get", True, id="url-exact"),
        pytest.param(rule("get", groups=(), non_resource_urls=("/logs*",)),
                     url("get", "/logs/x"), "get", True, id="url-prefix-star"),
        pytest.param(rule("get", groups=(), non_resource_urls=("*",)),
                     url("get", "/anything"), "get", True, id="url-wildcard"),
        pytest.param(rule("get", groups=(), non_resource_urls=("/metrics",)),
                     url("get", "/metrics/x"), "get", False, id="url-no-implicit-prefix"),
        pytest.param(rule("get", groups=(), non_resource_urls=("*",)), rec("get", "pods"),
                     "get", False, id="url-rule-not-a-resource-rule"),
        pytest.param(rule("get", groups=("*",), resources=("*",)), url("get", "/metrics"),
                     "get", False, id="resource-rule-not-a-url-rule"),
    ],
)  # fmt: skip
def test_allows_matches_like_the_rbac_authorizer(
    granted: PolicyRule, record: RequestRecord, verb: str, allowed: bool
) -> None:
    assert allows((granted,), record, verb) is allowed


def test_discovery_is_allowed_without_any_rule_of_ours() -> None:
    assert disallowed([url("get", "/apis"), url("get", "/livez")], rules=()) == []
    assert disallowed([rec("list", "pods")], rules=()) != []


def test_load_cluster_role_reads_the_repository_file_from_any_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_cluster_role() == load_cluster_role("manifests/rbac/clusterrole.yaml")
    assert len(load_cluster_role()) == 5
