"""validate_marker on edge cases the YAML corpus cannot express, and the name rules."""

from __future__ import annotations

from typing import Any

import pytest

from probemarker.api import names, rules
from probemarker.api.validation import validate_marker, validate_marker_update


def doc(selector: Any = None) -> dict[str, Any]:
    return {
        "apiVersion": "probemarker.io/v1alpha1",
        "kind": "PodProbeMarker",
        "metadata": {"name": "m"},
        "spec": {
            "selector": selector if selector is not None else {"matchLabels": {"app": "a"}},
            "probes": [
                {
                    "name": "p",
                    "containerName": "c",
                    "probe": {"tcpSocket": {"port": 80}},
                    "podConditionType": "example.com/Up",
                }
            ],
        },
    }


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(None, id="null"),
        pytest.param([1, 2], id="list"),
        pytest.param("text", id="scalar"),
    ],
)
def test_garbage_documents_give_one_clear_error(garbage: Any) -> None:
    errors = validate_marker(garbage)
    assert len(errors) == 1
    assert "must be an object" in errors[0].message


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        pytest.param(("spec",), [], "spec: must be an object", id="spec-list"),
        pytest.param(("spec", "probes"), {"a": 1}, "spec.probes: must be a list", id="probes-map"),
        pytest.param(("spec", "probes"), [7], "spec.probes[0]: must be an object", id="probe-int"),
        pytest.param(
            ("spec", "selector", "matchLabels"),
            {"app": 3},
            "spec.selector.matchLabels[app]: must be a string",
            id="label-int",
        ),
    ],
)
def test_wrong_types_name_the_field(path: tuple[str, ...], value: Any, expected: str) -> None:
    d = doc()
    target = d
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert expected in [str(e)[: len(expected)] for e in validate_marker(d)]


def test_float_integers_are_accepted_like_json_numbers() -> None:
    d = doc()
    d["spec"]["probes"][0]["probe"]["periodSeconds"] = 5.0
    assert validate_marker(d) == []
    d["spec"]["probes"][0]["probe"]["periodSeconds"] = 5.5
    assert [e.path for e in validate_marker(d)] == ["spec.probes[0].probe.periodSeconds"]


def test_booleans_are_not_integers() -> None:
    d = doc()
    d["spec"]["probes"][0]["probe"]["periodSeconds"] = True
    assert "must be an integer, got boolean True" in str(validate_marker(d)[0])


def test_selector_is_immutable_on_update() -> None:
    old, new = doc(), doc({"matchLabels": {"app": "b"}})
    assert [str(e) for e in validate_marker_update(old, new)] == [
        f"spec.selector: {rules.MSG_SELECTOR_IMMUTABLE}"
    ]
    assert validate_marker_update(old, doc()) == []


def test_update_reports_new_errors_too() -> None:
    new = doc()
    new["spec"]["probes"] = []
    assert [e.path for e in validate_marker_update(doc(), new)] == ["spec.probes"]


def test_annotation_bounds_keep_a_policy_under_the_pod_annotation_limit() -> None:
    # The CRD cannot sum sizes, so the per-entry bounds must imply Kubernetes' total cap.
    worst = rules.MAX_POLICY_ENTRIES * (
        rules.MAX_QUALIFIED_NAME_LENGTH + rules.MAX_ANNOTATION_VALUE_BYTES
    )
    assert worst <= rules.TOTAL_ANNOTATION_BYTES


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        pytest.param("app", True, id="plain"),
        pytest.param("example.com/idle", True, id="prefixed"),
        pytest.param("app.kubernetes.io/name", True, id="k8s-subdomain"),
        pytest.param("a" * 63, True, id="name-63"),
        pytest.param("a" * 64, False, id="name-64"),
        pytest.param(("a" * 63 + ".") * 3 + "b" * 61 + "/x", True, id="prefix-253"),
        pytest.param(("a" * 63 + ".") * 3 + "b" * 62 + "/x", False, id="prefix-254"),
        pytest.param("Example.com/x", False, id="upper-prefix"),
        pytest.param("a/b/c", False, id="two-slashes"),
        pytest.param("/x", False, id="empty-prefix"),
        pytest.param("x/", False, id="empty-name"),
        pytest.param("-x", False, id="leading-dash"),
        pytest.param("", False, id="empty"),
    ],
)
def test_label_keys(key: str, ok: bool) -> None:
    assert (names.qualified_name_problems(key) == []) is ok


def test_annotation_keys_allow_upper_case_prefix() -> None:
    assert names.qualified_name_problems("Example.COM/x", any_case_prefix=True) == []


@pytest.mark.parametrize(
    ("port", "ok"),
    [
        pytest.param(1, True, id="1"),
        pytest.param(65535, True, id="65535"),
        pytest.param(0, False, id="0"),
        pytest.param(65536, False, id="65536"),
        pytest.param("http", True, id="name"),
        pytest.param("h2c-metrics", True, id="name-dash"),
        pytest.param("a" * 15, True, id="name-15"),
        pytest.param("a" * 16, False, id="name-16"),
        pytest.param("8080", False, id="digits-only"),
        pytest.param("my--port", False, id="double-dash"),
        pytest.param("-http", False, id="leading-dash"),
        pytest.param("HTTP", False, id="upper"),
    ],
)
def test_ports(port: int | str, ok: bool) -> None:
    assert (names.port_problems(port) == []) is ok


def test_annotation_values_count_bytes() -> None:
    assert names.annotation_value_problems("é" * (rules.MAX_ANNOTATION_VALUE_BYTES // 2)) == []
    assert names.annotation_value_problems("é" * (rules.MAX_ANNOTATION_VALUE_BYTES // 2 + 1))


def test_non_string_keys_are_named() -> None:
    errors = validate_marker({1: "x"})
    assert [str(e) for e in errors] == ["keys must be strings, got integer 1"]


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        pytest.param("a\r\nb", '"a\\r\\nb"', id="crlf"),
        pytest.param("\x1b[31mred", '"\\x1b[31mred"', id="ansi-escape"),
        pytest.param("x\u202ey", '"x\\u202ey"', id="bidi-override"),
        pytest.param("caf\u00e9", '"caf\u00e9"', id="printable-unicode-kept"),
    ],
)
def test_hostile_values_are_escaped_in_messages(value: str, shown: str) -> None:
    d = doc()
    d["spec"]["probes"][0]["probe"]["tcpSocket"]["port"] = value
    (error,) = validate_marker(d)
    assert error.message.endswith(f"got {shown}")
    assert "\n" not in str(error)
    assert "\x1b" not in str(error)


@pytest.mark.parametrize(
    ("selector", "policies", "paths"),
    [
        pytest.param(
            {"matchLabels": {"app": "a"}},
            [{"state": "Failed", "labels": {"app": "b", "other": "c"}}],
            ["spec.probes[0].markerPolicy[0].labels"],
            id="matchlabels-key",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "drained", "operator": "DoesNotExist"}]},
            [
                {"state": "Succeeded", "labels": {"drained": "false"}},
                {"state": "Failed", "labels": {"drained": "true"}},
            ],
            ["spec.probes[0].markerPolicy[0].labels", "spec.probes[0].markerPolicy[1].labels"],
            id="expression-key-both-states",
        ),
        pytest.param(
            {"matchLabels": {"app": "a"}},
            [{"state": "Failed", "annotations": {"app": "b"}}],
            [],
            id="annotations-are-not-read",
        ),
        pytest.param(
            {"matchLabels": {"app": "a"}, "matchExpressions": [None, {"key": 3}, "x"]},
            ["x", {"state": "Failed", "labels": "app"}, {"state": "Failed", "labels": {"b": 1}}],
            [],
            id="ill-typed-parts-are-left-to-their-own-errors",
        ),
    ],
)
def test_a_policy_must_not_write_a_label_the_selector_reads(
    selector: Any, policies: list[Any], paths: list[str]
) -> None:
    body = doc(selector)
    body["spec"]["probes"][0]["markerPolicy"] = policies
    found = [e for e in validate_marker(body) if rules.MSG_SELECTOR_LABEL_WRITTEN in e.message]
    assert [e.path for e in found] == paths
