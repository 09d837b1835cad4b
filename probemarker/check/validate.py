"""`probemarker validate`: PodProbeMarker files checked offline, with the API server's rules.

Stage: edge (I/O: reads files, prints lines); the decisions are api/validation.py's.
Exit codes: 0 no PodProbeMarker is invalid (documents of other kinds are skipped with a
note; a Kruise apiVersion gets a note; a file without any PodProbeMarker gets a note),
1 any invalid (including text that is not YAML), 2 input that cannot be read at all.
`probemarker check -f` validates its marker file here first (`validate_document`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TextIO

from probemarker.api import rules
from probemarker.api.documents import Document, DocumentError, load_documents, other_object
from probemarker.api.parse import marker_ref_text
from probemarker.api.validation import validate_marker
from probemarker.kit.printable import printable

__all__ = [
    "EXIT_INVALID",
    "EXIT_OK",
    "EXIT_UNREADABLE",
    "KRUISE_NOTE",
    "FileReport",
    "validate_document",
    "validate_files",
    "validate_text",
]

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_UNREADABLE = 2

KRUISE_NOTE = (
    f"apiVersion {rules.KRUISE_API_VERSION} is Kruise's group; apply it with "
    f"apiVersion: {rules.API_VERSION} (the group of probemarker's CRD), or keep it and run "
    f"the daemon with --marker-group {rules.KRUISE_GROUP} (where Kruise's CRD is installed "
    "and Kruise's own prober is off; its RBAC rule: manifests/components/kruise-group/)."
)


@dataclass(slots=True)
class FileReport:
    """What `validate_text` found in one file."""

    markers: int = 0  # PodProbeMarker documents checked, valid or not
    invalid: int = 0  # documents (or the whole file, when not YAML) with errors
    skipped: int = 0  # documents of other kinds

    @property
    def ok(self) -> bool:
        return self.invalid == 0


def validate_files(files: Sequence[str], *, out: TextIO, err: TextIO) -> int:
    """Validate every document of every file; print one line per marker, error or note."""
    worst = EXIT_OK
    for name in files:
        try:
            text = sys.stdin.read() if name == "-" else _read(name)
        except (OSError, UnicodeDecodeError) as exc:
            err.write(printable(f"{name}: cannot read: {_reason(exc)}") + "\n")
            worst = EXIT_UNREADABLE
            continue
        if not validate_text(name, text, out=out).ok:
            worst = max(worst, EXIT_INVALID)
    return worst


def validate_text(name: str, text: str, *, out: TextIO) -> FileReport:
    """Print results for one file's text: each PodProbeMarker validated, each document
    of another kind skipped with a note, and a note when the file holds no marker."""
    label = "<stdin>" if name == "-" else printable(name)
    report = FileReport()
    try:
        documents = list(load_documents(text))
    except DocumentError as exc:
        out.write(f"{label}: {printable(str(exc))}\n")
        report.invalid += 1
        return report
    for doc in documents:
        other = other_object(doc.body)
        if other is not None:
            out.write(
                f"{label}: {doc.where}: skipped {other.kind} {other.name} "
                f"({other.api_version}): not a PodProbeMarker\n"
            )
            report.skipped += 1
            continue
        report.markers += 1
        if not validate_document(label, doc, out=out):
            report.invalid += 1
    if report.markers == 0:
        out.write(f"{label}: {_nothing_found(report.skipped)}\n")
    return report


def validate_document(label: str, doc: Document, *, out: TextIO) -> bool:
    """Print OK or the errors of one PodProbeMarker document; True when it is valid.
    Each line goes through `printable`: an error's path holds the marker's own keys
    (`labels[KEY]`), which may carry escape sequences or bidi marks."""
    label, ref = printable(label), printable(marker_ref_text(doc.body))
    errors = validate_marker(doc.body)
    if not errors:
        out.write(f"OK {ref} ({label}, {doc.where})\n")
    for error in errors:
        out.write(f"{label}: {doc.where}: PodProbeMarker {ref}: {printable(str(error))}\n")
    if _is_kruise_marker(doc.body):
        out.write(f"{label}: {doc.where}: note: PodProbeMarker {ref}: {KRUISE_NOTE}\n")
    return not errors


def _is_kruise_marker(body: object) -> bool:
    return (
        isinstance(body, Mapping)
        and body.get("apiVersion") == rules.KRUISE_API_VERSION
        and body.get("kind") == rules.KIND
    )


def _nothing_found(skipped: int) -> str:
    if skipped == 0:
        return "no documents found, so no PodProbeMarker to validate"
    if skipped == 1:
        return "no PodProbeMarker found (1 document of another kind skipped)"
    return f"no PodProbeMarker found ({skipped} documents of other kinds skipped)"


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def _reason(exc: OSError | UnicodeDecodeError) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    return exc.strerror or str(exc)
