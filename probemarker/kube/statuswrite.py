"""Sending one JSON patch to a pod's `status` subresource.

Stage: the last step of the write path; the writer (a later issue) builds the
operations, guards them with `test` operations, coalesces and retries. Input: the
pod (namespace, name), the RFC 6902 operations, the shared `TokenBucket`. Output:
the pod as the API server stored it, or one error of the tree, unretried:

- `ApiPatchTestFailed`: the patch did not apply to the pod as it is now (a `test`
  operation failed, or an operation's path no longer exists): re-read, recompute;
- `ApiConflict` (409): a `resourceVersion` precondition did not hold: the same;
- `ApiNotFound`: the pod is gone; `ApiTooManyRequests`/`ApiServerError` with
  `retry_after`, `ApiUnreachable`/`ApiTimeout`: retry later with the newest state;
- `ApiInvalid`: the patched pod is invalid (a bad label value): a bug to log.

Why pods/status: kube-apiserver's pod status strategy keeps the metadata changes
a status patch makes (labels, annotations), so labels, annotations and conditions go
out in one request, and RBAC needs `patch` on `pods/status` only, not on pods.

Why `application/json-patch+json`: RFC 6902 `test` operations guard index-based
changes of `status.conditions` (a list the kubelet also writes); a merge patch
would replace the whole list, a strategic merge patch cannot guard anything.

Invariants: one request per call (no retry here: the writer decides, with the
newest desired state); a token of the shared bucket is taken before it is sent;
the body is serialised with orjson; `deadline` bounds the request, not the wait
for a token (the caller bounds both with `asyncio.timeout` if it needs to).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import orjson

from probemarker.kube.client import KubeClient
from probemarker.kube.errors import ApiInvalid, ApiPatchTestFailed, RequestInfo
from probemarker.kube.ratelimit import TokenBucket

__all__ = ["JSON_PATCH", "patch_did_not_apply", "patch_pod_status", "pod_status_path"]

JSON_PATCH = "application/json-patch+json"

# kube-apiserver (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go,
# jsonPatcher.applyJSPatch) answers a JSON patch that does not apply with
# apierrors.NewGenericServerResponse(422, ..., isUnexpectedResponse=false): reason
# Invalid, this fixed message and no causes; the json-patch error text is dropped.
_DID_NOT_APPLY = "the server rejected our request due to an error in our request"
# evanphx/json-patch's own texts, in case a server passes them on (the sim puts them
# in an UnexpectedServerResponse cause): "testing value /x failed: test failed",
# "test operation does not apply: ...", "error in test for path: ...".
_JSON_PATCH_TEXT = re.compile(r"\btest(ing value .*)? failed\b|\btest operation does not apply\b")


def pod_status_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}/status"


def patch_did_not_apply(error: ApiInvalid) -> bool:
    """True if a 422 says the JSON patch did not apply to the current object.

    A patched object that fails validation is also a 422 Invalid, but its message
    names the object (`Pod "x" is invalid: ...`) and it has field causes.
    """
    if error.message.startswith(_DID_NOT_APPLY):
        return True
    texts = [error.message, *(cause.message for cause in error.causes)]
    return any(_JSON_PATCH_TEXT.search(text) for text in texts)


def _plain(value: object) -> object:
    """orjson serialises dicts and lists; a caller's other Mappings and Sequences too."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _as_test_failed(error: ApiInvalid) -> ApiPatchTestFailed:
    return ApiPatchTestFailed(
        error.message,
        causes=error.causes,
        code=error.code,
        reason=error.reason,
        status=error.status,
        request=error.request,
        retry_after=error.retry_after,
    )


async def patch_pod_status(
    client: KubeClient,
    *,
    namespace: str,
    name: str,
    ops: Sequence[Mapping[str, Any]],
    limiter: TokenBucket,
    deadline: float | None = None,
) -> dict[str, Any]:
    """PATCH `ops` (RFC 6902) to the pod's status subresource; the stored pod back.

    `deadline`: seconds for the request (default: the client's `request_timeout`).
    An empty `ops` is refused (`ValueError`): nothing to write means no request.
    """
    if not ops:
        raise ValueError("patch_pod_status needs at least one operation")
    body = orjson.dumps(ops if isinstance(ops, list) else list(ops), default=_plain)
    info = RequestInfo("patch", "pods", namespace=namespace, name=name, subresource="status")
    await limiter.acquire()
    try:
        return await client.request(
            "PATCH",
            pod_status_path(namespace, name),
            info=info,
            body=body,
            content_type=JSON_PATCH,
            deadline=deadline,
        )
    except ApiInvalid as error:
        # errors.py maps this too once it knows the generic 422 text; until then, here.
        if isinstance(error, ApiPatchTestFailed) or not patch_did_not_apply(error):
            raise
        raise _as_test_failed(error) from error
