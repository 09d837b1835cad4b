"""Sending one JSON patch to a pod's `status` subresource.

Stage: the last step of the write path; the writer (a later issue) builds the
operations, guards them with `test` operations, coalesces and retries. Input: the
pod (namespace, name), the RFC 6902 operations, the status writes' `TokenBucket`. Output:
the pod as the API server stored it, or one error of the tree, unretried:

- `ApiPatchTestFailed`: the patch did not apply to the pod as it is now (a `test`
  operation failed, or an operation's path no longer exists): re-read, recompute.
  kube-apiserver says so with a 422 whose message is a fixed text and which has no
  causes (handlers/patch.go drops json-patch's error); kube/connect/errors.py recognises it;
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
newest desired state); a token of the status writes' bucket is taken before it is sent
(by this call, or by the caller when it passes `limiter=None`: the writer takes the
token before it picks whose turn it is, write/queue.py);
the body is serialised with orjson; `wait` bounds the request, not the wait
for a token (the caller bounds both with `asyncio.timeout` if it needs to).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from probemarker.kube.connect.client import KubeClient
from probemarker.kube.connect.resources import PODS
from probemarker.kube.write.ratelimit import TokenBucket

__all__ = ["JSON_PATCH", "patch_pod_status"]

JSON_PATCH = "application/json-patch+json"


def _plain(value: object) -> object:
    """orjson serialises dicts and lists; a caller's other Mappings and Sequences too."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


async def patch_pod_status(
    client: KubeClient,
    *,
    namespace: str,
    name: str,
    ops: Sequence[Mapping[str, Any]],
    limiter: TokenBucket | None,
    wait: float | None = None,
) -> dict[str, Any]:
    """PATCH `ops` (RFC 6902) to the pod's status subresource; the stored pod back.

    `limiter`: the bucket to take a token of first; None: the caller took it.
    `wait`: seconds for the request (default: the client's `request_timeout`).
    An empty `ops` is refused (`ValueError`): nothing to write means no request.
    """
    if not ops:
        raise ValueError("patch_pod_status needs at least one operation")
    body = orjson.dumps(ops if isinstance(ops, list) else list(ops), default=_plain)
    info = PODS.info("patch", namespace, name, "status")
    if limiter is not None:
        await limiter.acquire()
    return await client.request(
        "PATCH",
        PODS.path(namespace, name, "status"),
        info=info,
        body=body,
        content_type=JSON_PATCH,
        wait=wait,
    )
