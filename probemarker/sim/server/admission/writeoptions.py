"""What a write request carries besides its target: its options and its JSON body.

:class:`WriteOptions` are a write's query options, parsed and validated as
kube-apiserver's ValidateCreateOptions/UpdateOptions/PatchOptions/DeleteOptions do
(422 on ``<kind>.meta.k8s.io ""``): ``dryRun`` must be ``All``, ``fieldValidation``
one of Strict/Warn/Ignore (default Warn), ``fieldManager`` at most 128 bytes of
printable characters (messages quote it as Go's %q does). :func:`decode_body` decodes
a request body, a 400 when it is not JSON. Pure but for ``WriteOptions.warnings``,
which collects the ``Warning`` headers a write produces.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from probemarker.sim.errors import Invalid, StatusCause
from probemarker.sim.server.request.status import bad_request

__all__ = ["WriteOptions", "decode_body"]


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """Query options of a write: `fieldValidation` (Strict, Warn or Ignore; kube-apiserver's
    default is Warn) and `dryRun=All`.  `warnings` collects the `Warning` headers to send."""

    field_validation: str = "Warn"
    dry_run: bool = False
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def from_query(cls, query: Mapping[str, str], *, kind: str = "DeleteOptions") -> WriteOptions:
        """Parse and validate (ValidateCreateOptions/UpdateOptions/PatchOptions/DeleteOptions:
        422 on ``<kind>.meta.k8s.io ""``) a write's query. ``kind`` names the options kind."""
        causes: list[StatusCause] = []
        dry_run = query.get("dryRun")
        if dry_run not in (None, "All"):
            causes.append(
                StatusCause(
                    "FieldValueNotSupported",
                    f'Unsupported value: []string{{"{dry_run}"}}: supported values: "All"',
                    "dryRun",
                )
            )
        validation = query.get("fieldValidation") or ""
        if kind != "DeleteOptions":
            causes += _field_manager_causes(query.get("fieldManager") or "")
            if validation not in ("", "Strict", "Warn", "Ignore"):
                causes.append(
                    StatusCause(
                        "FieldValueNotSupported",
                        f'Unsupported value: "{validation}": supported values: "", "Ignore", '
                        '"Strict", "Warn"',
                        "fieldValidation",
                    )
                )
        if causes:
            raise Invalid(kind, "meta.k8s.io", "", causes)
        return cls(field_validation=validation or "Warn", dry_run=dry_run == "All")


_FIELD_MANAGER_MAX = 128
_GO_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def _go_quote(text: str) -> str:
    """``text`` as Go's %q prints it."""
    out = []
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def _field_manager_causes(manager: str) -> list[StatusCause]:
    """ValidateFieldManager: at most 128 bytes, printable characters only."""
    causes: list[StatusCause] = []
    if len(manager.encode()) > _FIELD_MANAGER_MAX:
        causes.append(
            StatusCause(
                "FieldValueTooLong",
                f"Too long: may not be more than {_FIELD_MANAGER_MAX} bytes",
                "fieldManager",
            )
        )
    for index, ch in enumerate(manager):
        if not ch.isprintable():
            position = len(manager[:index].encode())
            causes.append(
                StatusCause(
                    "FieldValueInvalid",
                    f"Invalid value: {_go_quote(manager)}: invalid character U+{ord(ch):04X} "
                    f"(at position {position})",
                    "fieldManager",
                )
            )
    return causes


def decode_body(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise bad_request(f"error decoding request body: {exc}") from None
