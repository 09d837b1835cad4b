"""Label and field selectors parse and match as k8s.io/apimachinery's do."""

from __future__ import annotations

import pytest

from probemarker.sim.errors import BadRequest
from probemarker.sim.store.selectors import (
    field_value,
    parse_field_selector,
    parse_label_selector,
    supported_field_labels,
)

LABELS = {"app": "web", "tier": "front", "version": "3", "empty": ""}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        pytest.param("", True, id="empty-matches-all"),
        pytest.param("app=web", True, id="equals"),
        pytest.param("app==web", True, id="double-equals"),
        pytest.param("app=db", False, id="equals-other"),
        pytest.param("app!=db", True, id="not-equals"),
        pytest.param("missing!=x", True, id="not-equals-missing-key"),
        pytest.param("app in (web, db)", True, id="in"),
        pytest.param("app in (db)", False, id="in-miss"),
        pytest.param("missing in (a)", False, id="in-missing-key"),
        pytest.param("app notin (db)", True, id="notin"),
        pytest.param("missing notin (db)", True, id="notin-missing-key"),
        pytest.param("app notin (web)", False, id="notin-miss"),
        pytest.param("app", True, id="exists"),
        pytest.param("!app", False, id="not-exists"),
        pytest.param("!missing", True, id="not-exists-missing"),
        pytest.param("version>2", True, id="gt"),
        pytest.param("version<3", False, id="lt"),
        pytest.param("app>2", False, id="gt-non-integer-label"),
        pytest.param("missing>2", False, id="gt-missing"),
        pytest.param("app=web,tier=front", True, id="and"),
        pytest.param("app=web,tier=back", False, id="and-miss"),
        pytest.param("empty=", True, id="empty-value"),
        pytest.param("empty in ()", True, id="empty-set-means-empty-string"),
        pytest.param("x in (in)", False, id="keyword-as-value"),
        pytest.param("  app  =  web  ", True, id="whitespace"),
        pytest.param("example.com/app", False, id="prefixed-key"),
    ],
)
def test_label_selector_matches(selector: str, expected: bool) -> None:
    assert parse_label_selector(selector).matches(LABELS) is expected


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        pytest.param(
            "app in", "unable to parse requirement: found '' expected: '('", id="in-without-values"
        ),
        pytest.param(
            "app in (a",
            "unable to parse requirement: found '', expected: ',' or ')'",
            id="unclosed",
        ),
        pytest.param("app=a,", "found '', expected: identifier after ','", id="trailing-comma"),
        pytest.param("=a", "found '=', expected: !, identifier, or 'end of string'", id="no-key"),
        pytest.param(
            "app a",
            "unable to parse requirement: found 'a', expected: in, notin, =, ==, !=, gt, lt",
            id="no-operator",
        ),
        pytest.param("a=b c", "found 'c', expected: ',' or 'end of string'", id="junk-after"),
        pytest.param(
            "a>b",
            "unable to parse requirement: values[0]: Invalid value: \"b\": for 'Gt', 'Lt' operators, the value must be an integer",
            id="gt-non-integer",
        ),
        pytest.param(
            "!a=b",
            "found '=', expected: ',' or 'end of string'",
            id="not-with-operator",
        ),
        pytest.param(
            "a=>b",
            "unable to parse requirement: found '>', expected: identifier",
            id="double-operator",
        ),
    ],
)
def test_label_selector_syntax_errors(selector: str, message: str) -> None:
    with pytest.raises(BadRequest) as err:
        parse_label_selector(selector)
    assert err.value.message == message
    assert err.value.code == 400


@pytest.mark.parametrize(
    "selector",
    [
        pytest.param("Bad_Key_=x", id="name-ends-with-underscore"),
        pytest.param("a/b/c=x", id="two-slashes"),
        pytest.param("UPPER.com/x=y", id="uppercase-prefix"),
        pytest.param("a=bad@value", id="bad-value"),
        pytest.param("a=" + "v" * 64, id="value-too-long"),
    ],
)
def test_label_selector_invalid_keys_and_values(selector: str) -> None:
    with pytest.raises(BadRequest, match="unable to parse requirement"):
        parse_label_selector(selector)


POD = {
    "kind": "Pod",
    "metadata": {"name": "web-0", "namespace": "ns"},
    "spec": {"nodeName": "node-a", "restartPolicy": "Always"},
    "status": {"phase": "Running", "podIPs": [{"ip": "127.0.0.5"}], "podIP": "127.0.0.5"},
}
EVENT = {
    "kind": "Event",
    "metadata": {"name": "e1", "namespace": "ns"},
    "involvedObject": {"kind": "Pod", "name": "web-0", "uid": "u1"},
    "source": {"component": "kubelet"},
    "reason": "Started",
    "type": "Normal",
}


@pytest.mark.parametrize(
    ("obj", "selector", "expected"),
    [
        pytest.param(POD, "spec.nodeName=node-a", True, id="node-name"),
        pytest.param(POD, "spec.nodeName==node-b", False, id="node-name-other"),
        pytest.param(POD, "spec.nodeName!=node-b", True, id="not-equal"),
        pytest.param(POD, "status.phase=Running,metadata.name=web-0", True, id="and"),
        pytest.param(POD, "metadata.namespace=ns", True, id="namespace"),
        pytest.param(POD, "status.podIP=127.0.0.5", True, id="pod-ip"),
        pytest.param(POD, "spec.hostNetwork=false", True, id="host-network-default"),
        pytest.param(POD, "spec.schedulerName=", True, id="missing-reads-empty"),
        pytest.param(
            EVENT, "involvedObject.name=web-0,involvedObject.kind=Pod", True, id="event-involved"
        ),
        pytest.param(EVENT, "source=kubelet", True, id="event-source"),
        pytest.param(EVENT, "involvedObject.uid=u2", False, id="event-uid-miss"),
    ],
)
def test_field_selector_matches(obj: dict[str, object], selector: str, expected: bool) -> None:
    parsed = parse_field_selector(selector, supported=supported_field_labels(str(obj["kind"])))
    assert parsed.matches(lambda f: field_value(obj, f)) is expected


@pytest.mark.parametrize(
    ("selector", "kind", "message"),
    [
        pytest.param(
            "spec.foo=x", "Pod", "field label not supported: spec.foo", id="unsupported-pod"
        ),
        pytest.param(
            "spec.nodeName=x",
            "PodProbeMarker",
            "field label not supported: spec.nodeName",
            id="unsupported-cr",
        ),
        pytest.param(
            "nonsense",
            "Pod",
            "invalid selector: 'nonsense'; can't understand 'nonsense'",
            id="no-operator",
        ),
        pytest.param(
            "metadata.name=a=b",
            "Pod",
            "invalid field selector: unescaped character in value: 61",
            id="unescaped-equals",
        ),
        pytest.param(
            "metadata.name=a\\x",
            "Pod",
            "invalid field selector: invalid escape sequence: \\x",
            id="bad-escape",
        ),
    ],
)
def test_field_selector_errors(selector: str, kind: str, message: str) -> None:
    with pytest.raises(BadRequest) as err:
        parse_field_selector(
            selector, supported=supported_field_labels(kind, "x.io" if kind != "Pod" else "")
        )
    assert err.value.message == message


def test_field_selector_escaped_comma_is_data() -> None:
    parsed = parse_field_selector("metadata.name=a\\,b")
    assert parsed.matches(lambda f: "a,b")
