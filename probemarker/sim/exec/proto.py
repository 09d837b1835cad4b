"""The remote-command protocol's pure parts: subprotocols, options, Status bodies.

Used by `probemarker.sim.exec.session` (the session). Everything here follows
Kubernetes' source:
- subprotocol names: k8s.io/apimachinery/pkg/util/remotecommand and
  httpstream/wsstream (`channel.k8s.io`, `base64.channel.k8s.io`, `v4.`/`v5.`);
- exec options from the query string: `PodExecOptions` with apimachinery's
  string-to-bool conversion (present and not "0"/"false" means true);
- the Status written on the error channel: by the kubelet's streaming server
  (cri/streaming/remotecommand/exec.go, containerd's wording for exit codes
  and runtime errors) and, for v5, as re-issued by kube-apiserver's stream
  translator (apiserver/pkg/util/proxy/streamtranslator.go) after its SPDY
  client (client-go remotecommand errorDecoderV4) decoded the kubelet's.

Invariant: Status JSON is byte-compatible with Go's encoding/json output
(field order, no kind/apiVersion, HTML-escaped <, >, &).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "KUBELET_PROTOCOLS",
    "V1",
    "V1_BASE64",
    "V4",
    "V4_BASE64",
    "V5",
    "ExecOptions",
    "go_json",
    "internal_status",
    "kubelet_status",
    "parse_exec_options",
    "status_payload",
    "translated_status",
]

V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"
V4_BASE64 = "v4.base64.channel.k8s.io"
V1 = "channel.k8s.io"
V1_BASE64 = "base64.channel.k8s.io"
# The kubelet's WebSocket subprotocols -> base64 codec?  ("" = none offered.)
KUBELET_PROTOCOLS = {"": False, V1: False, V1_BASE64: True, V4: False, V4_BASE64: True}
STDIN, STDOUT, STDERR, ERROR, RESIZE = range(5)
STREAM_CLOSE = 255  # v5: [255, channel] half-closes that channel


@dataclass(frozen=True, slots=True)
class ExecOptions:
    """`PodExecOptions` as read from the query string."""

    command: tuple[str, ...]
    container: str | None
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool


def _query_bool(values: Sequence[str]) -> bool:
    # apimachinery's Convert_Slice_string_To_bool: absent -> false; "0" or
    # "false" (any case) -> false; anything else, even "", -> true.
    if not values:
        return False
    return not (values[0] == "0" or values[0].lower() == "false")


def parse_exec_options(query: Any) -> ExecOptions:
    """Read exec options from a multi-valued query (aiohttp's `request.query`)."""

    def flag(name: str) -> bool:
        return _query_bool(query.getall(name, []))

    return ExecOptions(
        command=tuple(query.getall("command", [])),
        container=query.get("container") or None,
        stdin=flag("stdin"),
        stdout=flag("stdout"),
        stderr=flag("stderr"),
        tty=flag("tty"),
    )


def go_json(obj: Mapping[str, Any]) -> bytes:
    # encoding/json escapes <, >, & and U+2028/9 even outside HTML.
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escape)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").encode()


def _exit_status(code: int, inner: str) -> dict[str, Any]:
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: {inner}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


def internal_status(error: str) -> dict[str, Any]:
    # apierrors.NewInternalError(err)
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"Internal error occurred: {error}",
        "reason": "InternalError",
        "details": {"causes": [{"message": error}]},
        "code": 500,
    }


def kubelet_status(command: Sequence[str], outcome: int | str) -> dict[str, Any]:
    """The Status the kubelet's streaming server writes (containerd wording)."""
    if isinstance(outcome, str):
        return internal_status(f"error executing command in container: {outcome}")
    if outcome == 0:
        return {"metadata": {}, "status": "Success"}
    argv = "[" + " ".join(command) + "]"
    return _exit_status(outcome, f"error executing command {argv}, exit code {outcome}")


def translated_status(kubelet: dict[str, Any]) -> dict[str, Any]:
    """What the apiserver's stream translator re-issues for a kubelet Status."""
    if kubelet["status"] == "Success":
        return kubelet
    if kubelet.get("reason") == "NonZeroExitCode":
        code = int(kubelet["details"]["causes"][0]["message"])
        return _exit_status(code, f"command terminated with exit code {code}")
    return internal_status(str(kubelet.get("message", "")))


def status_payload(protocol: str, status: Mapping[str, Any]) -> bytes:
    if protocol in (V5, V4, V4_BASE64):
        return go_json(status)
    # pre-v4 protocols (v1WriteStatusFunc): nothing on success, else the message
    return b"" if status["status"] == "Success" else str(status.get("message", "")).encode()
