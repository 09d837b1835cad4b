"""Build the PodProbeMarker CustomResourceDefinition from the rules in `rules.py`.

Stage: api (pure). `build_crd()` returns the apiextensions.k8s.io/v1 object that
`manifests/crd/podprobemarkers.probemarker.io.yaml` holds; a unit test keeps the file
and this function identical (`probemarker crd > manifests/crd/...` regenerates it).
What OpenAPI can say goes into the schema (probe names and policy states are unique
through `x-kubernetes-list-type: map`, as Kruise's patchMergeKeys intend); the rest
(exactly one handler, unique condition types, reserved types, key syntax,
immutability, no policy label the selector reads) into `x-kubernetes-validations` CEL
rules, written in standard CEL only so they need no Kubernetes CEL extension library.
The building blocks (CEL rules, the label and annotation maps) are schemaparts.py's.
"""

from __future__ import annotations

from typing import Any

from probemarker.api import rules
from probemarker.api.schemaparts import (
    LABEL_VALUE,
    Schema,
    annotation_map,
    cel,
    label_map,
    qualified_name_rule,
    quote,
)


def _int(description: str, minimum: int, default: int | None = None) -> Schema:
    schema: Schema = {
        "type": "integer",
        "format": "int32",
        "minimum": minimum,
        # The API server does not enforce format int32 on custom resources.
        "maximum": rules.INT32_MAX,
        "description": description,
    }
    if default is not None:
        schema["default"] = default
    return schema


# The API server's error for a bad port quotes the pattern; the description says it in words.
_PORT_DESCRIPTION = (
    "Container port: a number from 1 to 65535, or the name of one of the container's ports "
    "(IANA_SVC_NAME: at most 15 lower-case alphanumerics or '-', with at least one letter, "
    "no '--', not starting or ending with '-')."
)


def _port(description: str) -> Schema:
    # OpenAPI, not CEL: the API server costs CEL on an int-or-string as a string of the
    # maximum request size (it ignores maxLength there), so a rule with matches() on it
    # exceeds the per-rule budget about 13 times over. Bounds and pattern side by side on
    # an int-or-string node apply by the value's type: numbers by minimum/maximum,
    # strings by maxLength/pattern.
    return {
        "x-kubernetes-int-or-string": True,
        "minimum": 1,
        "maximum": 65535,
        "maxLength": rules.MAX_PORT_NAME_LENGTH,
        "pattern": rules.PORT_NAME_RE,
        "description": description,
    }


_HOST: Schema = {
    "type": "string",
    "maxLength": 253,
    "description": "Refused: probes reach only the pod's own IP. Present in the schema "
    "only so that setting it gives a clear error instead of being dropped.",
}


def _no_host() -> list[dict[str, str]]:
    return [cel("!has(self.host)", rules.MSG_HOST, fieldPath=".host")]


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


def _handlers_schema() -> dict[str, Schema]:
    return {
        "exec": {
            "type": "object",
            "description": "Run a command in the container through the pods/exec "
            "subresource; exit code 0 is success.",
            "required": ["command"],
            "x-kubernetes-validations": _no_host(),
            "properties": {
                "host": _HOST,
                "command": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": rules.MAX_COMMAND_ARGS,
                    "description": "The argv to run; not run in a shell.",
                    "items": {"type": "string", "maxLength": rules.MAX_COMMAND_ARG_LENGTH},
                    "x-kubernetes-validations": [
                        cel("size(self) == 0 || size(self[0]) > 0", rules.MSG_COMMAND_EMPTY)
                    ],
                },
            },
        },
        "httpGet": {
            "type": "object",
            "description": "HTTP GET against the pod IP; status 200-399 is success.",
            "required": ["port"],
            "properties": {
                "path": {
                    "type": "string",
                    "default": rules.HTTP_PATH_DEFAULT,
                    "maxLength": rules.MAX_HTTP_PATH_LENGTH,
                    "pattern": rules.HTTP_PATH_RE,
                    "description": "Absolute path to request.",
                },
                "port": _port(_PORT_DESCRIPTION),
                "host": _HOST,
                "scheme": {
                    "type": "string",
                    "enum": list(rules.SCHEMES),
                    "default": rules.HTTP_SCHEME_DEFAULT,
                    "description": "HTTP or HTTPS (certificates are not verified, as with the kubelet).",
                },
                "httpHeaders": {
                    "type": "array",
                    "description": "Extra request headers.",
                    "maxItems": rules.MAX_HTTP_HEADERS,
                    "items": {
                        "type": "object",
                        "description": "One HTTP header.",
                        "required": ["name", "value"],
                        "properties": {
                            "name": {
                                "type": "string",
                                "pattern": rules.HTTP_HEADER_NAME_RE,
                                "description": "Header name (an HTTP token).",
                                "maxLength": rules.MAX_HTTP_HEADER_NAME_LENGTH,
                            },
                            "value": {
                                "type": "string",
                                "maxLength": rules.MAX_HTTP_HEADER_VALUE_LENGTH,
                                "pattern": rules.HTTP_HEADER_VALUE_RE,
                                "description": "Header value (no control characters but tab).",
                            },
                        },
                    },
                },
            },
            "x-kubernetes-validations": _no_host(),
        },
        "tcpSocket": {
            "type": "object",
            "description": "TCP connect to the pod IP; a connection is success.",
            "required": ["port"],
            "properties": {"port": _port(_PORT_DESCRIPTION), "host": _HOST},
            "x-kubernetes-validations": _no_host(),
        },
        "grpc": {
            "type": "object",
            "description": "gRPC health check (grpc.health.v1) against the pod IP; SERVING is success.",
            "required": ["port"],
            "properties": {
                "port": {
                    "type": "integer",
                    "format": "int32",
                    "minimum": 1,
                    "maximum": 65535,
                    "description": "Container port number (gRPC probes take no port names).",
                },
                "service": {
                    "type": "string",
                    "maxLength": rules.MAX_GRPC_SERVICE_LENGTH,
                    "description": "Service name sent in the health check request "
                    "(empty: the server's overall health).",
                },
                "host": _HOST,
            },
            "x-kubernetes-validations": _no_host(),
        },
    }


def _probe_spec_schema() -> Schema:
    handler_count = " + ".join(f"(has(self.{h}) ? 1 : 0)" for h in rules.HANDLERS)
    timing = {
        "initialDelaySeconds": "Seconds after the container started before the first probe.",
        "timeoutSeconds": "Seconds after which one probe run counts as failed.",
        "periodSeconds": "Seconds between probe runs.",
        "successThreshold": "Consecutive successes before the result is Succeeded.",
        "failureThreshold": "Consecutive failures before the result is Failed.",
    }
    properties: Schema = dict(_handlers_schema())
    for field, text in timing.items():
        properties[field] = _int(text, rules.TIMING_MINIMUMS[field], rules.TIMING_DEFAULTS[field])
    properties["terminationGracePeriodSeconds"] = _int(
        "Accepted for compatibility with core/v1 Probe; ignored.",
        rules.TIMING_MINIMUMS["terminationGracePeriodSeconds"],
    )
    return {
        "type": "object",
        "description": "How and when to probe, shaped like a core/v1 Probe.",
        "properties": properties,
        "x-kubernetes-validations": [cel(f"{handler_count} == 1", rules.MSG_ONE_HANDLER)],
    }


# CEL: '"' + self + '" is owned by ...', naming the type as the Python validator does.
_RESERVED_MESSAGE_EXPRESSION = (
    quote('"') + " + self + " + quote('" ' + rules.MSG_RESERVED_CONDITION)
)


def _probe_schema() -> Schema:
    reserved = ", ".join(quote(t) for t in rules.RESERVED_CONDITION_TYPES)
    return {
        "type": "object",
        "description": "One probe: which container, how to probe it, and what to write "
        "onto the pod.",
        "required": ["name", "containerName", "probe"],
        "properties": {
            "name": {
                "type": "string",
                "minLength": 1,
                "maxLength": rules.MAX_PROBE_NAME_LENGTH,
                "pattern": rules.PROBE_NAME_RE,
                "description": "Probe name, unique within the marker, without '#'.",
            },
            "containerName": {
                "type": "string",
                "maxLength": rules.MAX_DNS1123_LABEL_LENGTH,
                "pattern": rules.DNS1123_LABEL_RE,
                "description": "Container to probe: a regular container or a restartable init container.",
            },
            "probe": _probe_spec_schema(),
            "markerPolicy": {
                "type": "array",
                "maxItems": rules.MAX_POLICIES,
                # Kruise's patchMergeKey. The API server refuses duplicate states
                # (Duplicate value) and server-side apply merges entries by state.
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["state"],
                "description": "Labels and annotations to put on the pod per result.",
                "items": {
                    "type": "object",
                    "description": "Labels and annotations for one result state.",
                    "required": ["state"],
                    "properties": {
                        "state": {
                            "type": "string",
                            "enum": list(rules.STATES),
                            "description": "Succeeded or Failed. Keys of the other state's "
                            "policy that this one does not set are removed from the pod.",
                        },
                        "labels": label_map(
                            "Labels set on the pod in this state. A value may hold "
                            "{{.Result}}, the probe's answer (docs/api.md).",
                            written=True,
                        ),
                        "annotations": annotation_map(
                            "Annotations set on the pod in this state. A value may hold "
                            "{{.Result}}, the probe's answer (docs/api.md)."
                        ),
                    },
                    "x-kubernetes-validations": [
                        cel(
                            "(has(self.labels) && size(self.labels) > 0) || "
                            "(has(self.annotations) && size(self.annotations) > 0)",
                            rules.MSG_POLICY_EMPTY,
                        )
                    ],
                },
            },
            "podConditionType": {
                "type": "string",
                "maxLength": rules.MAX_QUALIFIED_NAME_LENGTH,
                "description": "Pod condition type to write the result to (True on "
                "Succeeded, False on Failed), e.g. for a readiness gate.",
                "x-kubernetes-validations": [
                    cel(
                        qualified_name_rule("self"),
                        "must be a qualified name, e.g. example.com/Idle",
                    ),
                    cel(
                        f"!(self in [{reserved}])",
                        rules.MSG_RESERVED_CONDITION,
                        messageExpression=_RESERVED_MESSAGE_EXPRESSION,
                    ),
                    cel(
                        f"!self.matches({quote(rules.RESERVED_KEY_PREFIX_RE)})",
                        rules.MSG_RESERVED_CONDITION_PREFIX,
                    ),
                ],
            },
        },
        "x-kubernetes-validations": [
            cel(
                "(has(self.markerPolicy) && size(self.markerPolicy) > 0) || has(self.podConditionType)",
                rules.MSG_POLICY_OR_CONDITION,
            )
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
                "items": _probe_schema(),
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
