"""One probe's schema in the CRD: how to probe (the handlers, the timing) and what to write.

Stage: api (pure), under crd.py. Input: the limits, patterns and messages of
`rules.py`. Output: the schema of one entry of `spec.probes` (`probe_schema`): its
name and container; its `probe` field, shaped like a core/v1 Probe (one handler of
exec, httpGet, tcpSocket and grpc, each refusing `host`; a container port as a
number or a name; the timing fields with their minimums and defaults); its
`markerPolicy` (one per state, the label and annotation maps of schemaparts.py); its
`podConditionType` (a qualified name, not one Kubernetes owns). What the Python
validator checks of the same fields is handlervalidation.py's and
labelvalidation.py's.
"""

from __future__ import annotations

from probemarker.api import rules
from probemarker.api.schemaparts import (
    Schema,
    annotation_map,
    cel,
    label_map,
    qualified_name_rule,
    quote,
)

__all__ = ["probe_schema"]


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


def probe_schema() -> Schema:
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
