"""The client layer's one error tree, mapped once from an HTTP answer.

Stage: the edge of `probemarker.kube`. Input: an HTTP status code, the body and
headers of a failed answer, and what the request was (`RequestInfo`). Output:
one `ApiError` subclass per case the daemon decides on. Transport failures
(connect refused, reset, TLS, a deadline) are `ApiUnreachable`; `sessions.py` is
the only module that turns aiohttp's exceptions into them.

What Kubernetes sends (apimachinery `metav1.Status`, `apierrors`): a failed
request carries a Status body with `reason` and `code`; 422 Invalid lists its
causes in `details.causes`; 429 and some 5xx answers carry `Retry-After`
(also `details.retryAfterSeconds`). The status code decides the class, as
`apierrors.ReasonForError`/`IsNotFound` & co. do; the reason only refines it
(a 422 that says the JSON patch did not apply is `ApiPatchTestFailed`).

Invariants: pure (no I/O); every error's `str()` names the request (verb,
resource, namespace, name) and the server's message; a Forbidden says which RBAC
rule is missing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = [
    "ApiBadRequest",
    "ApiConflict",
    "ApiError",
    "ApiForbidden",
    "ApiGone",
    "ApiInvalid",
    "ApiMalformed",
    "ApiNotFound",
    "ApiPatchTestFailed",
    "ApiServerError",
    "ApiTimeout",
    "ApiTooManyRequests",
    "ApiUnauthorized",
    "ApiUnreachable",
    "Cause",
    "KubeError",
    "RequestInfo",
    "error_from_response",
    "loads_object",
]


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """What a request does, in RBAC's terms (verb, group, resource/subresource, scope)."""

    verb: str
    resource: str
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    group: str = ""

    @property
    def full_resource(self) -> str:
        """`pods/status`, `podprobemarkers.probemarker.io`: as RBAC rules spell it."""
        resource = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        return f"{resource}.{self.group}" if self.group else resource

    def __str__(self) -> str:
        where = f" in namespace {self.namespace!r}" if self.namespace else ""
        name = f" {self.name!r}" if self.name else ""
        return f"{self.verb} {self.full_resource}{name}{where}"


@dataclass(frozen=True, slots=True)
class Cause:
    """One entry of a Status's `details.causes`."""

    reason: str
    message: str
    field: str


class KubeError(Exception):
    """Base of every error the client layer raises."""

    def __init__(self, message: str, *, request: RequestInfo | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.request = request

    def __str__(self) -> str:
        if self.request is None:
            return self.message
        return f"{self.request}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"


class ApiError(KubeError):
    """The API server answered with an error status."""

    def __init__(
        self,
        message: str,
        *,
        code: int,
        reason: str = "",
        status: dict[str, Any] | None = None,
        request: RequestInfo | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, request=request)
        self.code = code
        self.reason = reason
        self.status = status
        self.retry_after = retry_after

    def __str__(self) -> str:
        return f"{super().__str__()} ({self.code} {self.reason or 'error'})"


class ApiBadRequest(ApiError):
    """400: the request itself is malformed (a bug on our side, or a refused upgrade)."""


class ApiUnauthorized(ApiError):
    """401: the credentials were refused (after one re-read of the token)."""


# How kube-apiserver words a refusal by admission rather than by the authorizer: a
# ValidatingAdmissionPolicy (policy/validating/dispatcher.go) or a webhook
# (webhook/errors/statuserror.go). Both are 403s whose fix is not in RBAC.
_ADMISSION_REFUSALS = ("ValidatingAdmissionPolicy '", "admission webhook ")


class ApiForbidden(ApiError):
    """403: RBAC (or an admission policy) refused the request."""

    def __str__(self) -> str:
        hint = ""
        if any(text in self.message for text in _ADMISSION_REFUSALS):
            hint = "; refused by admission, not by RBAC (the message says why; docs/security.md)"
        elif self.request is not None:
            hint = (
                f"; the service account needs verb {self.request.verb!r} on "
                f"{self.request.full_resource!r}"
                + (f" in namespace {self.request.namespace!r}" if self.request.namespace else "")
                + " (see manifests/rbac/)"
            )
        return f"forbidden: {KubeError.__str__(self)}{hint}"


class ApiNotFound(ApiError):
    """404: the object (or the resource type) does not exist."""


class ApiConflict(ApiError):
    """409: a write lost a race (resourceVersion precondition, or already exists)."""


class ApiGone(ApiError):
    """410: the resourceVersion asked for is older than the server's history."""


class ApiInvalid(ApiError):
    """422: the server refused the object or the patch; `causes` says why."""

    def __init__(self, message: str, *, causes: tuple[Cause, ...] = (), **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.causes = causes


class ApiPatchTestFailed(ApiInvalid):
    """422: the JSON patch did not apply to the current object (a `test` operation did
    not hold, or a path it names is gone): re-read and recompute."""


class ApiTooManyRequests(ApiError):
    """429: throttled (API priority and fairness, or max-in-flight); see `retry_after`."""


class ApiServerError(ApiError):
    """5xx: the server failed; retrying later may succeed."""


class ApiMalformed(KubeError):
    """The server's answer is not what the API promises (not JSON, a line too long)."""


class ApiUnreachable(KubeError):
    """No answer: connection refused or reset, TLS failure, the connection lost."""


class ApiTimeout(ApiUnreachable):
    """A deadline expired before the answer (or the next byte of a stream) arrived."""


_BY_CODE: dict[int, type[ApiError]] = {
    400: ApiBadRequest,
    401: ApiUnauthorized,
    403: ApiForbidden,
    404: ApiNotFound,
    409: ApiConflict,
    410: ApiGone,
    422: ApiInvalid,
    429: ApiTooManyRequests,
}

# A JSON patch that does not apply to the current object (a failed `test`, a path that
# is gone): handlers/patch.go answers NewGenericServerResponse(422, ..., err.Error(), 0,
# false), whose message is this fixed text, with no causes: json-patch's own error
# ("testing value /x failed: test failed") never reaches the client. A patched object
# that fails validation is a 422 too, but says `<Kind> "<name>" is invalid: ...`.
_PATCH_DID_NOT_APPLY = "the server rejected our request due to an error in our request"
# json-patch's wording, for servers (or proxies) that pass it through.
_TEST_FAILED = re.compile(r"\btest(ing value .*)? failed\b")


def _did_not_apply(message: str, causes: tuple[Cause, ...]) -> bool:
    if message.startswith(_PATCH_DID_NOT_APPLY):
        return True
    return any(_TEST_FAILED.search(text) for text in (message, *(c.message for c in causes)))


def loads_object(raw: bytes, *, what: str, request: RequestInfo | None) -> dict[str, Any]:
    """`raw` parsed as one JSON object, or `ApiMalformed` naming `what` it should be."""
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        raise ApiMalformed(f"{what} is not JSON: {err}", request=request) from err
    if not isinstance(parsed, dict):
        raise ApiMalformed(f"{what} is not a JSON object", request=request)
    return parsed


def _parse_status(body: bytes) -> dict[str, Any] | None:
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if isinstance(parsed, dict) and parsed.get("kind", "Status") == "Status":
        return parsed
    return None


def _retry_after(headers: Mapping[str, str], status: Mapping[str, Any] | None) -> float | None:
    value = headers.get("Retry-After")
    if value is not None:
        try:
            return max(0.0, float(value))
        except ValueError:
            pass  # an HTTP date: not something kube-apiserver sends
    details = status.get("details") if status else None
    seconds = details.get("retryAfterSeconds") if isinstance(details, dict) else None
    return float(seconds) if isinstance(seconds, int | float) else None


def _causes(status: Mapping[str, Any] | None) -> tuple[Cause, ...]:
    details = status.get("details") if status else None
    raw = details.get("causes") if isinstance(details, dict) else None
    if not isinstance(raw, list):
        return ()
    return tuple(
        Cause(
            reason=str(c.get("reason", "")),
            message=str(c.get("message", "")),
            field=str(c.get("field", "")),
        )
        for c in raw
        if isinstance(c, dict)
    )


def error_from_response(
    code: int, body: bytes, headers: Mapping[str, str], request: RequestInfo | None
) -> ApiError:
    """The error for a failed answer: the class from `code`, the text from its Status."""
    status = _parse_status(body)
    if status is not None and status.get("message"):
        message = str(status["message"])
    else:
        # Not a Status (the kubelet's plain-text errors, a proxy's page): keep it short.
        text = body.decode("utf-8", "replace").strip()
        message = text[:512] if text else f"HTTP {code}"
    reason = str(status.get("reason", "")) if status else ""
    cls = _BY_CODE.get(code, ApiServerError if code >= 500 else ApiError)
    kwargs: dict[str, Any] = {
        "code": code,
        "reason": reason,
        "status": status,
        "request": request,
        "retry_after": _retry_after(headers, status),
    }
    if cls is ApiInvalid:
        causes = _causes(status)
        invalid = ApiPatchTestFailed if _did_not_apply(message, causes) else ApiInvalid
        return invalid(message, causes=causes, **kwargs)
    return cls(message, **kwargs)
