"""httpGet through the API server's pod proxy, for `probemarker check --via-api-proxy`.

Stage: probe (a `ProbeHandler`). Input: an `HTTPGetAction`, the `ProbeTarget` and the
run's time limit. Output: an `Outcome`. From outside the cluster the pod IP cannot be
reached; the API server can reach it: `GET /api/v1/namespaces/NS/pods/NAME:PORT/proxy/PATH`
(`https:NAME:PORT` for HTTPS) is sent by kube-apiserver to `podIP:PORT/PATH`
(pkg/registry/core/pod/strategy.go, ResourceLocation), and the pod's answer comes back
as it is: its status, Content-Type and body. Needs `get` on `pods/proxy`.

How an answer is judged:

| answer | outcome |
|---|---|
| the pod's status 200-399 | Succeeded, the body (first 1 KiB) |
| the pod's status 400 and up, or below 200 | Failed, the daemon's words (`http.failure_message`) |
| a Status 503 `error trying to reach service: ...` (the API server could not dial the pod, apimachinery util/proxy) | Failed, as the kubelet's refused connection |
| any other Status from the API server (403: no `get` on pods/proxy; 400 `address not allowed`: no pod IP; 404) | Unknown, naming it |
| no answer in the time limit | Failed, "timed out" |
| the API server unreachable | Unknown |

Where it differs from the daemon's own GET (probe/http.py): the request is the API
server's, not ours: the marker's `httpHeaders` are not sent (the message says so when
there are any), redirects are not followed (a 3xx counts as Succeeded, as the kubelet's
"Probe terminated redirects"), and the time limit includes the hop to the API server.
A pod whose own answer is a JSON `Status` of kind v1 Status is taken for the API
server's: a probe endpoint does not answer in that shape.
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import quote

import orjson

from probemarker.api.model import Handler, HTTPGetAction
from probemarker.kube.connect.client import KubeClient, RawAnswer
from probemarker.kube.connect.errors import ApiTimeout, KubeError
from probemarker.kube.connect.resources import PODS
from probemarker.probe.handler import OwnsConnections, ProbeTarget
from probemarker.probe.http import BODY_LIMIT, failure_message, request_url
from probemarker.probe.outcome import Outcome
from probemarker.probe.output import clean_message
from probemarker.probe.ports import Address

__all__ = ["UNREACHABLE_PREFIX", "ApiProxyHTTPGetHandler", "judge_proxy_answer", "proxy_path"]

UNREACHABLE_PREFIX: Final = "error trying to reach service"
_STATUS_BODY_LIMIT: Final = 64 << 10


def _port_number(port: int | str, ports: Any) -> int | None:
    number = port if isinstance(port, int) else ports.get(port)
    return number if isinstance(number, int) and 0 < number < 65536 else None


def proxy_path(action: HTTPGetAction, target: ProbeTarget) -> str | None:
    """The pods/proxy path for `action` on `target`, or None when its named port is
    not among the container's ports (the API server would dial the name as it is)."""
    port = _port_number(action.port, target.ports)
    if port is None:
        return None
    # The marker's path as the daemon sends it (query kept, a leading / added).
    url = request_url(action.scheme, Address("0.0.0.0", port), action.path)
    scheme = "https:" if action.scheme.upper() == "HTTPS" else ""
    pod = quote(f"{scheme}{target.pod}:{port}", safe=":")
    base = PODS.path(target.namespace, None)
    query = f"?{url.raw_query_string}" if url.raw_query_string else ""
    return f"{base}/{pod}/proxy{url.raw_path}{query}"


def _status_of(answer: RawAnswer) -> dict[str, Any] | None:
    """The answer's body as an API server Status, or None when it is not one."""
    if not answer.content_type.startswith("application/json"):
        return None
    try:
        body = orjson.loads(answer.body)
    except orjson.JSONDecodeError:
        return None
    if isinstance(body, dict) and body.get("kind") == "Status" and body.get("apiVersion") == "v1":
        return body
    return None


def judge_proxy_answer(answer: RawAnswer, *, headers_left_out: bool = False) -> Outcome:
    """The outcome of one pods/proxy answer (see the module docstring)."""
    status = _status_of(answer) if answer.status >= 400 else None
    if status is not None:
        message = str(status.get("message") or status.get("reason") or "")
        if answer.status == 503 and message.startswith(UNREACHABLE_PREFIX):
            return Outcome.failed(f"through the API server proxy: {message}")
        return Outcome.unknown(
            f"the API server refused the proxy request: HTTP {answer.status} "
            f"{status.get('reason') or ''}: {message}".replace(" : ", ": ")
        )
    body = clean_message(answer.body[:BODY_LIMIT].decode("utf-8", errors="replace"))
    note = " (the marker's httpHeaders were not sent through the proxy)" if headers_left_out else ""
    if answer.status >= 400 or answer.status < 200:
        return Outcome.failed(failure_message(answer.status, body) + note, answer=body)
    if answer.status >= 300:
        return Outcome.succeeded(
            f"warning: HTTP {answer.status} through the API server proxy, not followed{note}"
            + (f": {body}" if body else ""),
            answer=body,
        )
    return Outcome.succeeded(body, answer=body)


class ApiProxyHTTPGetHandler(OwnsConnections):
    """Runs httpGet actions through pods/proxy with `client` (see the module)."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client

    def __repr__(self) -> str:
        return f"ApiProxyHTTPGetHandler(server={self._client.connection.server!r})"

    async def run(self, action: Handler, target: ProbeTarget, *, time_limit: float) -> Outcome:
        if not isinstance(action, HTTPGetAction):
            raise TypeError(f"ApiProxyHTTPGetHandler cannot run {type(action).__name__}")
        try:
            path = proxy_path(action, target)
        except ValueError as err:
            return Outcome.unknown(f"cannot build the request for {target}: {err}")
        if path is None:
            return Outcome.unknown(
                f"container {target.container} has no port named {action.port!r} in its ports"
            )
        info = PODS.info("get", target.namespace, target.pod, "proxy")
        try:
            answer = await self._client.request_raw(
                "GET", path, info=info, wait=time_limit, limit=_STATUS_BODY_LIMIT
            )
        except ApiTimeout:
            return Outcome.failed(
                f"GET {path} through the API server proxy timed out after {time_limit:g}s"
            )
        except KubeError as err:
            return Outcome.unknown(f"the API server proxy could not be asked: {err}")
        return judge_proxy_answer(answer, headers_left_out=bool(action.headers))
