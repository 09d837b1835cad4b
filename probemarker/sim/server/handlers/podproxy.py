"""`pods/proxy`: the API server's HTTP proxy to a pod, as kube-apiserver serves it.

Stage: sim server (one subresource). Input: a GET of
`/api/v1/namespaces/NS/pods/ID/proxy[/PATH]` where ID is `NAME`, `NAME:PORT` or
`SCHEME:NAME:PORT` (SCHEME `http` or `https`). Output: the pod's own answer, status,
Content-Type and body passed through as they are; or a Kubernetes Status.

As kube-apiserver (pkg/registry/core/pod/strategy.go `ResourceLocation`, and
apimachinery's util/proxy transport):
- ID is split on `:` (utilnet.SplitSchemeNamePort): one part is the name, two are
  name and port, three are scheme, name and port; anything else, an empty name or
  another scheme is 400 BadRequest `invalid pod request "ID"`;
- a pod that does not exist is 404 NotFound;
- without a port, the first port declared by a container is used (none: no port, so
  the scheme's default);
- a pod without an IP is 400 BadRequest `address not allowed`;
- the request goes to `SCHEME://podIP:PORT/PATH?QUERY` (HTTPS without a certificate
  check, as the API server's proxy transport); a port that is a name, not a number,
  is dialled as it is and fails, as there;
- a pod that cannot be reached (refused, reset, timed out) is 503
  ServiceUnavailable `error trying to reach service: <the dial error>`.

Where the sim departs: kube-apiserver refuses a pod IP that is not global unicast
(loopback, link-local) with `address not allowed`; the sim's pods live on 127.0.1.x,
so the sim accepts loopback addresses. Only GET is served (405 otherwise), and the
answer's body is read whole (bounded by `BODY_LIMIT`), not streamed.
"""

from __future__ import annotations

import os
from typing import Any, Final

import aiohttp
from aiohttp import web

from probemarker.sim.errors import BadRequest, MethodNotAllowed, ServiceUnavailable

__all__ = ["BODY_LIMIT", "proxy_location", "serve_pod_proxy", "split_scheme_name_port"]

BODY_LIMIT: Final = 1024 * 1024
_TIMEOUT: Final = 60.0  # seconds: kube-apiserver's default request timeout
_SCHEMES: Final = frozenset({"", "http", "https"})
_PASSED_HEADERS: Final = ("Content-Type", "Location")


def split_scheme_name_port(text: str) -> tuple[str, str, str] | None:
    """utilnet.SplitSchemeNamePort: (scheme, name, port), or None when not valid."""
    parts = text.split(":")
    if len(parts) == 1:
        scheme, name, port = "", parts[0], ""
    elif len(parts) == 2:
        scheme, name, port = "", parts[0], parts[1]
    elif len(parts) == 3:
        scheme, name, port = parts
    else:
        return None
    if not name or scheme not in _SCHEMES:
        return None
    return scheme, name, port


def _first_port(pod: dict[str, Any]) -> str:
    for container in (pod.get("spec") or {}).get("containers") or []:
        ports = container.get("ports") or []
        if ports:
            return str(ports[0].get("containerPort", ""))
    return ""


def proxy_location(pod: dict[str, Any], scheme: str, port: str, path: str, query: str) -> str:
    """The URL the API server sends the request to (see the module docstring)."""
    ip = (pod.get("status") or {}).get("podIP") or ""
    if not ip:
        raise BadRequest("address not allowed")
    host = f"[{ip}]" if ":" in ip else ip
    port = port or _first_port(pod)
    authority = f"{host}:{port}" if port else host
    target = f"{scheme or 'http'}://{authority}/{path.lstrip('/')}"
    return f"{target}?{query}" if query else target


async def serve_pod_proxy(
    request: web.Request, *, pod_of: Any, proxy_id: str, path: str
) -> web.StreamResponse:
    """Answer one pods/proxy request; `pod_of(name)` is the pod (raises NotFound)."""
    if request.method not in ("GET", "HEAD"):
        raise MethodNotAllowed("pods/proxy", request.method)
    split = split_scheme_name_port(proxy_id)
    if split is None:
        raise BadRequest(f"invalid pod request {proxy_id!r}".replace("'", '"'))
    scheme, name, port = split
    pod = pod_of(name)
    url = proxy_location(pod, scheme, port, path, request.query_string)
    try:
        async with (
            aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=_TIMEOUT),
                auto_decompress=False,
                trust_env=False,
            ) as session,
            session.request(request.method, url, allow_redirects=False, ssl=False) as answer,
        ):
            body = await answer.content.read(BODY_LIMIT)
            headers = {h: answer.headers[h] for h in _PASSED_HEADERS if h in answer.headers}
            return web.Response(status=answer.status, body=body, headers=headers)
    except (aiohttp.ClientError, TimeoutError, OSError) as err:
        raise ServiceUnavailable(f"error trying to reach service: {_dial_error(url, err)}") from err


def _dial_error(url: str, err: BaseException) -> str:
    if isinstance(err, aiohttp.ClientConnectorError):
        code = err.os_error.errno
        reason = os.strerror(code).lower() if code else str(err.os_error)
        return f"dial tcp {err.host}:{err.port}: connect: {reason}"
    if isinstance(err, TimeoutError):
        return f"Get {url!r}: context deadline exceeded".replace("'", '"')
    return str(err) or type(err).__name__
