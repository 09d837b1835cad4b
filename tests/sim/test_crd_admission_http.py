"""CRD admission through the sim's HTTP server and kubectl: status codes, reasons and
messages of create, update (PUT) and patch, per fieldValidation, as kube-apiserver 1.32
answers them (handlers create.go/update.go/patch.go, transformDecodeError; the CRD
codec's strict decoding).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from probemarker.sim import SimCluster
from tests.sim.server_helpers import HAVE_KUBECTL, raw, run_kubectl

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "crds" / "admission"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
GADGETS = f"{CRDS}/gadgets.example.io"
MERGE = {"Content-Type": "application/merge-patch+json"}
CANNOT = (
    'CustomResourceDefinition in version "v1" cannot be handled as a CustomResourceDefinition: '
)
UNKNOWN = 'unknown field "spec.versions[0].schema.openAPIV3Schema.properties.spec.foo"'
TYPE_LIST = (
    "json: cannot unmarshal array into Go struct field JSONSchemaProps.spec.versions.schema."
    "openAPIV3Schema.properties.type of type string"
)
METADATA = (
    "Forbidden: must not specify anything other than name and generateName, but metadata is "
    "implicitly specified"
)


def fixture(name: str) -> dict[str, Any]:
    loaded = yaml.safe_load((FIXTURES / f"{name}.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


async def send(
    sim: SimCluster, method: str, path: str, **kwargs: Any
) -> tuple[int, Any, list[str]]:
    """(status, body, Warning headers) of one request."""
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, sim.url + path, **kwargs) as response,
    ):
        body = await response.json(content_type=None)
        return response.status, body, response.headers.getall("Warning", [])


def schema_of(crd: dict[str, Any]) -> dict[str, Any]:
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert isinstance(schema, dict)
    return schema


async def test_metadata_description_is_refused_with_422(sim: SimCluster) -> None:
    status, body = await raw(sim, "POST", CRDS, json=fixture("metadata-description"))
    assert (status, body["reason"]) == (422, "Invalid"), body
    assert body["message"] == (
        'CustomResourceDefinition.apiextensions.k8s.io "gadgets.example.io" is invalid: '
        f"spec.validation.openAPIV3Schema.properties[metadata]: {METADATA}"
    )
    # the rule that does not compile is not reported: metadata errors suppress CEL errors
    assert body["details"] == {
        "name": "gadgets.example.io",
        "group": "apiextensions.k8s.io",
        "kind": "CustomResourceDefinition",
        "causes": [
            {
                "reason": "FieldValueForbidden",
                "message": METADATA,
                "field": "spec.validation.openAPIV3Schema.properties[metadata]",
            }
        ],
    }


@pytest.mark.parametrize(
    ("query", "code", "warnings"),
    [
        ("?fieldValidation=Strict", 400, []),
        ("", 201, [f'299 - "{UNKNOWN.replace(chr(34), chr(92) + chr(34))}"']),
        ("?fieldValidation=Warn", 201, [f'299 - "{UNKNOWN.replace(chr(34), chr(92) + chr(34))}"']),
        ("?fieldValidation=Ignore", 201, []),
    ],
)
async def test_unknown_schema_keyword_per_field_validation(
    sim: SimCluster, query: str, code: int, warnings: list[str]
) -> None:
    status, body, warned = await send(sim, "POST", CRDS + query, json=fixture("unknown-keyword"))
    assert (status, warned) == (code, warnings), body
    if code == 400:
        assert body["reason"] == "BadRequest"
        assert body["message"] == f"{CANNOT}strict decoding error: {UNKNOWN}"
        return
    assert schema_of(body)["properties"]["spec"] == {"type": "object"}
    _, stored = await raw(sim, "GET", GADGETS)
    assert schema_of(stored)["properties"]["spec"] == {"type": "object"}


@pytest.mark.parametrize("validation", ["Strict", "Warn", "Ignore"])
async def test_type_list_is_a_decoding_error_whatever_field_validation(
    sim: SimCluster, validation: str
) -> None:
    status, body = await raw(
        sim, "POST", f"{CRDS}?fieldValidation={validation}", json=fixture("type-list")
    )
    assert (status, body["reason"], body["message"]) == (400, "BadRequest", CANNOT + TYPE_LIST)


async def test_update_is_decoded_and_checked_against_the_stored_crd(sim: SimCluster) -> None:
    status, created = await raw(sim, "POST", CRDS, json=fixture("valid"))
    assert status == 201, created
    assert created["spec"]["names"]["listKind"] == "GadgetList"
    assert created["spec"]["conversion"] == {"strategy": "None"}
    unknown = json.loads(json.dumps(created))
    schema_of(unknown)["properties"]["spec"]["foo"] = "bar"
    status, body = await raw(sim, "PUT", f"{GADGETS}?fieldValidation=Strict", json=unknown)
    assert (status, body["message"]) == (400, f"{CANNOT}strict decoding error: {UNKNOWN}")
    rescoped = json.loads(json.dumps(created))
    rescoped["spec"]["scope"] = "Cluster"
    status, body = await raw(sim, "PUT", GADGETS, json=rescoped)
    assert (status, body["reason"]) == (422, "Invalid")
    assert [(c["field"], c["message"]) for c in body["details"]["causes"]] == [
        ("spec.scope", 'Invalid value: "Cluster": field is immutable')
    ]


async def test_patch_errors_are_422_on_patch(sim: SimCluster) -> None:
    status, created = await raw(sim, "POST", CRDS, json=fixture("valid"))
    assert status == 201, created
    versions = created["spec"]["versions"]
    schema_of(created)["properties"]["spec"]["foo"] = "bar"
    patch = json.dumps({"spec": {"versions": versions}})
    status, body, _ = await send(
        sim, "PATCH", f"{GADGETS}?fieldValidation=Strict", data=patch, headers=MERGE
    )
    assert (status, body["reason"]) == (422, "Invalid"), body
    assert body["message"].startswith(' "" is invalid: patch: Invalid value: "{')
    assert body["message"].endswith(f'": strict decoding error: {UNKNOWN}')
    (cause,) = body["details"]["causes"]
    assert (cause["reason"], cause["field"]) == ("FieldValueInvalid", "patch")
    assert "name" not in body["details"]
    status, body, warned = await send(sim, "PATCH", GADGETS, data=patch, headers=MERGE)
    assert status == 200, body
    assert warned == [f'299 - "{UNKNOWN.replace(chr(34), chr(92) + chr(34))}"']
    bad_type = json.dumps({"spec": {"scope": 5}})
    status, body, _ = await send(sim, "PATCH", GADGETS, data=bad_type, headers=MERGE)
    assert status == 422
    assert body["message"].endswith(
        '": json: cannot unmarshal number into Go struct field '
        "CustomResourceDefinitionSpec.spec.scope of type v1.ResourceScope"
    )


async def test_a_crd_without_a_name_is_invalid_not_a_bad_request(sim: SimCluster) -> None:
    nameless = fixture("valid")
    del nameless["metadata"]["name"]
    status, body = await raw(sim, "POST", CRDS, json=nameless)
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueRequired",
            "message": "Required value: name or generateName is required",
            "field": "metadata.name",
        }
    ]


@pytest.mark.skipif(not HAVE_KUBECTL, reason="kubectl is not installed (/usr/bin/kubectl)")
async def test_kubectl_apply_shows_the_api_servers_refusals(
    sim: SimCluster, tmp_path: Path
) -> None:
    async def apply(name: str) -> tuple[int, str]:
        result = await run_kubectl(
            sim.kubeconfig_path,
            "apply",
            "-f",
            str(FIXTURES / f"{name}.yaml"),
            cache_dir=tmp_path / "cache",
            within=30,
        )
        return result.code, result.out + result.err

    code, output = await apply("metadata-description")
    assert code != 0
    assert (
        'The CustomResourceDefinition "gadgets.example.io" is invalid: '
        f"spec.validation.openAPIV3Schema.properties[metadata]: {METADATA}"
    ) in output
    code, output = await apply("unknown-keyword")  # kubectl 1.32 asks for Strict
    assert code != 0
    assert f"{CANNOT}strict decoding error: {UNKNOWN}" in output
    code, output = await apply("valid")
    assert code == 0, output
    assert "customresourcedefinition.apiextensions.k8s.io/gadgets.example.io created" in output
