"""How to answer an exec request before any WebSocket upgrade.

Stage: the first step of `probemarker.sim.exec.session.serve_exec`. Input: the HTTP
request, the `ExecTarget` and the current `ExecFaults`. Output: either the
HTTP answer that ends the request (an injected refusal, kube-apiserver's 400
"Upgrade request required" for a request that is not a WebSocket upgrade, the
kubelet's plain-text errors and x/net/websocket's 403 for the requests
kube-apiserver proxies to the kubelet) or a `Plan`: the subprotocol to
upgrade with, the effective options, and the error (if any) to report on the
error channel after the upgrade, as kube-apiserver's stream translator does
for v5 requests.

Pure decisions on the request headers and query; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from probemarker.sim.errors import ApiError, BadRequest
from probemarker.sim.exec.proto import (
    KUBELET_PROTOCOLS,
    V5,
    ExecOptions,
    go_json,
    parse_exec_options,
)
from probemarker.sim.exec.runners import ExecTarget

__all__ = ["ExecFaults", "Plan", "plan_exec"]


@dataclass(slots=True)
class ExecFaults:
    """Exec faults, switchable at run time (mutable on purpose).

    The two `drop_*` faults end a session the way real servers can after a
    complete status: golang.org/x/net/websocket's `Conn.Close` (under the
    kubelet's and the 1.30-1.3x API server's wsstream) writes the close frame and
    closes TCP at once, without waiting for the client's close; when the
    client's reply or the loss of that close frame turns the teardown into a
    reset, the client sees the connection drop (1006) after the status.
    """

    break_after_bytes: int | None = None  # drop the connection after N output bytes, no status
    stall: bool = False  # upgrade, then never send anything
    reject_status: int | None = None  # answer the upgrade request with this HTTP status
    drop_after_close: bool = False  # status, close frame, then TCP closed without waiting
    drop_after_status: bool = False  # status, then TCP closed with no close frame (1006)
    # A runtime slow to start the command (a throttled shim): seconds between the
    # "connection established" frame and the command's start, where real servers
    # have it (containerd's streaming exec starts the process after that frame).
    start_delay: float = 0.0

    def reset(self) -> None:
        """Switch every exec fault off."""
        self.break_after_bytes = None
        self.stall = False
        self.reject_status = None
        self.drop_after_close = False
        self.drop_after_status = False
        self.start_delay = 0.0


_NO_STREAMS = "you must specify at least 1 of stdin, stdout, stderr"  # kubelet NewOptions
_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def _status_response(err: ApiError) -> web.Response:
    headers = {"Retry-After": str(err.retry_after)} if err.retry_after is not None else None
    return web.Response(
        status=err.code,
        body=go_json(err.to_status()),
        content_type="application/json",
        headers=headers,
    )


def _fault_error(code: int) -> ApiError:
    return ApiError(
        code=code,
        reason=_REASONS.get(code, ""),
        message=f"exec refused by an injected fault ({code})",
        retry_after=1 if code == 429 else None,
    )


def _is_websocket(request: web.Request) -> bool:
    # wsstream.IsWebSocketRequest: Upgrade: websocket and an "upgrade" token in Connection
    if request.headers.get("Upgrade", "").lower() != "websocket":
        return False
    tokens = request.headers.get("Connection", "").lower().split(",")
    return "upgrade" in (t.strip() for t in tokens)


def _offered_protocols(request: web.Request) -> list[str]:
    header = ",".join(request.headers.getall("Sec-WebSocket-Protocol", []))
    return [p.strip() for p in header.split(",") if p.strip()]


@dataclass(frozen=True, slots=True)
class Plan:
    """How to answer: the subprotocol and options to upgrade with, and the
    error (if any) to report on the error channel instead of running."""

    protocol: str
    opts: ExecOptions
    failure: str | None = None


def _plan_upgrade(request: web.Request, target: ExecTarget) -> Plan | web.Response:
    opts = parse_exec_options(request.query)
    offered = _offered_protocols(request)
    not_running = f'container not found ("{target.container}")'  # kubelet GetExec
    if V5 in offered:
        # kube-apiserver's stream translator upgrades first; the kubelet's
        # refusal then reaches it through its SPDY client as an error.
        failure = None
        if not (opts.stdin or opts.stdout or opts.stderr):
            failure = f"unable to upgrade connection: {_NO_STREAMS}"
        elif not target.running:
            failure = f"unable to upgrade connection: {not_running}"
        return Plan(V5, opts, failure)
    # Proxied to the kubelet, whose errors are plain-text HTTP answers.
    if opts.tty and opts.stderr:
        opts = ExecOptions(opts.command, opts.container, opts.stdin, opts.stdout, False, True)
    if not (opts.stdin or opts.stdout or opts.stderr):
        return web.Response(status=400, text=_NO_STREAMS)
    if not target.running:
        return web.Response(status=500, text=not_running)
    chosen = next((p for p in offered or [""] if p in KUBELET_PROTOCOLS), None)
    if chosen is None:
        return web.Response(status=403)  # x/net/websocket: no acceptable subprotocol
    return Plan(chosen, opts)


def plan_exec(request: web.Request, target: ExecTarget, faults: ExecFaults) -> Plan | web.Response:
    """The answer that ends this request, or the plan for the WebSocket session."""
    if faults.reject_status is not None:
        return _status_response(_fault_error(faults.reject_status))
    if not _is_websocket(request):
        return _status_response(BadRequest("Upgrade request required"))
    return _plan_upgrade(request, target)
