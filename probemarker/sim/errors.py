"""One exception tree for the whole sim, each error carrying a Kubernetes ``Status``.

Every refusal the simulated API server sends is an :class:`ApiError`; the HTTP layer
turns it into a response with ``error.code`` and ``error.to_status()`` as the body.
Constructors follow ``k8s.io/apimachinery/pkg/api/errors`` (NewNotFound, NewConflict,
NewInvalid, NewResourceExpired, ...) and word their messages exactly as it does, e.g.
``pods "web-0" not found``.

Invariants: ``to_status()`` always returns a fresh dict shaped like a
``metav1.Status`` with ``status: Failure``; empty detail fields are omitted as Go's
``omitempty`` omits them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Conflict",
    "Expired",
    "Forbidden",
    "Gone",
    "InternalError",
    "Invalid",
    "MethodNotAllowed",
    "NotFound",
    "PatchFailed",
    "ServiceUnavailable",
    "StatusCause",
    "Timeout",
    "TooLargeResourceVersion",
    "TooManyRequests",
    "Unauthorized",
    "UnsupportedMediaType",
    "aggregate_message",
    "split_qualified_resource",
]

CONFLICT_MODIFIED = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


@dataclass(frozen=True, slots=True)
class StatusCause:
    """One ``metav1.StatusCause``: ``reason`` is a field.ErrorType such as FieldValueInvalid,
    ``message`` the error body (``Invalid value: 0: must be ...``), ``field`` the field path."""

    reason: str = ""
    message: str = ""
    field: str = ""

    def to_dict(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.reason:
            out["reason"] = self.reason
        if self.message:
            out["message"] = self.message
        if self.field:
            out["field"] = self.field
        return out

    def error_string(self) -> str:
        """The cause as ``field.Error.Error()`` prints it: ``<field>: <body>``."""
        return f"{self.field}: {self.message}" if self.field else self.message


def aggregate_message(messages: Sequence[str]) -> str:
    """Format errors as ``utilerrors.NewAggregate(...).Error()``: one message alone,
    several as ``[a, b]``, duplicates dropped."""
    seen: list[str] = []
    for m in messages:
        if m not in seen:
            seen.append(m)
    if len(seen) == 1:
        return seen[0]
    return "[" + ", ".join(seen) + "]"


def split_qualified_resource(qualified: str) -> tuple[str, str]:
    """``"podprobemarkers.probemarker.io"`` -> ``("podprobemarkers", "probemarker.io")``;
    ``"pods"`` -> ``("pods", "")`` (schema.ParseGroupResource)."""
    resource, _, group = qualified.partition(".")
    return resource, group


class ApiError(Exception):
    """An API refusal: what a Kubernetes ``Status`` needs, plus a private ``detail``
    (never sent) explaining the cause for logs and tests."""

    def __init__(
        self,
        *,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        retry_after: int | None = None,
        detail: str = "",
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.retry_after = retry_after
        self.detail = detail
        self.list_meta: dict[str, Any] = {}

    def to_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.list_meta),
            "status": "Failure",
        }
        if self.message:
            status["message"] = self.message
        if self.reason:
            status["reason"] = self.reason
        details = dict(self.details) if self.details is not None else None
        if self.retry_after is not None:
            details = details if details is not None else {}
            details["retryAfterSeconds"] = self.retry_after
        if details is not None:
            status["details"] = details
        status["code"] = self.code
        return status

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, reason={self.reason!r}, message={self.message!r})"


def _resource_details(qualified: str, name: str) -> dict[str, Any]:
    resource, group = split_qualified_resource(qualified)
    out: dict[str, Any] = {}
    if name:
        out["name"] = name
    if group:
        out["group"] = group
    if resource:
        out["kind"] = resource
    return out


class NotFound(ApiError):
    """``NewNotFound``: ``pods "web-0" not found`` (404). ``qualified`` is
    ``<plural>[.<group>]``."""

    def __init__(self, qualified: str, name: str) -> None:
        super().__init__(
            code=404,
            reason="NotFound",
            message=f'{qualified} "{name}" not found',
            details=_resource_details(qualified, name),
        )


class AlreadyExists(ApiError):
    """``NewAlreadyExists``: ``pods "web-0" already exists`` (409)."""

    def __init__(self, qualified: str, name: str) -> None:
        super().__init__(
            code=409,
            reason="AlreadyExists",
            message=f'{qualified} "{name}" already exists',
            details=_resource_details(qualified, name),
        )


class Conflict(ApiError):
    """``NewConflict``: ``Operation cannot be fulfilled on pods "web-0": <why>`` (409)."""

    def __init__(self, qualified: str, name: str, why: str = CONFLICT_MODIFIED) -> None:
        super().__init__(
            code=409,
            reason="Conflict",
            message=f'Operation cannot be fulfilled on {qualified} "{name}": {why}',
            details=_resource_details(qualified, name),
        )


class Invalid(ApiError):
    """``NewInvalid`` (422): ``Pod "web-0" is invalid: <aggregate of causes>``.

    ``kind`` is the Kind (``Pod``, ``PodProbeMarker``), ``group`` its API group; the
    qualified kind is ``Kind.group`` as schema.GroupKind prints it. ``message`` overrides
    the computed message (the CRD schema module words its own)."""

    def __init__(
        self,
        kind: str,
        group: str,
        name: str,
        causes: Sequence[StatusCause],
        *,
        message: str | None = None,
    ) -> None:
        qualified = f"{kind}.{group}" if group else kind
        if message is None:
            body = aggregate_message([c.error_string() for c in causes])
            message = f'{qualified} "{name}" is invalid: {body}'
        details: dict[str, Any] = {}
        if name:
            details["name"] = name
        if group:
            details["group"] = group
        if kind:
            details["kind"] = kind
        if causes:
            details["causes"] = [c.to_dict() for c in causes]
        super().__init__(code=422, reason="Invalid", message=message, details=details)
        self.causes = tuple(causes)


class PatchFailed(ApiError):
    """A JSON patch that does not apply (failed ``test``, missing path): kube-apiserver
    answers with ``NewGenericServerResponse(422, "", GroupResource{}, "", err, 0, false)``
    (handlers/patch.go). With ``isUnexpectedResponse`` false that Status has the generic
    message, empty details and no causes: the json-patch error never reaches the client
    (apimachinery pkg/api/errors). The sim keeps it in ``detail`` for its own logs."""

    def __init__(self, detail: str) -> None:
        super().__init__(
            code=422,
            reason="Invalid",
            message="the server rejected our request due to an error in our request",
            details={},
            detail=detail,
        )


class Gone(ApiError):
    """``NewGone`` (410, reason Gone)."""

    def __init__(self, message: str) -> None:
        super().__init__(code=410, reason="Gone", message=message)


class Expired(ApiError):
    """``NewResourceExpired`` (410, reason Expired): what the watch cache sends for
    ``too old resource version: 5 (120)`` and for an expired continue token; for the
    latter ``continue_token`` is the Status's ``metadata.continue`` (a token continuing
    the list at the latest version, as etcd3's handleCompactedErrorForPaging sets)."""

    def __init__(self, message: str, *, continue_token: str | None = None) -> None:
        super().__init__(code=410, reason="Expired", message=message)
        if continue_token:
            self.list_meta["continue"] = continue_token


class BadRequest(ApiError):
    """``NewBadRequest`` (400)."""

    def __init__(self, message: str) -> None:
        super().__init__(code=400, reason="BadRequest", message=message)


class MethodNotAllowed(ApiError):
    """``NewMethodNotSupported`` (405): ``<action> is not supported on resources of kind "<res>"``."""

    def __init__(self, qualified: str, action: str) -> None:
        resource, group = split_qualified_resource(qualified)
        details: dict[str, Any] = {"kind": resource}
        if group:
            details["group"] = group
        super().__init__(
            code=405,
            reason="MethodNotAllowed",
            message=f'{action} is not supported on resources of kind "{qualified}"',
            details=details,
        )


class Forbidden(ApiError):
    """``NewForbidden`` (403): ``pods "x" is forbidden: <why>``."""

    def __init__(self, qualified: str, name: str, why: str) -> None:
        subject = f'{qualified} "{name}"' if name else qualified
        super().__init__(
            code=403,
            reason="Forbidden",
            message=f"{subject} is forbidden: {why}",
            details=_resource_details(qualified, name),
        )


class Unauthorized(ApiError):
    """401 as the authentication filter sends it (message ``Unauthorized``)."""

    def __init__(self, message: str = "Unauthorized") -> None:
        super().__init__(code=401, reason="Unauthorized", message=message)


class TooManyRequests(ApiError):
    """429 with ``details.retryAfterSeconds`` (the HTTP layer also sets ``Retry-After``)."""

    def __init__(
        self, message: str = "Too many requests, please try again later.", *, retry_after: int = 1
    ) -> None:
        super().__init__(
            code=429, reason="TooManyRequests", message=message, details={}, retry_after=retry_after
        )


class InternalError(ApiError):
    """``NewInternalError`` (500): ``Internal error occurred: <err>``."""

    def __init__(self, err: str) -> None:
        super().__init__(
            code=500,
            reason="InternalError",
            message=f"Internal error occurred: {err}",
            details={"causes": [{"message": err}]},
        )


class ServiceUnavailable(ApiError):
    """``NewServiceUnavailable`` (503)."""

    def __init__(
        self, message: str = "the server is currently unable to handle the request"
    ) -> None:
        super().__init__(code=503, reason="ServiceUnavailable", message=message)


class Timeout(ApiError):
    """``NewTimeoutError`` (504): ``Timeout: <message>``."""

    def __init__(self, message: str, *, retry_after: int = 0) -> None:
        super().__init__(
            code=504,
            reason="Timeout",
            message=f"Timeout: {message}",
            details={},
            retry_after=retry_after or None,
        )


class TooLargeResourceVersion(Timeout):
    """storage.NewTooLargeResourceVersionError: a read for a resourceVersion the store
    has not reached within the wait (504, ``Timeout: Too large resource version: 9,
    current: 5``, retryAfterSeconds and a ``ResourceVersionTooLarge`` cause)."""

    def __init__(self, requested: int, current: int, *, retry_after: int = 1) -> None:
        super().__init__(
            f"Too large resource version: {requested}, current: {current}",
            retry_after=retry_after,
        )
        self.details = {
            "causes": [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ]
        }


PATCH_MEDIA_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
    "application/strategic-merge-patch+json",
)


class UnsupportedMediaType(ApiError):
    """``NewUnsupportedMediaTypeError`` (415), listing the accepted media types (for a
    custom resource, strategic merge patch is not among them)."""

    def __init__(self, accepted: Sequence[str] = PATCH_MEDIA_TYPES) -> None:
        super().__init__(
            code=415,
            reason="UnsupportedMediaType",
            message="the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(accepted),
        )
