"""The CRD real API servers refused, judged by the sim's CEL admission (celadmit) as they judged
it: kube-apiserver 1.28 and 1.32 both answered, for tests/data/crds/podprobemarkers-refused.yaml
without the description of `metadata` (which stops them before CEL, see
test_project_crd_install.py), that each int-or-string port rule is 13.1x over the per-rule budget and the whole schema 2.7x
over the CRD budget (with an annotations rule of markerPolicy among the contributors); without
the two port rules they accepted it. Also observed on real servers and checked here: maxLength
on an int-or-string field does not lower the cost, map keys cost as empty strings, and
`string(int)` in a messageExpression is costed as unbounded.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from probemarker.sim.crd.schema.cel.celcheck import K8S_1_28, K8S_1_32, Profile
from probemarker.sim.crd.schema.node import parse_schema
from probemarker.sim.crd.validation import celadmit
from probemarker.sim.crd.validation.definition import validate_crd

REPO = Path(__file__).resolve().parents[2]
REFUSED_CRD = REPO / "tests" / "data" / "crds" / "podprobemarkers-refused.yaml"
SCHEMA = "spec.validation.openAPIV3Schema"
SPEC = f"{SCHEMA}.properties[spec]"
PROBES = f"{SPEC}.properties[probes]"
PROBE = f"{PROBES}.items.properties[probe]"
POLICY = f"{PROBES}.items.properties[markerPolicy].items"
HTTP_PORT = f"{PROBE}.properties[httpGet].properties[port].x-kubernetes-validations[0].rule"
TCP_PORT = f"{PROBE}.properties[tcpSocket].properties[port].x-kubernetes-validations[0].rule"
TRY = (
    "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, "
    "maps, and strings are declared)"
)
CONTRIBUTED = (
    "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire "
    "OpenAPIv3 schema"
)
PORT_RULE = (
    "type(self) == int ? (self >= 1 && self <= 65535) : (self.matches('^[a-z0-9]([a-z0-9-]{0,13}"
    "[a-z0-9])?$') && self.matches('[a-z]') && !self.contains('--'))"
)


def before_fix_crd() -> dict[str, Any]:
    """The refused CRD without the description on `metadata`."""
    crd = yaml.safe_load(REFUSED_CRD.read_text())
    del crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["metadata"][
        "description"
    ]
    assert isinstance(crd, dict)
    return crd


def before_fix() -> dict[str, Any]:
    schema = before_fix_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert isinstance(schema, dict)
    return schema


def without_port_rules(schema: dict[str, Any]) -> dict[str, Any]:
    schema = copy.deepcopy(schema)
    handlers = schema["properties"]["spec"]["properties"]["probes"]["items"]["properties"]
    for handler in ("httpGet", "tcpSocket"):
        del handlers["probe"]["properties"][handler]["properties"]["port"][
            "x-kubernetes-validations"
        ]
    return schema


def messages(schema: dict[str, Any], profile: Profile = K8S_1_32) -> list[str]:
    errors = celadmit.validate_schema_rules(parse_schema(schema), SCHEMA, profile=profile)
    return [e.message for e in errors]


REFUSED = [
    f"{HTTP_PORT}: Forbidden: estimated rule cost exceeds budget by factor of 13.1x {TRY}",
    f"{TCP_PORT}: Forbidden: estimated rule cost exceeds budget by factor of 13.1x {TRY}",
    f"{HTTP_PORT}: {CONTRIBUTED}",
    f"{TCP_PORT}: {CONTRIBUTED}",
    f"{POLICY}.properties[annotations].x-kubernetes-validations[1].rule: {CONTRIBUTED}",
    f"{SCHEMA}: Forbidden: x-kubernetes-validations estimated rule cost total for entire "
    f"OpenAPIv3 schema exceeds budget by factor of 2.7x {TRY}",
]


@pytest.mark.parametrize("profile", [K8S_1_28, K8S_1_32], ids=["1.28", "1.32"])
def test_the_before_fix_crd_is_refused_as_real_servers_refused_it(profile: Profile) -> None:
    assert messages(before_fix(), profile) == REFUSED


@pytest.mark.parametrize("profile", [K8S_1_28, K8S_1_32], ids=["1.28", "1.32"])
def test_without_the_port_rules_it_is_accepted(profile: Profile) -> None:
    assert messages(without_port_rules(before_fix()), profile) == []


def test_the_figures_of_every_rule() -> None:
    """What each rule of the refused CRD costs on 1.32 (cost x cardinality), for docs/sim.md."""
    report = celadmit.estimate_rule_costs(parse_schema(before_fix()), SCHEMA)
    selector, items = f"{SPEC}.properties[selector]", f"{PROBES}.items.properties"
    rule = "x-kubernetes-validations"
    assert [(r.path, r.cost) for r in report.rules] == [
        (f"{selector}.properties[matchLabels].{rule}[0].rule", 1282),
        (f"{selector}.properties[matchLabels].{rule}[1].rule", 11010),
        (f"{selector}.properties[matchExpressions].items.{rule}[0].rule", 138400),
        (f"{selector}.properties[matchExpressions].items.{rule}[1].rule", 700576),
        (f"{selector}.properties[matchExpressions].items.{rule}[2].rule", 640),
        (f"{selector}.properties[matchExpressions].items.{rule}[3].rule", 672),
        (f"{selector}.{rule}[0].rule", 10),
        (f"{selector}.{rule}[1].rule", 2),
        (f"{PROBE}.properties[exec].properties[command].{rule}[0].rule", 224),
        (f"{PROBE}.properties[exec].{rule}[0].rule", 64),
        (HTTP_PORT, 130862592),
        (f"{PROBE}.properties[httpGet].{rule}[0].rule", 64),
        (TCP_PORT, 130862592),
        (f"{PROBE}.properties[tcpSocket].{rule}[0].rule", 64),
        (f"{PROBE}.properties[grpc].{rule}[0].rule", 64),
        (f"{PROBE}.{rule}[0].rule", 256),
        (f"{POLICY}.properties[labels].{rule}[0].rule", 82048),
        (f"{POLICY}.properties[labels].{rule}[1].rule", 704640),
        (f"{POLICY}.properties[labels].{rule}[2].rule", 26752),
        (f"{POLICY}.properties[annotations].{rule}[0].rule", 90240),
        (f"{POLICY}.properties[annotations].{rule}[1].rule", 3373184),
        (f"{POLICY}.properties[annotations].{rule}[2].rule", 26752),
        (f"{POLICY}.{rule}[0].rule", 640),
        (f"{items}[podConditionType].{rule}[0].rule", 138304),
        (f"{items}[podConditionType].{rule}[1].rule", 704),
        (f"{items}[podConditionType].{rule}[1].messageExpression", 265),
        (f"{PROBES}.items.{rule}[0].rule", 192),
        (f"{PROBES}.{rule}[0].rule", 137474),
    ]
    assert {r.limit for r in report.rules} == {celadmit.STATIC_ESTIMATED_COST_LIMIT}
    assert (report.total, report.total_limit) == (267159707, 100_000_000)


def port_schema(**port: Any) -> dict[str, Any]:
    """A list of 32 objects with an int-or-string port carrying the port rule."""
    prop = {"x-kubernetes-int-or-string": True, **port}
    prop["x-kubernetes-validations"] = [{"rule": PORT_RULE}]
    item = {"type": "object", "properties": {"port": prop}}
    return {"type": "object", "properties": {"l": {"type": "array", "maxItems": 32, "items": item}}}


def test_max_length_does_not_bound_an_int_or_string() -> None:
    costs = {
        celadmit.estimate_rule_costs(parse_schema(port_schema(**extra)), SCHEMA).total
        for extra in ({}, {"maxLength": 15}, {"maxLength": 1})
    }
    assert costs == {130862592}


def map_rule_cost(rule: str, **values: Any) -> int:
    node = {
        "type": "object",
        "maxProperties": 32,
        "additionalProperties": {"type": "string", **values},
    }
    node["x-kubernetes-validations"] = [{"rule": rule}]
    schema = {"type": "object", "properties": {"m": node}}
    return celadmit.estimate_rule_costs(parse_schema(schema), SCHEMA).total


def test_map_keys_cost_as_empty_strings() -> None:
    """Only the number of keys counts: a key is sized 0, its value by maxLength x 4."""
    keys = map_rule_cost("self.all(k, k.matches('^[a-z]{1,63}$'))", maxLength=63)
    values = map_rule_cost("self.all(k, self[k].matches('^[a-z]{1,63}$'))", maxLength=63)
    # per key: matches costs ceil((0 + 1) x 0.1) x ceil(14 x 0.25) = 4, plus k, the loop's 3
    assert keys == 1 + 1 + 32 * (4 + 1 + 3)
    # per value: ceil((252 + 1) x 0.1) x 4 = 104, plus self[k] (3), the loop's 3
    assert values == 1 + 1 + 32 * (104 + 3 + 3)


def test_string_of_an_int_in_a_message_expression_is_unbounded() -> None:
    rule = {"rule": "self < 100", "messageExpression": "'got ' + string(self) + ', want < 100'"}
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "x-kubernetes-validations": [rule]}},
    }
    where = f"{SCHEMA}.properties[n].x-kubernetes-validations[0].messageExpression"
    assert messages(schema) == [
        f"{where}: Forbidden: estimated messageExpression cost exceeds budget by factor of "
        f"more than 100x {TRY}",
        f"{where}: {CONTRIBUTED}",
        f"{SCHEMA}: Forbidden: x-kubernetes-validations estimated rule cost total for entire "
        f"OpenAPIv3 schema exceeds budget by factor of more than 100x {TRY}",
    ]


def test_crd_creation_reports_the_cost_errors() -> None:
    got = [e.message for e in validate_crd(before_fix_crd())]
    assert len(got) == len(REFUSED)
    for message, want in zip(got, REFUSED, strict=True):
        assert message.split(": ", 1)[1] == want.split(": ", 1)[1]
