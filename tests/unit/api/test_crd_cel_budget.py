"""The CRD's CEL rules stay well inside kube-apiserver's cost budgets, on every supported
release (the sim's cost estimator has the 1.28 and the 1.32 model).

"Well inside" is a margin, so that a bound added or a rule changed later cannot creep up to
the limit unseen: no rule above half the per-rule budget, the whole schema below a tenth of
the CRD budget. `python -m pytest tests/unit/api/test_crd_cel_budget.py -s` prints them.
"""

from __future__ import annotations

import pytest

from probemarker.api.crd import build_crd
from probemarker.sim.crd.schema.cel.celcheck import K8S_1_28, K8S_1_32, Profile
from probemarker.sim.crd.schema.node import parse_schema
from probemarker.sim.crd.validation import celadmit

SCHEMA = "spec.validation.openAPIV3Schema"


@pytest.mark.parametrize("profile", [K8S_1_28, K8S_1_32], ids=["1.28", "1.32"])
def test_every_rule_is_well_inside_the_budget(profile: Profile) -> None:
    root = parse_schema(build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    report = celadmit.estimate_rule_costs(root, SCHEMA, profile=profile)
    assert len(report.rules) >= 20, "every CEL rule of the CRD is costed"
    for rule in report.rules:
        print(f"{rule.cost:>12,} of {rule.limit:,}  {rule.path.removeprefix(SCHEMA)}")
        assert rule.cost <= rule.limit // 2, rule.path
    print(f"{report.total:>12,} of {report.total_limit:,}  total")
    assert report.total <= report.total_limit // 10
