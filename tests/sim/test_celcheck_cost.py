"""The cost estimate of single rules against apiextensions' own figures
(k8s.io/apiextensions-apiserver kubernetes-1.32.0, pkg/apiserver/schema/cel/compilation_test.go,
TestCostEstimation): each case is a schema generator called once without bounds ("calc") and
once with maxItems/maxProperties/maxLength set ("set"); the rule's estimated max cost, before
any cardinality, must be exactly Kubernetes' figure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from probemarker.sim.crd.schema.cel.celcheck import (
    K8S_1_28,
    K8S_1_32,
    Profile,
    compile_expression,
    rule_env,
    schema_decl_type,
)
from probemarker.sim.crd.schema.node import parse_schema

Gen = Callable[[int | None], dict[str, Any]]
COST_LIMIT = 100_000_000


def rule_cost(schema: dict[str, Any], profile: Profile = K8S_1_32) -> int:
    """The max cost of the one rule of `schema` (compiled as Compile does, not a resource root)."""
    node = parse_schema(schema)
    decl = schema_decl_type(node, False, enum_sizes=profile.enum_string_sizes)
    assert decl is not None
    (rule,) = node.rules
    compiled = compile_expression(rule.rule, rule_env(profile, decl, optional_old_self=False), decl)
    assert compiled.error is None, compiled.error
    return compiled.max_cost


def _bound(schema: dict[str, Any], key: str, value: int | None) -> dict[str, Any]:
    return {**schema, key: value} if value is not None else schema


def _scalar(kind: str) -> dict[str, Any]:
    if kind in ("duration", "date", "date-time"):
        return {"type": "string", "format": kind}
    if kind == "int-or-string":
        return {"x-kubernetes-int-or-string": True}
    return {"type": kind}


def _rules(schema: dict[str, Any], rule: str) -> dict[str, Any]:
    return {**schema, "x-kubernetes-validations": [{"rule": rule}]}


def array(kind: str, rule: str) -> Gen:
    return lambda n: _rules(_bound({"type": "array", "items": _scalar(kind)}, "maxItems", n), rule)


def array_of_arrays(kind: str, rule: str) -> Gen:
    items = {"type": "array", "items": {"type": kind}}
    return lambda n: _rules(_bound({"type": "array", "items": items}, "maxItems", n), rule)


REQUIRED_OPTIONAL = {
    "type": "object",
    "properties": {"required": {"type": "string"}, "optional": {"type": "string"}},
    "required": ["required"],
}


def object_array(rule: str) -> Gen:
    return lambda n: _rules(
        _bound({"type": "array", "items": REQUIRED_OPTIONAL}, "maxItems", n), rule
    )


def map_array(kind: str, rule: str) -> Gen:
    items = {"type": "object", "additionalProperties": {"type": kind}}
    return lambda n: _rules(_bound({"type": "array", "items": items}, "maxItems", n), rule)


def map_of(kind: str, rule: str) -> Gen:
    return map_of_items(_scalar(kind), rule)


def map_of_items(items: dict[str, Any], rule: str) -> Gen:
    return lambda n: _rules(
        _bound({"type": "object", "additionalProperties": items}, "maxProperties", n), rule
    )


def string(rule: str, **extra: Any) -> Gen:
    return lambda n: _rules(_bound({"type": "string", **extra}, "maxLength", n), rule)


def nested_spec(rule: str) -> Gen:
    def gen(n: int | None) -> dict[str, Any]:
        values = _bound({"type": "string"}, "maxLength", n)
        obj = {"type": "object", "additionalProperties": values}
        return _rules(_bound(obj, "maxProperties", n), rule)

    return gen


def nested_root(rule: str, *, all_bounded: bool) -> Gen:
    def gen(n: int | None) -> dict[str, Any]:
        inner = _bound(REQUIRED_OPTIONAL, "maxProperties", n if all_bounded else None)
        middle = _bound({"type": "object", "additionalProperties": inner}, "maxProperties", n)
        outer = {"type": "array", "items": middle}
        return _rules(_bound(outer, "maxItems", n if all_bounded else None), rule)

    return gen


def string_list(rule: str) -> Gen:
    def gen(n: int | None) -> dict[str, Any]:
        items = _bound({"type": "string"}, "maxLength", n)
        return _rules(_bound({"type": "array", "items": items}, "maxItems", n), rule)

    return gen


def string_object(rule: str, **fixed: int) -> Gen:
    def gen(n: int | None) -> dict[str, Any]:
        props = {name: _bound({"type": "string"}, "maxLength", n) for name in ("str", "separator")}
        for name, length in fixed.items():
            props[name] = {"type": "string", "maxLength": length}
        if fixed:
            del props["separator"]
        return _rules({"type": "object", "properties": props}, rule)

    return gen


NUMBER_MAP = {"type": "object", "additionalProperties": {"type": "number"}}
NUMBER_ARRAY = {"type": "array", "items": {"type": "number"}}

# name, generator, calc cost (0: unchecked; "exceeds": above COST_LIMIT), bound, set cost
CASES: list[tuple[str, Gen, int | str, int, int]] = [
    ("number array with all", array("number", "self.all(x, true)"), 4718591, 10, 32),
    ("string array with all", array("string", "self.all(x, true)"), 3145727, 20, 62),
    ("boolean array with all", array("boolean", "self.all(x, true)"), 1887437, 5, 17),
    ("array of number arrays with all", array_of_arrays("number", "self.all(x, true)"), 3145727, 100, 302),
    ("array of objects with all", object_array("self.all(x, true)"), 555128, 50, 152),
    ("map of numbers with all", map_of("number", "self.all(x, true)"), 1348169, 10, 32),
    ("map of numbers with has", map_of("number", "has(self.x)"), 0, 100, 0),
    ("map of strings with all", map_of("string", "self.all(x, true)"), 1179647, 3, 11),
    ("map of strings with has", map_of("string", "has(self.x)"), 0, 550, 0),
    ("map of booleans with all", map_of("boolean", "self.all(x, true)"), 943718, 100, 302),
    ("map of booleans with has", map_of("boolean", "has(self.x)"), 0, 1024, 0),
    ("string with contains", string("self.contains('test')"), 314574, 10, 5),
    ("string with startsWith", string("self.startsWith('test')"), 2, 15, 2),
    ("string with endsWith", string("self.endsWith('test')"), 2, 30, 2),
    ("concat string", string('size(self + "hello") > size("hello")'), 314578, 4, 7),
    ("index of array with numbers", array("number", "self[1] == 0.0"), 2, 5000, 2),
    ("index of array with strings", array("string", "self[1] == self[1]"), 314577, 8, 314577),
    ("O(n^2) loop with numbers", array("number", "self.all(x, self.all(y, true))"), "exceeds", 10, 352),
    ("O(n^3) loop with numbers", array("number", "self.all(x, self.all(y, self.all(z, true)))"), "exceeds", 10, 3552),
    ("regex matches simple", string('self.matches("x")'), 314574, 50, 22),
    ("regex matches empty string", string('"".matches("(((((((((())))))))))[0-9]")'), 7, 10, 7),
    ("regex matches empty regex", string('self.matches("")'), 1, 100, 1),
    ("map of strings with value length", nested_spec("self.all(x, x.contains(self[x]))"), 2752507, 10, 72),
    ("set array maxLength to zero", array("number", "self[3] == 0.0"), 2, 0, 2),
    ("set map maxLength to zero", map_of("number", 'self["x"] == 0.0'), 2, 0, 2),
    ("set string maxLength to zero", string('self == "x"'), 2, 0, 1),
    ("set bytes maxLength to zero", string('self == b"x"', format="byte"), 2, 0, 1),
    ("set maxLength greater than estimated maxLength", array("number", "self.all(x, x == 0.0)"), 6291454, 3 * 1024 * 2048, 25165826),
    ("nested types with root rule with all supporting maxLength", nested_root('self.all(x, x["y"].required == "z")', all_bounded=True), 7340027, 10, 72),
    ("nested types with root rule with one supporting maxLength", nested_root('self.all(x, x["y"].required == "z")', all_bounded=False), 7340027, 10, 7340027),
    ("int-or-string array with all", array("int-or-string", "self.all(x, true)"), 4718591, 10, 32),
    ("index of array with int-or-strings", array("int-or-string", "self[0] == 5"), 3, 10, 3),
    ("index of array with booleans", array("boolean", "self[0] == false"), 2, 25, 2),
    ("index of array of objects", object_array("self[0] == null"), 2, 422, 2),
    ("index of array of array of numbers", array_of_arrays("number", "self[0][0] == -1.0"), 3, 51, 3),
    ("array of number maps with all", map_array("number", "self.all(x, x.y == 25.2)"), 6291452, 12, 74),
    ("index of array of number maps", map_array("number", "self[0].x > 2.0"), 4, 3000, 4),
    ("duration array with all", array("duration", "self.all(x, true)"), 2359295, 5, 17),
    ("index of duration array", array("duration", "self[0].getHours() == 2"), 4, 525, 4),
    ("date array with all", array("date", "self.all(x, true)"), 725936, 15, 47),
    ("index of date array", array("date", "self[2].getDayOfMonth() == 13"), 4, 42, 4),
    ("date-time array with all", array("date-time", "self.all(x, true)"), 428963, 25, 77),
    ("index of date-time array", array("date-time", "self[2].getMinutes() == 45"), 4, 99, 4),
    ("map of int-or-strings with all", map_of("int-or-string", "self.all(x, true)"), 1348169, 15, 47),
    ("map of int-or-strings with has", map_of("int-or-string", "has(self.x)"), 0, 5000, 0),
    ("map of objects with all", map_of_items(REQUIRED_OPTIONAL, "self.all(x, true)"), 428963, 20, 62),
    ("map of objects with has", map_of_items(REQUIRED_OPTIONAL, "has(self.x)"), 0, 9001, 0),
    ("map of number maps with all", map_of_items(NUMBER_MAP, "self.all(x, true)"), 1179647, 10, 32),
    ("map of number maps with has", map_of_items(NUMBER_MAP, "has(self.x)"), 0, 101, 0),
    ("map of number arrays with all", map_of_items(NUMBER_ARRAY, "self.all(x, true)"), 1179647, 25, 77),
    ("map of number arrays with has", map_of_items(NUMBER_ARRAY, "has(self.x)"), 0, 40000, 0),
    ("map of durations with all", map_of("duration", "self.all(x, true)"), 1048577, 5, 17),
    ("map of durations with has", map_of("duration", "has(self.x)"), 0, 256, 0),
    ("map of dates with all", map_of("date", "self.all(x, true)"), 524288, 10, 32),
    ("map of dates with has", map_of("date", "has(self.x)"), 0, 65536, 0),
    ("map of date-times with all", map_of("date-time", "self.all(x, true)"), 349526, 25, 77),
    ("map of date-times with has", map_of("date-time", "has(self.x)"), 0, 490, 0),
    ("extended library regex find", string("self.find('[0-9]+') == ''"), 629147, 10, 11),
    ("extended library join", string_list("self.join(' ') == 'aa bb'"), 329853068905, 10, 43),
    ("extended library isSorted", string_list("self.isSorted() == true"), 329854432052, 10, 52),
    ("extended library replace", string_object("self.str.replace(self.before, self.after) == 'does not matter'", before=2, after=4), 629154, 4, 12),
    ("extended library split", string_object("self.str.split(self.separator) == []"), 629160, 10, 22),
    ("extended library lowerAscii", string("self.lowerAscii() == 'lower!'"), 314575, 10, 6),
    ("check cost of size call", map_of("integer", "oldSelf.size() == self.size()"), 5, 10, 5),
    ("check cost of timestamp comparison", map_of("date-time", 'self["a"] == self["b"]'), 8, 7, 8),
    ("check cost of duration comparison", map_of("duration", 'self["c"] == self["d"]'), 8, 42, 8),
    ("enums with maxLength equals to the longest possible value", string("self.contains('A')", enum=["A", "B", "C", "LongValue"]), 2, 1000, 401),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "gen", "calc", "bound", "bounded"), CASES, ids=[c[0] for c in CASES]
)
def test_cost_as_apiextensions_computes_it(
    name: str, gen: Gen, calc: int | str, bound: int, bounded: int
) -> None:
    del name
    unbounded_cost = rule_cost(gen(None))
    if calc == "exceeds":
        assert unbounded_cost >= COST_LIMIT
    elif calc:
        assert unbounded_cost == calc
    if bounded:
        assert rule_cost(gen(bound)) == bounded


@pytest.mark.parametrize(
    ("schema", "cost_128", "cost_132"),
    [
        # has() costs 1 on cel-go v0.16 (Kubernetes 1.28), 0 from Kubernetes 1.29 on.
        pytest.param(map_of("number", "has(self.x)")(None), 2, 1, id="has"),
        # 1.32 bounds an enum string by its longest value; 1.28 by the request size.
        pytest.param(
            string("self.contains('A')", enum=["A", "LongValue"])(None), 314574, 2, id="enum"
        ),
        # cel-go v0.22 sizes a map()/filter() result by its range; v0.16 leaves it unbounded.
        pytest.param(
            array("string", "self.map(x, x).all(y, y == 'a')")(4),
            2**64 - 1,
            85,
            id="chained-macros",
        ),
    ],
)
def test_where_1_28_and_1_32_differ(schema: dict[str, Any], cost_128: int, cost_132: int) -> None:
    assert rule_cost(schema, K8S_1_28) == cost_128
    assert rule_cost(schema, K8S_1_32) == cost_132


@pytest.mark.parametrize(
    ("pattern", "cost"),
    [
        (r"'\x41\x41\x41\x41\x41'", 2),  # AAAAA: 5 code points, ceil(5 x 0.25) = 2
        (r"r'\x41\x41\x41\x41\x41'", 5),  # raw: 20 characters, ceil(20 x 0.25) = 5
        (r"'\u00e9\u00e9\u00e9\u00e9\u00e9'", 2),  # five code points, not ten bytes
        ("'''aaaaa'''", 2),
    ],
)
def test_literal_sizes_count_code_points_after_unescaping(pattern: str, cost: int) -> None:
    # "".matches(p) costs ceil((0 + 1) x 0.1) x ceil(len(p) x 0.25)
    assert rule_cost(string(f'"".matches({pattern})')(None)) == cost
