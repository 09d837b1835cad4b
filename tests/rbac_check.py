"""Would the daemon's ClusterRole allow these requests? Checked as kube-apiserver's RBAC
authorizer checks them, against the sim's request accounting.

Stage: a test helper (integration tests call it on `sim.accounting.records`). Input: the
rules of `manifests/rbac/clusterrole.yaml` and `RequestRecord`s (verb, group, resource,
subresource, name, path). Output: one readable line per request the role would refuse;
an empty list means a real API server would have let every request through.

Matching follows plugin/pkg/auth/authorizer/rbac/rbac.go (`RuleAllows`) and
pkg/apis/rbac/v1/evaluation_helpers.go:
- a resource request is allowed when one rule matches all of: the verb (or `*`), the
  API group (or `*`), the resource as `resource/subresource` (or `*`, or `*/subresource`),
  and the name when the rule lists `resourceNames` (a request without a name, such as
  list or create, never matches a rule that lists names);
- a non-resource request (discovery, /version, /healthz: the verb is the lower-cased
  HTTP method) is allowed when a rule's `nonResourceURLs` holds the path, `*`, or a
  prefix ending in `*`. The daemon's role has none; the cluster roles every
  authenticated user is bound to by default (bootstrappolicy/policy.go) do:
  `system:discovery` (group system:authenticated) and `system:public-info-viewer`
  (system:authenticated and system:unauthenticated), both `get` only. Anything else
  outside the resource API is reported.
- connect requests on pods/exec, pods/attach and pods/portforward: a WebSocket upgrade
  is a GET, authorised as `get`; from Kubernetes 1.35 the pod registry also requires
  `create` on the same subresource (pkg/registry/core/pod/rest/subresources.go calls
  `ensureAuthorizedForVerb(ctx, authorizer, "create")` behind the feature gate
  AuthorizePodWebsocketUpgradeCreatePermission, beta and on by default from 1.35). A
  `create` request (SPDY's POST) needs `create` only. We support 1.28 and later, so a
  `get` needs both.

Invariants: pure functions (reading the role's YAML is the only I/O, in
`load_cluster_role`); every record is judged, whatever its status code, because
authorization comes before anything else the API server does with a request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from probemarker.sim.server.harness.accounting import RequestRecord

__all__ = [
    "CLUSTER_ROLE",
    "CONNECT_SUBRESOURCES",
    "DEFAULT_ROLES",
    "REPO",
    "PolicyRule",
    "allows",
    "disallowed",
    "load_cluster_role",
    "needed_verbs",
    "rules_of",
]

REPO = Path(__file__).resolve().parent.parent
CLUSTER_ROLE = "manifests/rbac/clusterrole.yaml"

# pods' connect subresources that kube-apiserver 1.35+ also authorises as `create`.
CONNECT_SUBRESOURCES = frozenset({"exec", "attach", "portforward"})


@dataclass(frozen=True, slots=True)
class PolicyRule:
    """One `rules[]` entry of a (Cluster)Role, as rbac/v1 spells it."""

    verbs: tuple[str, ...]
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()


# The default cluster roles every authenticated identity holds (policy.go); only their
# non-resource rules, which are all they have.
DEFAULT_ROLES: Mapping[str, tuple[PolicyRule, ...]] = {
    "system:discovery": (
        PolicyRule(
            verbs=("get",),
            non_resource_urls=(
                "/livez", "/readyz", "/healthz", "/version", "/version/",
                "/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*",
            ),
        ),
    ),
    "system:public-info-viewer": (
        PolicyRule(
            verbs=("get",),
            non_resource_urls=("/livez", "/readyz", "/healthz", "/version", "/version/"),
        ),
    ),
}  # fmt: skip


def _strings(rule: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = rule.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"rules[].{key} must be a list of strings, not {value!r}")
    return tuple(value)


def rules_of(role: Mapping[str, Any]) -> tuple[PolicyRule, ...]:
    """The rules of a parsed Role or ClusterRole object."""
    if role.get("kind") not in ("Role", "ClusterRole"):
        raise ValueError(f"not a Role or ClusterRole: kind {role.get('kind')!r}")
    return tuple(
        PolicyRule(
            verbs=_strings(rule, "verbs"),
            api_groups=_strings(rule, "apiGroups"),
            resources=_strings(rule, "resources"),
            resource_names=_strings(rule, "resourceNames"),
            non_resource_urls=_strings(rule, "nonResourceURLs"),
        )
        for rule in role.get("rules") or []
    )


def load_cluster_role(path: str | Path = CLUSTER_ROLE) -> tuple[PolicyRule, ...]:
    """The rules of the ClusterRole in `path` (relative paths from the repository root)."""
    file = Path(path)
    role = yaml.safe_load((file if file.is_absolute() else REPO / file).read_text())
    if not isinstance(role, dict):
        raise ValueError(f"{path}: not a YAML mapping")
    return rules_of(role)


def _verb_matches(rule: PolicyRule, verb: str) -> bool:
    return "*" in rule.verbs or verb in rule.verbs


def _resource_matches(rule: PolicyRule, combined: str, subresource: str) -> bool:
    return any(
        granted in ("*", combined) or (bool(subresource) and granted == f"*/{subresource}")
        for granted in rule.resources
    )


def _url_matches(rule: PolicyRule, path: str) -> bool:
    return any(
        url in ("*", path) or (url.endswith("*") and path.startswith(url.rstrip("*")))
        for url in rule.non_resource_urls
    )


def allows(rules: Iterable[PolicyRule], record: RequestRecord, verb: str) -> bool:
    """Whether one rule lets `verb` through for the request `record` describes."""
    if not record.resource:
        return any(_verb_matches(rule, verb) and _url_matches(rule, record.path) for rule in rules)
    combined = f"{record.resource}/{record.subresource}" if record.subresource else record.resource
    return any(
        _verb_matches(rule, verb)
        and ("*" in rule.api_groups or record.group in rule.api_groups)
        and _resource_matches(rule, combined, record.subresource)
        and (not rule.resource_names or record.name in rule.resource_names)
        for rule in rules
    )


def needed_verbs(record: RequestRecord) -> tuple[str, ...]:
    """The verbs kube-apiserver (1.28 to 1.35+) authorises for this request."""
    connect = (
        record.resource == "pods"
        and not record.group
        and record.subresource in CONNECT_SUBRESOURCES
    )
    if connect and record.verb == "get":
        return ("get", "create")
    return (record.verb,)


def _describe(record: RequestRecord) -> str:
    if not record.resource:
        return f"{record.verb} {record.path} (non-resource URL)"
    what = f"{record.resource}/{record.subresource}" if record.subresource else record.resource
    name = f" {record.name!r}" if record.name else ""
    where = f" in namespace {record.namespace!r}" if record.namespace else " (cluster-wide)"
    return f"{record.verb} {what}{name} in API group {record.group!r}{where}"


def disallowed(
    records: Iterable[RequestRecord], *, rules: Sequence[PolicyRule] | None = None
) -> list[str]:
    """One line per request the role (default: the daemon's ClusterRole plus the default
    discovery roles) would refuse, in the order the requests were made."""
    granted = tuple(load_cluster_role() if rules is None else rules)
    granted += tuple(rule for role in DEFAULT_ROLES.values() for rule in role)
    lines = []
    for record in records:
        missing = [verb for verb in needed_verbs(record) if not allows(granted, record, verb)]
        if missing:
            extra = ""
            if missing != [record.verb]:
                extra = " (kube-apiserver 1.35+ also authorises a WebSocket upgrade as create)"
            lines.append(
                f"{_describe(record)} [HTTP {record.code}]: no rule grants "
                f"{' and '.join(missing)}{extra}"
            )
    return lines
