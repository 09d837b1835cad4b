"""api/template.py: the `{{.Result}}` grammar and rendering."""

from __future__ import annotations

import re

import pytest

from probemarker.api import rules
from probemarker.api.fields import matches
from probemarker.api.template import render, render_pieces, template_problems, uses_result


@pytest.mark.parametrize(
    ("value", "uses", "problem"),
    [
        pytest.param("true", False, False, id="plain"),
        pytest.param("", False, False, id="empty"),
        pytest.param("{{.Result}}", True, False, id="action"),
        pytest.param("{{ .Result }}", True, False, id="go-spaces"),
        pytest.param("{{\t.Result\n}}", True, False, id="go-tab-and-newline"),
        pytest.param("map-{{.Result}}-{{.Result}}", True, False, id="twice"),
        pytest.param("a }} b", False, False, id="lone-close-is-text"),
        pytest.param("a { b", False, False, id="lone-brace-is-text"),
        pytest.param("{{.Message}}", False, True, id="other-field"),
        pytest.param("{{.result}}", False, True, id="case-sensitive"),
        pytest.param("{{- .Result -}}", False, True, id="trim-markers"),
        pytest.param("{{.Result | printf}}", False, True, id="pipeline"),
        pytest.param("{{/* c */}}", False, True, id="comment"),
        pytest.param("{{ .Result", False, True, id="unclosed"),
        pytest.param("{{{.Result}}", True, True, id="three-braces"),
        pytest.param("ok {{.Result}} then {{", True, True, id="trailing-open"),
    ],
)
def test_grammar(value: str, uses: bool, problem: bool) -> None:
    assert uses_result(value) is uses
    assert bool(template_problems(value)) is problem
    # The CRD's pattern for annotations says the same as the validator.
    assert matches(rules.ANNOTATION_TEMPLATE_RE, value) is not problem


def test_problem_names_the_spot_and_the_fix() -> None:
    [problem] = template_problems("players: {{ .Players }}")
    assert "'{{ .Players }}'" in problem
    assert "only {{.Result}} may appear between {{ and }}" in problem


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        pytest.param("{{.Result}}", True, id="action-alone"),
        pytest.param("map-{{.Result}}", True, id="prefix"),
        pytest.param("{{.Result}}.v1", True, id="suffix"),
        pytest.param("-{{.Result}}", False, id="leading-dash"),
        pytest.param("{{.Result}}_", False, id="trailing-underscore"),
        pytest.param("a b{{.Result}}", False, id="space"),
        pytest.param("x" * 62 + "{{.Result}}", True, id="63-units"),
        pytest.param("x" * 63 + "{{.Result}}", False, id="64-units"),
        pytest.param("{{.Foo}}", False, id="other-action"),
    ],
)
def test_label_template_pattern(value: str, valid: bool) -> None:
    assert matches(rules.LABEL_TEMPLATE_RE, value) is valid


@pytest.mark.parametrize(
    ("template", "result", "rendered"),
    [
        pytest.param("{{.Result}}", "de_dust2", "de_dust2", id="whole"),
        pytest.param("players-{{ .Result }}", "12", "players-12", id="spaces"),
        pytest.param("{{.Result}}/{{.Result}}", "a", "a/a", id="twice"),
        pytest.param("static", "ignored", "static", id="no-action"),
        pytest.param("{{.Result}}", "", "", id="empty-result"),
        pytest.param("{{.Result}}", r"\1 $0 {{.Result}}", r"\1 $0 {{.Result}}", id="literal"),
    ],
)
def test_render(template: str, result: str, rendered: str) -> None:
    assert render(template, result) == rendered
    assert "".join(render_pieces(template, result)) == rendered


def test_the_action_pattern_is_the_same_for_python_and_the_crd() -> None:
    # One source: the template module compiles the rules' pattern.
    assert re.compile(rules.RESULT_ACTION_RE).fullmatch("{{ .Result }}")
