"""The error tree: every status the daemon decides on maps to its own class (pure)."""

from __future__ import annotations

import orjson
import pytest

from probemarker.kube.connect.errors import (
    ApiBadRequest,
    ApiConflict,
    ApiError,
    ApiForbidden,
    ApiGone,
    ApiInvalid,
    ApiNotFound,
    ApiPatchTestFailed,
    ApiServerError,
    ApiTooManyRequests,
    ApiUnauthorized,
    Cause,
    RequestInfo,
    error_from_response,
)

PATCH = RequestInfo("patch", "pods", namespace="games", name="gs-1", subresource="status")


def status(code: int, reason: str, message: str, **details: object) -> bytes:
    body: dict[str, object] = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return orjson.dumps(body)


@pytest.mark.parametrize(
    ("code", "reason", "message", "cls"),
    [
        pytest.param(400, "BadRequest", "bad", ApiBadRequest, id="400"),
        pytest.param(401, "Unauthorized", "Unauthorized", ApiUnauthorized, id="401"),
        pytest.param(403, "Forbidden", "pods is forbidden", ApiForbidden, id="403"),
        pytest.param(404, "NotFound", 'pods "gs-1" not found', ApiNotFound, id="404"),
        pytest.param(409, "Conflict", "the object has been modified", ApiConflict, id="409"),
        pytest.param(410, "Expired", "too old resource version: 1 (5)", ApiGone, id="410"),
        pytest.param(422, "Invalid", 'Pod "gs-1" is invalid', ApiInvalid, id="422-invalid"),
        pytest.param(
            422,
            "Invalid",
            "testing value /metadata/labels/role failed: test failed",
            ApiPatchTestFailed,
            id="422-test-op-failed",
        ),
        pytest.param(
            422,
            "Invalid",
            "the server rejected our request due to an error in our request",
            ApiPatchTestFailed,
            id="422-patch-did-not-apply-as-kube-apiserver-says-it",
        ),
        pytest.param(429, "TooManyRequests", "slow down", ApiTooManyRequests, id="429"),
        pytest.param(500, "InternalError", "boom", ApiServerError, id="500"),
        pytest.param(503, "ServiceUnavailable", "down", ApiServerError, id="503"),
        pytest.param(504, "Timeout", "timeout", ApiServerError, id="504"),
        pytest.param(405, "MethodNotAllowed", "no", ApiError, id="405-generic"),
    ],
)
def test_status_code_decides_the_class(code: int, reason: str, message: str, cls: type) -> None:
    error = error_from_response(code, status(code, reason, message), {}, PATCH)
    assert type(error) is cls
    assert (error.code, error.reason, error.message) == (code, reason, message)
    assert message in str(error)
    assert "patch pods/status 'gs-1' in namespace 'games'" in str(error)


def test_retry_after_header_and_details() -> None:
    by_header = error_from_response(
        429, status(429, "TooManyRequests", "x"), {"Retry-After": "3"}, None
    )
    assert by_header.retry_after == 3.0
    by_details = error_from_response(
        503, status(503, "ServiceUnavailable", "x", retryAfterSeconds=7), {}, None
    )
    assert by_details.retry_after == 7.0
    assert error_from_response(500, status(500, "InternalError", "x"), {}, None).retry_after is None


def test_invalid_keeps_causes() -> None:
    body = status(
        422,
        "Invalid",
        'Pod "p" is invalid: metadata.labels: Invalid value: "-x"',
        causes=[
            {
                "reason": "FieldValueInvalid",
                "message": 'Invalid value: "-x"',
                "field": "metadata.labels",
            }
        ],
    )
    error = error_from_response(422, body, {}, PATCH)
    assert isinstance(error, ApiInvalid)
    assert not isinstance(error, ApiPatchTestFailed)
    assert error.causes == (Cause("FieldValueInvalid", 'Invalid value: "-x"', "metadata.labels"),)


def test_forbidden_names_verb_resource_namespace_and_the_fix() -> None:
    message = (
        'pods "gs-1" is forbidden: User "system:serviceaccount:probemarker-system:probemarker" cannot '
        'patch resource "pods/status" in API group "" in the namespace "games"'
    )
    text = str(error_from_response(403, status(403, "Forbidden", message), {}, PATCH))
    assert text.startswith("forbidden: patch pods/status 'gs-1' in namespace 'games': ")
    assert message in text
    assert "needs verb 'patch' on 'pods/status' in namespace 'games'" in text
    assert "manifests/rbac/" in text


def test_a_refusal_by_an_admission_policy_does_not_point_at_rbac() -> None:
    """The node-scope policy's 403 (docs/security.md): the role is fine, the write is not."""
    message = (
        "pods \"gs-1\" is forbidden: ValidatingAdmissionPolicy 'probemarker-node-scope' with "
        "binding 'probemarker-node-scope' denied request: probemarker may write only pods on "
        "its own node (token node: node-a, pod node: node-b)"
    )
    text = str(error_from_response(403, status(403, "Forbidden", message), {}, PATCH))
    assert message in text
    assert "needs verb" not in text
    assert text.endswith(
        "; refused by admission, not by RBAC (the message says why; docs/security.md)"
    )


def test_group_resource_is_spelt_as_rbac_does() -> None:
    info = RequestInfo("watch", "podprobemarkers", group="probemarker.io")
    error = error_from_response(403, b"", {}, info)
    assert "'podprobemarkers.probemarker.io'" in str(error)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(
            b'container not found ("app")', 'container not found ("app")', id="plain-text"
        ),
        pytest.param(b"", "HTTP 502", id="empty"),
        pytest.param(b"x" * 2000, "x" * 512, id="long-text-cut"),
        pytest.param(b'{"kind": "Pod"}', '{"kind": "Pod"}', id="json-not-status"),
    ],
)
def test_answers_that_are_not_a_status(body: bytes, expected: str) -> None:
    error = error_from_response(502, body, {}, None)
    assert isinstance(error, ApiServerError)
    assert error.message == expected
    assert error.status is None or error.status.get("kind") == "Status"
