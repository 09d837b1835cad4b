"""The CRD and the Python validator agree on every document of the corpus.

The CRD side is evaluated the way kube-apiserver does it
(probemarker.sim.crd.schema.structural: pruning, defaulting, OpenAPI validation and the CEL
rules), plus kubectl's default strict field validation (a field the schema would prune is
an error). Every invalid file states the errors the validator must give (`# expect: path:
text`).
If a CEL rule or a validator rule is removed, the file that tests it fails here.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from probemarker.api.crd import build_crd
from probemarker.api.validation import validate_marker, validate_marker_update
from probemarker.sim.crd.schema.structural import StructuralSchema

CORPUS = Path(__file__).resolve().parents[2] / "data" / "markers"
VALID = sorted((CORPUS / "valid").glob("*.yaml"))
INVALID = sorted((CORPUS / "invalid").glob("*.yaml"))
EXPECT = re.compile(r"^# expect: (?P<path>.*?): (?P<text>.+)$", re.MULTILINE)


@pytest.fixture(scope="module")
def schema() -> StructuralSchema:
    return StructuralSchema.from_crd_version(build_crd()["spec"]["versions"][0])


def load(path: Path) -> dict[str, Any]:
    body = yaml.safe_load(path.read_text())
    assert isinstance(body, dict), f"{path.name}: a corpus file holds one object"
    return body


def crd_problems(schema: StructuralSchema, body: dict[str, Any], old: Any = None) -> list[str]:
    _, errors = schema.admit(copy.deepcopy(body), old=old)
    unknown = [f'strict decoding error: unknown field "{p}"' for p in schema.unknown_fields(body)]
    return [str(e) for e in errors] + unknown


def test_corpus_is_large_enough() -> None:
    assert len(VALID) >= 10
    assert len(VALID) + len(INVALID) >= 40


@pytest.mark.parametrize("path", VALID, ids=[p.stem for p in VALID])
def test_valid(path: Path, schema: StructuralSchema) -> None:
    body = load(path)
    assert validate_marker(body) == [], "the Python validator refused a valid marker"
    assert crd_problems(schema, body) == [], "the CRD refused a valid marker"


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_invalid(path: Path, schema: StructuralSchema) -> None:
    text = path.read_text()
    expected = [(m["path"], m["text"]) for m in EXPECT.finditer(text)]
    assert expected, f"{path.name} states no '# expect: path: message' line"
    errors = validate_marker(load(path))
    assert len(errors) == len(expected), (
        f"expected {len(expected)} errors, got {[str(e) for e in errors]}"
    )
    for field, message in expected:
        assert any(e.path == field and message in e.message for e in errors), (
            f"validator did not report {field}: {message!r}; it said {[str(e) for e in errors]}"
        )
    assert crd_problems(schema, load(path)), "the CRD admitted a marker the validator refuses"


def test_selector_is_immutable_on_both_sides(schema: StructuralSchema) -> None:
    old = load(VALID[0])
    stored, errors = schema.admit(old)
    assert errors == []
    new = copy.deepcopy(old)
    new["spec"]["selector"] = {"matchLabels": {"changed": "yes"}}
    assert [e.path for e in validate_marker_update(old, new)] == ["spec.selector"]
    assert any("immutable" in p for p in crd_problems(schema, new, old=stored))
    same = copy.deepcopy(old)
    assert validate_marker_update(old, same) == []
    assert crd_problems(schema, same, old=stored) == []


def test_crd_applies_the_kubelet_defaults(schema: StructuralSchema) -> None:
    body = load(VALID[0])
    for probe in body["spec"]["probes"]:
        for field in (
            "initialDelaySeconds",
            "timeoutSeconds",
            "periodSeconds",
            "successThreshold",
            "failureThreshold",
        ):
            probe["probe"].pop(field, None)
    admitted, _ = schema.admit(body)
    timing = {
        k: v
        for k, v in admitted["spec"]["probes"][0]["probe"].items()
        if k.endswith(("Seconds", "Threshold"))
    }
    assert timing == {
        "initialDelaySeconds": 0,
        "timeoutSeconds": 1,
        "periodSeconds": 10,
        "successThreshold": 1,
        "failureThreshold": 3,
    }
