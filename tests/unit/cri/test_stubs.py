"""The committed runtime.v1 messages: generated from our proto, and the CRI's on the wire."""

from __future__ import annotations

from pathlib import Path

import pytest

from probemarker.cri import generate, runtime_v1_pb2

PACKAGE = Path(generate.__file__).parent

# (message, field, number, type) from k8s.io/cri-api pkg/apis/runtime/v1/api.proto:
# the numbers and types must be the CRI's, or a runtime reads other fields.
CRI_FIELDS = [
    ("VersionRequest", "version", 1, "string"),
    ("VersionResponse", "version", 1, "string"),
    ("VersionResponse", "runtime_name", 2, "string"),
    ("VersionResponse", "runtime_version", 3, "string"),
    ("VersionResponse", "runtime_api_version", 4, "string"),
    ("ContainerStatusRequest", "container_id", 1, "string"),
    ("ContainerStatus", "id", 1, "string"),
    ("ContainerStatus", "labels", 12, "message"),
    ("ContainerStatusResponse", "status", 1, "message"),
    ("ExecSyncRequest", "container_id", 1, "string"),
    ("ExecSyncRequest", "cmd", 2, "string"),
    ("ExecSyncRequest", "timeout", 3, "int64"),
    ("ExecSyncResponse", "stdout", 1, "bytes"),
    ("ExecSyncResponse", "stderr", 2, "bytes"),
    ("ExecSyncResponse", "exit_code", 3, "int32"),
]
_TYPE_NAMES = {9: "string", 3: "int64", 12: "bytes", 5: "int32", 11: "message"}


def test_the_committed_module_is_what_the_proto_generates(tmp_path: Path) -> None:
    for path in generate.generate(tmp_path):
        committed = (PACKAGE / path.name).read_text()
        assert path.read_text() == committed, (
            f"{path.name} is stale: run python -m probemarker.cri.generate"
        )


@pytest.mark.parametrize(("message", "field", "number", "kind"), CRI_FIELDS)
def test_fields_have_the_cris_numbers_and_types(
    message: str, field: str, number: int, kind: str
) -> None:
    descriptor = runtime_v1_pb2.DESCRIPTOR.message_types_by_name[message]
    assert descriptor.full_name == f"runtime.v1.{message}"
    found = descriptor.fields_by_name[field]
    assert (found.number, _TYPE_NAMES[found.type]) == (number, kind)


def test_no_field_is_declared_that_the_table_does_not_check() -> None:
    declared = {
        (message.name, field.name)
        for message in runtime_v1_pb2.DESCRIPTOR.message_types_by_name.values()
        for field in message.fields
    }  # top-level messages; the map's entry type is nested in ContainerStatus
    assert declared == {(m, f) for m, f, _, _ in CRI_FIELDS}


def test_the_service_and_methods_are_the_cris() -> None:
    service = runtime_v1_pb2.DESCRIPTOR.services_by_name["RuntimeService"]
    assert service.full_name == "runtime.v1.RuntimeService"
    assert {m.name for m in service.methods} == {"Version", "ContainerStatus", "ExecSync"}


def test_labels_are_a_string_map_and_the_status_is_a_container_status() -> None:
    messages = runtime_v1_pb2.DESCRIPTOR.message_types_by_name
    labels = messages["ContainerStatus"].fields_by_name["labels"]
    assert labels.message_type.GetOptions().map_entry
    key, value = labels.message_type.fields
    assert (key.number, key.type, value.number, value.type) == (1, 9, 2, 9)
    status = messages["ContainerStatusResponse"].fields_by_name["status"]
    assert status.message_type.full_name == "runtime.v1.ContainerStatus"


def test_fields_a_runtime_adds_are_skipped_on_decode() -> None:
    # A response with an unknown field 9 (varint 1) before exit_code 3 still decodes.
    data = bytes([0x48, 0x01, 0x18, 0x03])
    assert runtime_v1_pb2.ExecSyncResponse.FromString(data).exit_code == 3
