"""The OpenAPI v3 component schemas every group-version document shares.

kube-apiserver's documents reference the meta.k8s.io/v1 types by name
(`#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta`, ...)
and carry their definitions alongside the kinds.  `meta_schemas()` gives the
ones the sim's documents reference: ObjectMeta and what it references,
ListMeta, Status and DeleteOptions (the answers and body of DELETE) and Patch.

`builtin_kind_schema(rt)` is a deliberately small schema for a built-in kind
(its top-level fields only), enough for `kubectl explain pods` to print the
kind; the sim does not publish the full built-in schemas.

Descriptions here are the sim's own short wording, not kube-apiserver's text.
Invariant: every `$ref` in these schemas names a schema `meta_schemas()` returns.
"""

from __future__ import annotations

from typing import Any

from probemarker.sim.store.resourcetype import ResourceType

META = "io.k8s.apimachinery.pkg.apis.meta.v1."
OBJECT_META = META + "ObjectMeta"
LIST_META = META + "ListMeta"
STATUS = META + "Status"
DELETE_OPTIONS = META + "DeleteOptions"
PATCH = META + "Patch"

_CONVENTIONS = "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"


def ref(name: str) -> dict[str, Any]:
    """A bare reference to the component schema `name`."""
    return {"$ref": f"#/components/schemas/{name}"}


def wrapped_ref(name: str, description: str, **extra: Any) -> dict[str, Any]:
    """A reference with siblings: OpenAPI 3.0 ignores siblings of `$ref`, so kube-openapi
    wraps the reference in a one-element `allOf`, as done here."""
    return {"allOf": [ref(name)], "description": description, **extra}


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _string_map(description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": {"type": "string", "default": ""},
        "description": description,
    }


def type_meta_properties() -> dict[str, Any]:
    """`apiVersion` and `kind`, as every top-level kind has them."""
    return {
        "apiVersion": _string(
            "The versioned schema of this object's representation (group/version)."
            f" More info: {_CONVENTIONS}#resources"
        ),
        "kind": _string(
            "The kind of object this is, in CamelCase; servers may infer it from the "
            f"endpoint. More info: {_CONVENTIONS}#types-kinds"
        ),
    }


def object_meta_property() -> dict[str, Any]:
    return wrapped_ref(
        OBJECT_META, f"Standard object's metadata. More info: {_CONVENTIONS}#metadata"
    )


def list_meta_property() -> dict[str, Any]:
    return wrapped_ref(LIST_META, f"Standard list metadata. More info: {_CONVENTIONS}#metadata")


def _object_meta() -> dict[str, Any]:
    time = META + "Time"
    return {
        "type": "object",
        "description": "Metadata every persisted object has: its identity, labels, annotations "
        "and lifecycle fields.",
        "properties": {
            "annotations": _string_map(
                "Unstructured key/value data set by tools; not used for selection."
            ),
            "creationTimestamp": wrapped_ref(time, "When the server created the object (UTC)."),
            "deletionGracePeriodSeconds": {
                "type": "integer",
                "format": "int64",
                "description": "Seconds the object is given to terminate gracefully once "
                "deletion was requested. Read-only.",
            },
            "deletionTimestamp": wrapped_ref(
                time,
                "When the object will be deleted; set by the "
                "server when deletion is requested. Read-only.",
            ),
            "finalizers": {
                "type": "array",
                "items": {"type": "string", "default": ""},
                "x-kubernetes-list-type": "set",
                "x-kubernetes-patch-strategy": "merge",
                "description": "Names that must be removed before the object is deleted.",
            },
            "generateName": _string(
                "A prefix the server completes into a unique name when name is not given."
            ),
            "generation": {
                "type": "integer",
                "format": "int64",
                "description": "Sequence number of the desired state's generation.",
            },
            "labels": _string_map("Key/value pairs for organising and selecting objects."),
            "managedFields": {
                "type": "array",
                "items": {"allOf": [ref(META + "ManagedFieldsEntry")], "default": {}},
                "x-kubernetes-list-type": "atomic",
                "description": "Which field manager owns which fields (server-side apply).",
            },
            "name": _string("Unique name within the namespace; cannot be changed."),
            "namespace": _string(
                "The namespace the object lives in; empty for cluster-scoped objects."
            ),
            "ownerReferences": {
                "type": "array",
                "items": {"allOf": [ref(META + "OwnerReference")], "default": {}},
                "x-kubernetes-list-map-keys": ["uid"],
                "x-kubernetes-list-type": "map",
                "x-kubernetes-patch-merge-key": "uid",
                "x-kubernetes-patch-strategy": "merge",
                "description": "Objects this one depends on; garbage collection follows them.",
            },
            "resourceVersion": _string(
                "Opaque version of the object, for optimistic concurrency and watches. Read-only."
            ),
            "selfLink": _string("Deprecated; not set by the server."),
            "uid": _string("Unique identity of this object, generated by the server. Read-only."),
        },
    }


def meta_schemas() -> dict[str, dict[str, Any]]:
    """The meta.k8s.io/v1 component schemas, by name."""
    gvk_status = [{"group": "", "kind": "Status", "version": "v1"}]
    gvk_delete = [{"group": "", "kind": "DeleteOptions", "version": "v1"}]
    return {
        OBJECT_META: _object_meta(),
        LIST_META: {
            "type": "object",
            "description": "Metadata of lists and other synthetic responses.",
            "properties": {
                "continue": _string("Token for the next chunk of a paginated list."),
                "remainingItemCount": {
                    "type": "integer",
                    "format": "int64",
                    "description": "Items after this chunk, when known.",
                },
                "resourceVersion": _string("The version of the list, for watches."),
                "selfLink": _string("Deprecated; not set by the server."),
            },
        },
        META + "Time": {
            "type": "string",
            "format": "date-time",
            "description": "A timestamp in RFC 3339 form, second precision.",
        },
        META + "FieldsV1": {
            "type": "object",
            "description": "A set of fields, in the JSON fields format.",
        },
        META + "ManagedFieldsEntry": {
            "type": "object",
            "description": "The fields one manager owns, and how it last wrote them.",
            "properties": {
                "apiVersion": _string("The version of the fields' schema."),
                "fieldsType": _string("The format of fieldsV1; only FieldsV1."),
                "fieldsV1": wrapped_ref(META + "FieldsV1", "The owned fields."),
                "manager": _string("The manager's name."),
                "operation": _string("Apply or Update."),
                "subresource": _string("The subresource written, if any."),
                "time": wrapped_ref(META + "Time", "When the manager last changed these fields."),
            },
        },
        META + "OwnerReference": {
            "type": "object",
            "description": "Identifies an owning object in the same namespace.",
            "required": ["apiVersion", "kind", "name", "uid"],
            "properties": {
                "apiVersion": _string("The owner's API version."),
                "blockOwnerDeletion": {
                    "type": "boolean",
                    "description": "Whether the owner waits for this object "
                    "in foreground deletion.",
                },
                "controller": {
                    "type": "boolean",
                    "description": "Whether the owner is the managing controller.",
                },
                "kind": _string("The owner's kind."),
                "name": _string("The owner's name."),
                "uid": _string("The owner's uid."),
            },
            "x-kubernetes-map-type": "atomic",
        },
        STATUS: {
            "type": "object",
            "description": "The result of an operation that returns no object.",
            "properties": {
                **type_meta_properties(),
                "code": {
                    "type": "integer",
                    "format": "int32",
                    "description": "HTTP status code suggested for this status.",
                },
                "details": wrapped_ref(META + "StatusDetails", "Extra data about the outcome."),
                "message": _string("A human-readable description of the outcome."),
                "metadata": list_meta_property(),
                "reason": _string("A machine-readable reason for a Failure."),
                "status": _string("Success or Failure."),
            },
            "x-kubernetes-group-version-kind": gvk_status,
        },
        META + "StatusDetails": {
            "type": "object",
            "description": "Which object an operation concerned, and why it failed.",
            "properties": {
                "causes": {
                    "type": "array",
                    "items": {"allOf": [ref(META + "StatusCause")], "default": {}},
                    "x-kubernetes-list-type": "atomic",
                    "description": "Individual causes of a failure.",
                },
                "group": _string("The group of the resource."),
                "kind": _string("The resource (the plural name), despite the field's name."),
                "name": _string("The name of the object."),
                "retryAfterSeconds": {
                    "type": "integer",
                    "format": "int32",
                    "description": "Seconds to wait before retrying.",
                },
                "uid": _string("The uid of the object."),
            },
        },
        META + "StatusCause": {
            "type": "object",
            "description": "One reason for a failure, often tied to a field.",
            "properties": {
                "field": _string("The field at fault, as a JSON-ish path."),
                "message": _string("Human-readable explanation."),
                "reason": _string("Machine-readable reason."),
            },
        },
        DELETE_OPTIONS: {
            "type": "object",
            "description": "Options of a DELETE request.",
            "properties": {
                **type_meta_properties(),
                "dryRun": {
                    "type": "array",
                    "items": {"type": "string", "default": ""},
                    "x-kubernetes-list-type": "atomic",
                    "description": "All: run every stage without persisting.",
                },
                "gracePeriodSeconds": {
                    "type": "integer",
                    "format": "int64",
                    "description": "Seconds before the object is deleted.",
                },
                "orphanDependents": {
                    "type": "boolean",
                    "description": "Deprecated: use propagationPolicy.",
                },
                "preconditions": wrapped_ref(
                    META + "Preconditions", "Must hold for the deletion to happen (else 409)."
                ),
                "propagationPolicy": _string("Orphan, Background or Foreground."),
            },
            "x-kubernetes-group-version-kind": gvk_delete,
        },
        META + "Preconditions": {
            "type": "object",
            "description": "Conditions a DELETE checks first.",
            "properties": {
                "resourceVersion": _string("The expected resourceVersion."),
                "uid": _string("The expected uid."),
            },
        },
        PATCH: {
            "type": "object",
            "description": "A patch body; its format is given by the Content-Type.",
        },
    }


_BUILTIN_NAMES = {
    ("", "Namespace"): "io.k8s.api.core.v1.Namespace",
    ("", "Pod"): "io.k8s.api.core.v1.Pod",
    ("", "Node"): "io.k8s.api.core.v1.Node",
    ("", "Event"): "io.k8s.api.core.v1.Event",
    ("events.k8s.io", "Event"): "io.k8s.api.events.v1.Event",
    (
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
    ): "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
}
_BUILTIN_FIELDS: dict[tuple[str, str], dict[str, str]] = {
    ("", "Event"): {
        "involvedObject": "The object this event is about.",
        "reason": "Short machine-readable reason for the event.",
        "message": "Human-readable description of the event.",
        "type": "Normal or Warning.",
        "source": "The component that reported the event.",
    },
    ("events.k8s.io", "Event"): {
        "regarding": "The object this event is about.",
        "reason": "Why the action was taken.",
        "note": "Human-readable description of the event.",
        "type": "Normal or Warning.",
        "reportingController": "The controller that emitted the event.",
    },
}
_DESCRIPTIONS = {
    "Namespace": "A namespace: a scope for names.",
    "Pod": "A pod: a group of containers run together on one node.",
    "Node": "A node: a worker machine pods run on.",
    "Event": "A report of something that happened in the cluster.",
    "CustomResourceDefinition": "Declares a custom resource served by the API server.",
}


def builtin_kind_name(rt: ResourceType) -> str:
    return _BUILTIN_NAMES.get(
        (rt.group, rt.kind), f"io.k8s.api.{rt.group or 'core'}.{rt.version}.{rt.kind}"
    )


def builtin_kind_schema(rt: ResourceType) -> dict[str, Any]:
    """A top-level-only schema for a built-in kind (see the module docstring)."""
    properties: dict[str, Any] = {**type_meta_properties(), "metadata": object_meta_property()}
    fields = _BUILTIN_FIELDS.get((rt.group, rt.kind))
    if fields is None:
        properties["spec"] = {"type": "object", "description": f"The desired {rt.kind}."}
        properties["status"] = {"type": "object", "description": f"The observed {rt.kind}."}
    else:
        for name, description in fields.items():
            properties[name] = {
                "type": "object" if name in ("involvedObject", "regarding", "source") else "string",
                "description": description,
            }
    properties["metadata"]["default"] = {}
    return {
        "type": "object",
        "description": _DESCRIPTIONS.get(rt.kind, rt.kind),
        "properties": properties,
        "x-kubernetes-group-version-kind": [
            {"group": rt.group, "kind": rt.kind, "version": rt.version}
        ],
    }
