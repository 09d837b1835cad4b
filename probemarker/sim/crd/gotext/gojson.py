"""Decoding a JSON request body into Go types the way kube-apiserver's codec does
(sigs.k8s.io/json, the encoding/json fork behind apimachinery's json serializer).

Stage: the first step of a write of a built-in kind described by a type table (for CRDs,
`validation.crdtypes`); nothing is validated yet. Input: an already parsed JSON value (dicts, lists,
str, int, float, bool, None) and the name of its Go type. Output: a `Decoded` with

* `value`: the value as the Go struct holds it, re-expressed as JSON: unknown keys dropped,
  `null` of a pointer, slice or map removed (nil), `null` of a string/bool/number removed
  (Go keeps the zero value), everything else as given (empty lists stay empty: Go tells an
  empty slice from a nil one);
* `error`: the fatal decode error, as Go words it (`json: cannot unmarshal array into Go
  struct field JSONSchemaProps.spec.versions.schema.openAPIV3Schema.properties.type of
  type string`), or None. Go keeps the first type error and goes on; an error returned by a
  custom UnmarshalJSON aborts at once and wins. Either makes the request a 400;
* `strict`: the strict-decoding errors (`unknown field "spec.versions[0].foo"`), deduplicated,
  at most 100, in document order, only when no fatal error occurred. Paths join struct
  fields and map keys with `.`, list items as `[i]`, as sigs.k8s.io/json does.

Quirks kept on purpose: values handled by a custom UnmarshalJSON that calls json.Unmarshal
itself (a schema's `items`, `additionalProperties`, `dependencies` values) are decoded
without strictness, so unknown keys in them are dropped silently (kubernetes#128033); a type
error inside them is reported with the struct and field of the outermost field holding them.
`encode` applies Go's `omitempty` when the decoded value is stored.

Invariant: inputs are never mutated. Duplicate keys are not detected (the body arrives
already parsed).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from probemarker.sim.crd.gotext.fielderr import go_quote
from probemarker.sim.jsontype import go_json_type

__all__ = ["Decoded", "Field", "GoType", "Registry", "TypeError_", "decode", "encode"]

Kind = Literal["string", "bool", "int", "float", "bytes", "struct", "slice", "map", "custom"]
_MAX_STRICT = 100


@dataclass(frozen=True, slots=True)
class Field:
    """One struct field: its JSON name, the key of its type, pointer-ness and omitempty."""

    json: str
    type: str
    pointer: bool = False
    omitempty: bool = True


@dataclass(frozen=True, slots=True)
class GoType:
    """A Go type: `name` is reflect.Type.String() (`v1.JSONSchemaProps`, `[]string`), `elem`
    the key of the element type (slices, maps), `bits` the size of an integer,
    `custom` the name of a custom unmarshaler registered in the Registry."""

    kind: Kind
    name: str
    elem: str = ""
    bits: int = 64
    fields: tuple[Field, ...] = ()
    custom: str = ""


@dataclass(frozen=True, slots=True)
class TypeError_:
    """encoding/json's UnmarshalTypeError."""

    value: str
    type: str
    struct: str = ""
    field: str = ""

    def message(self) -> str:
        if self.struct or self.field:
            return (
                f"json: cannot unmarshal {self.value} into Go struct field "
                f"{self.struct}.{self.field} of type {self.type}"
            )
        return f"json: cannot unmarshal {self.value} into Go value of type {self.type}"


DecodeError = TypeError_ | str


class _Abort(Exception):
    """An error returned by a custom UnmarshalJSON: decoding stops at once."""

    def __init__(self, error: DecodeError) -> None:
        super().__init__(str(error))
        self.error = error


# A custom unmarshaler: (registry, raw value) -> (decoded value, error or None); a custom
# encoder: (registry, decoded value) -> the value as stored.
Unmarshaler = Callable[["Registry", Any], tuple[Any, "DecodeError | None"]]
Encoder = Callable[["Registry", Any], Any]


@dataclass(slots=True)
class Registry:
    """The Go types a body can be decoded into, by key, and their custom unmarshalers."""

    types: dict[str, GoType] = field(default_factory=dict)
    unmarshalers: dict[str, Unmarshaler] = field(default_factory=dict)
    encoders: dict[str, Encoder] = field(default_factory=dict)

    def add(self, key: str, go_type: GoType) -> None:
        self.types[key] = go_type

    def get(self, key: str) -> GoType:
        return self.types[key]


@dataclass(frozen=True, slots=True)
class Decoded:
    value: Any
    error: DecodeError | None
    strict: tuple[str, ...]

    @property
    def error_message(self) -> str:
        error = self.error
        return error.message() if isinstance(error, TypeError_) else str(error or "")


def _number_text(value: int | float) -> str:
    return str(value) if isinstance(value, int) else repr(value)


@dataclass(slots=True)
class _State:
    registry: Registry
    strict: bool
    saved: DecodeError | None = None
    strict_errors: list[str] = field(default_factory=list)
    struct: str = ""
    fields: list[str] = field(default_factory=list)
    stack: list[str] = field(default_factory=list)

    def save(self, value: str, type_name: str) -> None:
        if self.saved is None:
            self.saved = TypeError_(value, type_name, self.struct, ".".join(self.fields))

    def unknown(self, key: str) -> None:
        path = "".join(self.stack) + "." + key if self.stack else key
        message = f"unknown field {go_quote(path)}"
        if len(self.strict_errors) < _MAX_STRICT and message not in self.strict_errors:
            self.strict_errors.append(message)

    def push_key(self, key: str) -> None:
        if self.strict:
            self.stack.append("." + key if self.stack else key)

    def abort(self, error: DecodeError) -> _Abort:
        """An error from a custom unmarshaler, as this decoder's caller sees it."""
        if isinstance(error, TypeError_) and (self.struct or self.fields):
            error = TypeError_(error.value, error.type, self.struct, ".".join(self.fields))
        return _Abort(error)


def decode(registry: Registry, type_key: str, value: Any, *, strict: bool) -> Decoded:
    """Decode `value` into the Go type `type_key` (see the module docstring)."""
    state = _State(registry, strict)
    try:
        out = _value(state, registry.get(type_key), value)
    except _Abort as abort:
        return Decoded(None, abort.error, ())
    if state.saved is not None:
        return Decoded(out, state.saved, ())
    return Decoded(out, None, tuple(state.strict_errors))


def decode_inner(registry: Registry, type_key: str, value: Any) -> tuple[Any, DecodeError | None]:
    """json.Unmarshal as a custom UnmarshalJSON calls it: not strict; the first error."""
    decoded = decode(registry, type_key, value, strict=False)
    return decoded.value, decoded.error


def _value(state: _State, go: GoType, value: Any, *, pointer: bool = False) -> Any:
    """The decoded value; None for nil or a zero value (the caller drops the key)."""
    if value is None and (pointer or go.kind != "custom"):
        return None
    if go.kind == "custom":
        out, error = state.registry.unmarshalers[go.custom](state.registry, value)
        if error is not None:
            raise state.abort(error)
        return out
    if isinstance(value, dict):
        return _object(state, go, value)
    if isinstance(value, list):
        return _array(state, go, value)
    return _literal(state, go, value)


def _literal(state: _State, go: GoType, value: Any) -> Any:
    kind = go.kind
    if isinstance(value, bool):
        if kind == "bool":
            return value
    elif isinstance(value, str):
        if kind == "string":
            return value
        if kind == "bytes":
            return _base64(state, value)
    elif kind == "int":
        limit = 1 << (go.bits - 1)
        if isinstance(value, int) and -limit <= value < limit:
            return value
        state.save("number " + _number_text(value), go.name)
        return None
    elif kind == "float":
        return value
    state.save(go_json_type(value), go.name)
    return None


def _base64(state: _State, text: str) -> Any:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        bad = re.search(r"[^A-Za-z0-9+/=]", text)
        position = bad.start() if bad else max(len(text) - len(text) % 4, 0)
        if state.saved is None:
            state.saved = f"illegal base64 data at input byte {position}"
        return None
    return text


def _array(state: _State, go: GoType, value: list[Any]) -> Any:
    if go.kind not in ("slice", "bytes"):
        state.save("array", go.name)
        return None
    elem = state.registry.get(go.elem if go.kind == "slice" else "uint8")
    depth = len(state.stack)
    out = []
    for index, item in enumerate(value):
        if state.strict:
            state.stack.append(f"[{index}]")
        out.append(_value(state, elem, item))
        del state.stack[depth:]
    return out


def _object(state: _State, go: GoType, value: Mapping[str, Any]) -> Any:
    if go.kind == "map":
        return _map(state, go, value)
    if go.kind != "struct":
        state.save("object", go.name)
        return None
    by_name = {f.json: f for f in go.fields}
    saved_struct, saved_fields, depth = state.struct, len(state.fields), len(state.stack)
    out: dict[str, Any] = {}
    for key, item in value.items():
        spec = by_name.get(key)
        if spec is None:
            if state.strict:
                state.unknown(key)
            continue
        state.fields.append(spec.json)
        state.struct = go.name.rpartition(".")[2]
        state.push_key(spec.json)
        go_field = state.registry.get(spec.type)
        decoded = _value(state, go_field, item, pointer=spec.pointer)
        if decoded is not None:
            out[key] = decoded
        elif item is not None and spec.pointer and go_field.kind == "custom":
            out[key] = (
                None  # allocated but empty (items: "x" gives an empty JSONSchemaPropsOrArray)
            )
        del state.fields[saved_fields:]
        del state.stack[depth:]
        state.struct = saved_struct
    return out


def _map(state: _State, go: GoType, value: Mapping[str, Any]) -> dict[str, Any]:
    elem = state.registry.get(go.elem)
    depth = len(state.stack)
    out: dict[str, Any] = {}
    for key, item in value.items():
        state.push_key(key)
        decoded = _value(state, elem, item)
        out[key] = decoded if decoded is not None else _zero(elem)
        del state.stack[depth:]
    return out


def _zero(go: GoType) -> Any:
    """The zero value a map keeps for a key whose value was null (or did not decode)."""
    return {"string": "", "bool": False, "int": 0, "float": 0.0, "struct": {}}.get(go.kind)


def encode(registry: Registry, type_key: str, value: Any) -> Any:
    """`value` (a decoded value) as Go's encoder writes it: omitempty fields at their zero
    value dropped."""
    go = registry.get(type_key)
    if go.kind == "custom":
        encoder = registry.encoders.get(go.custom)
        return encoder(registry, value) if encoder is not None else value
    if go.kind == "struct" and isinstance(value, dict):
        out: dict[str, Any] = {}
        by_name = {f.json: f for f in go.fields}
        for key, item in value.items():
            spec = by_name[key]
            if spec.omitempty and _empty(item, spec):
                continue
            out[key] = encode(registry, spec.type, item)
        return out
    if go.kind == "slice" and isinstance(value, list):
        return [encode(registry, go.elem, item) for item in value]
    if go.kind == "map" and isinstance(value, dict):
        return {key: encode(registry, go.elem, item) for key, item in value.items()}
    return value


def _empty(value: Any, spec: Field) -> bool:
    if spec.pointer:
        return False
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float | str | list | dict):
        return not value
    return False
