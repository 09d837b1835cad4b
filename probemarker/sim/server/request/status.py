"""Kubernetes `Status` bodies for errors raised by the server layer itself.

The store's own errors (`probemarker.sim.errors.ApiError`) carry their Status;
this module covers what only the HTTP layer knows about (bad bodies, media
types, auth, injected failures, unknown paths) with the same shape, and
renders any error as an aiohttp response.  Messages follow kube-apiserver's
wording (k8s.io/apimachinery/pkg/api/errors).
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from probemarker.sim.crd.gotext.fielderr import go_quote
from probemarker.sim.errors import ApiError


class StatusError(ApiError):
    """An HTTP-layer error carrying a full `Status` (positional shorthand for ApiError)."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(
            code=code, reason=reason, message=message, details=details, retry_after=retry_after
        )


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def not_found_path() -> StatusError:
    return StatusError(404, "NotFound", "the server could not find the requested resource")


def method_not_allowed(verb: str, resource: str) -> StatusError:
    return StatusError(
        405, "MethodNotAllowed", f'{verb} is not supported on resources of kind "{resource}"'
    )


def unsupported_media_type(content_type: str, accepted: list[str]) -> StatusError:
    return StatusError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(accepted)}",
    )


def unauthorized() -> StatusError:
    return StatusError(401, "Unauthorized", "Unauthorized")


_INJECTED = {
    400: ("BadRequest", "the request is refused by an injected fault"),
    404: ("NotFound", "the server could not find the requested resource"),
    409: ("Conflict", "Operation cannot be fulfilled: injected conflict"),
    410: ("Expired", "too old resource version: injected"),
    422: ("Invalid", "the object is refused by an injected fault"),
}


def _forbidden_message(info: Any, user: str) -> str:
    """kube-apiserver's text for an RBAC refusal (responsewriters.forbiddenMessage)."""
    resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    scope = (
        f"in the namespace {go_quote(info.namespace)}" if info.namespace else "at the cluster scope"
    )
    why = (
        f"User {go_quote(user)} cannot {info.verb} resource {go_quote(resource)} "
        f"in API group {go_quote(info.group)} {scope}"
    )
    group_resource = f"{info.resource}.{info.group}" if info.group else info.resource
    name = f" {go_quote(info.name)}" if info.name else ""
    return f"{group_resource}{name} is forbidden: {why}"


def injected_failure(
    code: int, retry_after: int, info: Any = None, user: str = "sim-user"
) -> StatusError:
    """The Status kube-apiserver sends for overload (429), unavailability, refusals."""
    if code == 401:
        return unauthorized()
    if code == 403 and info is not None:
        return StatusError(
            403,
            "Forbidden",
            _forbidden_message(info, user),
            details={"name": info.name or "", "group": info.group, "kind": info.resource},
        )
    if code in _INJECTED:
        reason, message = _INJECTED[code]
        return StatusError(code, reason, message)
    if code == 429:
        return StatusError(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
            details={},
            retry_after=retry_after,
        )
    if code == 503:
        return StatusError(
            503,
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
            details={},
            retry_after=retry_after,
        )
    return StatusError(
        500,
        "InternalError",
        "Internal error occurred: injected failure",
        details={"causes": [{"message": "injected failure"}]},
    )


def error_response(error: ApiError) -> web.Response:
    status = error.to_status()
    headers = {}
    if error.retry_after is not None:
        headers["Retry-After"] = str(error.retry_after)
    return web.Response(
        status=int(status.get("code", 500)),
        body=orjson.dumps(status),
        content_type="application/json",
        headers=headers,
    )


def json_response(obj: Any, *, status: int = 200) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(obj), content_type="application/json")
