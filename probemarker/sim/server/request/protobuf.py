"""Decoding the few Kubernetes protobuf request bodies kubectl sends.

kubectl's typed clients (e.g. `kubectl create namespace`) send bodies as
`application/vnd.kubernetes.protobuf` and do not fall back to JSON on 415, so
the sim decodes those it meets: the `k8s\\x00` envelope (runtime.Unknown:
typeMeta=1, raw=2) around a message described by the small field tables below
(field numbers from k8s.io/api/core/v1/generated.proto and
k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto).  The result is the
JSON-shaped dict the rest of the server works with.  Responses stay JSON
(clients send `Accept: ...protobuf,application/json`).

Kinds outside the tables are refused with 415 UnsupportedMediaType by the
caller.  Pure functions.
"""

from __future__ import annotations

from typing import Any

MAGIC = b"k8s\x00"

# message name -> field number -> (json name, type); types: "string", "int64", "bool",
# "strings" (repeated string), "map" (map<string,string>), or another message name.
_MESSAGES: dict[str, dict[int, tuple[str, str]]] = {
    "Unknown": {
        1: ("typeMeta", "TypeMeta"),
        2: ("raw", "bytes"),
        3: ("contentEncoding", "string"),
        4: ("contentType", "string"),
    },
    "TypeMeta": {1: ("apiVersion", "string"), 2: ("kind", "string")},
    "ObjectMeta": {
        1: ("name", "string"),
        2: ("generateName", "string"),
        3: ("namespace", "string"),
        5: ("uid", "string"),
        6: ("resourceVersion", "string"),
        7: ("generation", "int64"),
        11: ("labels", "map"),
        12: ("annotations", "map"),
        14: ("finalizers", "strings"),
    },
    "Namespace": {
        1: ("metadata", "ObjectMeta"),
        2: ("spec", "NamespaceSpec"),
        3: ("status", "NamespaceStatus"),
    },
    "NamespaceSpec": {1: ("finalizers", "strings")},
    "NamespaceStatus": {1: ("phase", "string")},
}
DECODABLE_KINDS = frozenset({"Namespace"})


class ProtobufError(ValueError):
    pass


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) of every field; value is int or bytes."""
    out: list[tuple[int, int, Any]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        out.append((number, wire, value))
    return out


def _decode(data: bytes, message: str) -> dict[str, Any]:
    table = _MESSAGES[message]
    out: dict[str, Any] = {}
    for number, _wire, value in _fields(data):
        if number not in table:
            continue
        name, kind = table[number]
        if kind == "string":
            if value:  # proto2 sends empty optionals; JSON's omitempty drops them
                out[name] = bytes(value).decode()
        elif kind == "bytes":
            out[name] = bytes(value)
        elif kind in ("int64", "bool"):
            out[name] = bool(value) if kind == "bool" else int(value)
        elif kind == "strings":
            out.setdefault(name, []).append(bytes(value).decode())
        elif kind == "map":
            entry = {n: bytes(v).decode() for n, _w, v in _fields(value)}
            out.setdefault(name, {})[entry.get(1, "")] = entry.get(2, "")
        else:
            out[name] = _decode(value, kind)
    return out


def decode_object(body: bytes) -> dict[str, Any]:
    """The JSON-shaped object in a protobuf request body; ProtobufError if not decodable."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf envelope")
    unknown = _decode(body[len(MAGIC) :], "Unknown")
    type_meta = unknown.get("typeMeta", {})
    kind = type_meta.get("kind", "")
    if kind not in DECODABLE_KINDS:
        raise ProtobufError(f"protobuf bodies of kind {kind!r} are not supported by the sim")
    obj = _decode(unknown.get("raw", b""), kind)
    obj["apiVersion"] = type_meta.get("apiVersion", "v1")
    obj["kind"] = kind
    return obj
