"""The project's CRD installs on the sim as on a real API server, and the CRD that real
kube-apiservers (1.28 and 1.32) refused is refused by the sim for the same reasons.

The refused CRD is kept as a fixture (tests/data/crds/podprobemarkers-refused.yaml). The
figures and messages below were observed on both real servers: the description on the
top-level `metadata` stopped them first; without it, each int-or-string port rule was
13.1x over the per-rule CEL budget and the whole schema 2.7x over the CRD budget; without
the port rules too, they accepted it.
"""

from __future__ import annotations

from typing import Any

import yaml

from probemarker.api.crd import build_crd
from probemarker.sim import SimCluster
from tests.sim.server_helpers import raw
from tests.sim.test_celcheck_crd import (
    REFUSED_CRD,
    TRY,
    before_fix,
    before_fix_crd,
    without_port_rules,
)

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
SCHEMA = "spec.validation.openAPIV3Schema"
PROBE = f"{SCHEMA}.properties[spec].properties[probes].items.properties[probe]"
ANNOTATIONS = (
    f"{SCHEMA}.properties[spec].properties[probes].items.properties[markerPolicy]"
    ".items.properties[annotations]"
)


def refused_crd() -> dict[str, Any]:
    crd = yaml.safe_load(REFUSED_CRD.read_text())
    assert isinstance(crd, dict)
    return crd


def causes(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["field"], c["message"]) for c in body["details"]["causes"]]


async def test_the_project_crd_installs(sim: SimCluster) -> None:
    status, body = await raw(sim, "POST", CRDS, json=build_crd())
    assert status == 201, body


async def test_metadata_with_a_description_is_refused_first(sim: SimCluster) -> None:
    status, body = await raw(sim, "POST", CRDS, json=refused_crd())
    assert (status, body["reason"]) == (422, "Invalid"), body
    # Metadata errors suppress the CEL errors (no cost errors in this answer).
    assert causes(body) == [
        (
            f"{SCHEMA}.properties[metadata]",
            "Forbidden: must not specify anything other than name and generateName, "
            "but metadata is implicitly specified",
        )
    ]


async def test_port_rules_are_refused_for_their_cost(sim: SimCluster) -> None:
    status, body = await raw(sim, "POST", CRDS, json=before_fix_crd())
    assert (status, body["reason"]) == (422, "Invalid"), body
    found = causes(body)
    for handler in ("httpGet", "tcpSocket"):
        rule = f"{PROBE}.properties[{handler}].properties[port].x-kubernetes-validations[0].rule"
        assert (
            rule,
            f"Forbidden: estimated rule cost exceeds budget by factor of 13.1x {TRY}",
        ) in found
        assert (
            rule,
            "Forbidden: contributed to estimated rule cost total exceeding cost limit for "
            "entire OpenAPIv3 schema",
        ) in found
    assert (
        SCHEMA,
        "Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 "
        f"schema exceeds budget by factor of 2.7x {TRY}",
    ) in found
    contributors = [f for f, m in found if m.startswith("Forbidden: contributed")]
    assert any(f.startswith(f"{ANNOTATIONS}.x-kubernetes-validations[") for f in contributors)


async def test_without_the_port_rules_it_is_accepted(sim: SimCluster) -> None:
    fixed = before_fix_crd()
    versions = fixed["spec"]["versions"]
    versions[0]["schema"]["openAPIV3Schema"] = without_port_rules(before_fix())
    status, body = await raw(sim, "POST", CRDS, json=fixed)
    assert status == 201, body
