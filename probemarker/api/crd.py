"""Build the PodProbeMarker CustomResourceDefinition from the rules in `rules.py`.

Stage: api (pure). `build_crd()` returns the apiextensions.k8s.io/v1 object that
`manifests/crd/podprobemarkers.probemarker.io.yaml` holds; a unit test keeps the file
and this function identical (`probemarker crd > manifests/crd/...` regenerates it).
What OpenAPI can say goes into the schema (probe names and policy states are unique
through `x-kubernetes-list-type: map`, as Kruise's patchMergeKeys intend); the rest
(exactly one handler, unique condition types, reserved types, key syntax,
immutability, no policy label the selector reads) into `x-kubernetes-validations` CEL
rules, written in standard CEL only so they need no Kubernetes CEL extension library.
One probe's schema is probeschema.py's; the building blocks (CEL rules, the label and
annotation maps) are schemaparts.py's.
"""

from __future__ import annotations

from typing import Any

from probemarker.api import rules
from probemarker.api.probeschema import probe_schema
from probemarker.api.schemaparts import (
    LABEL_VALUE,
    Schema,
    cel,
    label_map,
    qualified_name_rule,
)


def _selector_schema() -> Schema:
    requirement: Schema = {
        "type": "object",
        "description": "A label selector requirement: key, operator, values.",
        "required": ["key", "operator"],
        "properties": {
            "key": {
                "type": "string",
                "maxLength": rules.MAX_QUALIFIED_NAME_LENGTH,
                "description": "The label key the requirement tests.",
            },
            "operator": {
                "type": "string",
                "enum": list(rules.SELECTOR_OPERATORS),
                "description": "In, NotIn, Exists or DoesNotExist.",
            },
            "values": {
                "type": "array",
                "description": "Label values: required for In and NotIn, empty for Exists "
                "and DoesNotExist.",
                "maxItems": rules.MAX_SELECTOR_VALUES,
                "items": dict(LABEL_VALUE),
            },
        },
        "x-kubernetes-validations": [
            cel(
                qualified_name_rule("self.key"),
                rules.MSG_LABEL_KEYS,
                fieldPath=".key",
            ),
            cel(
                "!(self.operator in ['In', 'NotIn']) || (has(self.values) && size(self.values) > 0)",
                rules.MSG_SELECTOR_VALUES_REQUIRED,
                fieldPath=".values",
            ),
            cel(
                "!(self.operator in ['Exists', 'DoesNotExist']) || !has(self.values) "
                "|| size(self.values) == 0",
                rules.MSG_SELECTOR_VALUES_FORBIDDEN,
                fieldPath=".values",
            ),
        ],
    }
    return {
        "type": "object",
        "description": "Selects the pods to probe by label, in the marker's namespace. "
        "Required, must not be empty, and cannot be changed after creation.",
        "properties": {
            "matchLabels": label_map("Labels the pod must carry, key: value.", written=False),
            "matchExpressions": {
                "type": "array",
                "description": "Label requirements the pod must meet, all of them.",
                "maxItems": rules.MAX_SELECTOR_EXPRESSIONS,
                "items": requirement,
            },
        },
        "x-kubernetes-validations": [
            cel(
                "(has(self.matchLabels) && size(self.matchLabels) > 0) || "
                "(has(self.matchExpressions) && size(self.matchExpressions) > 0)",
                rules.MSG_SELECTOR_EMPTY,
            ),
            cel("self == oldSelf", rules.MSG_SELECTOR_IMMUTABLE),
        ],
    }


def _selector_labels_not_written() -> dict[str, str]:
    """CEL on spec, the lowest node that sees both the selector and the policies: no
    policy writes a label the selector reads (issue 15). It walks the selector's keys
    and looks each up in the policy's map (`in` on a map costs 1), rather than
    walking the policy's keys, so its cost is probes x policies x selector keys.

    The message is static. Naming the key takes either a second comprehension over a
    computed list, which the 1.28 cost estimator cannot bound (the CRD would be
    refused), or the three-argument map() macro, which the sim's CEL evaluator lacks.
    `probemarker validate` and the daemon's InvalidMarker event name it."""
    labels = "self.selector.matchLabels"
    expressions = "self.selector.matchExpressions"
    rule = (
        "self.probes.all(p, !has(p.markerPolicy) || p.markerPolicy.all(m, !has(m.labels) || "
        f"((!has({labels}) || {labels}.all(k, !(k in m.labels))) && "
        f"(!has({expressions}) || {expressions}.all(e, !(e.key in m.labels))))))"
    )
    return cel(
        rule,
        f"a markerPolicy writes a label {rules.MSG_SELECTOR_LABEL_WRITTEN} "
        "(probemarker validate names it)",
        fieldPath=".probes",
    )


def _spec_schema() -> Schema:
    return {
        "type": "object",
        "description": "Which pods to probe and how.",
        "required": ["selector", "probes"],
        "x-kubernetes-validations": [_selector_labels_not_written()],
        "properties": {
            "selector": _selector_schema(),
            "probes": {
                "type": "array",
                "minItems": 1,
                "maxItems": rules.MAX_PROBES,
                # Kruise's patchMergeKey. The API server refuses duplicate names
                # (Duplicate value) and server-side apply merges probes by name.
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "description": "The probes to run on every selected pod.",
                "items": probe_schema(),
                "x-kubernetes-validations": [
                    cel(
                        "self.all(p, !has(p.podConditionType) || self.exists_one(q, "
                        "has(q.podConditionType) && q.podConditionType == p.podConditionType))",
                        rules.MSG_CONDITION_TYPES_UNIQUE,
                    ),
                ],
            },
        },
    }


def _status_schema() -> Schema:
    return {
        "type": "object",
        "description": "Observed state, written by probemarker.",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "observedGeneration": {
                "type": "integer",
                "format": "int64",
                "description": "The generation of the spec the status describes.",
            },
            "matchedPods": {
                "type": "integer",
                "format": "int64",
                "description": "Number of pods the selector matches.",
            },
        },
    }


def build_crd() -> dict[str, Any]:
    """The CustomResourceDefinition for probemarker.io/v1alpha1 PodProbeMarker."""
    schema: Schema = {
        "type": "object",
        "description": "PodProbeMarker runs custom probes on the pods it selects and "
        "writes the results onto them as labels, annotations and pod conditions.",
        "required": ["spec"],
        "properties": {
            "apiVersion": {
                "type": "string",
                "description": "probemarker.io/v1alpha1",
            },
            "kind": {"type": "string", "description": "PodProbeMarker"},
            # Nothing but the type: the API server refuses any other keyword on metadata.
            "metadata": {"type": "object"},
            "spec": _spec_schema(),
            "status": _status_schema(),
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{rules.PLURAL}.{rules.GROUP}"},
        "spec": {
            "group": rules.GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": rules.KIND,
                "listKind": f"{rules.KIND}List",
                "plural": rules.PLURAL,
                "singular": rules.SINGULAR,
                "shortNames": [rules.SHORT_NAME],
            },
            "versions": [
                {
                    "name": rules.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {
                            "name": "Selector",
                            "type": "string",
                            "jsonPath": ".spec.selector.matchLabels",
                            "description": "The pods probed (matchLabels)",
                        },
                        {
                            "name": "Probes",
                            "type": "string",
                            "jsonPath": ".spec.probes[*].name",
                            "description": "Probe names (JSONPath cannot count them)",
                        },
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }
