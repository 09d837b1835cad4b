"""`probemarker status --local`: the reader that runs inside the daemon's container.

Stage: edge (I/O: a blocking Unix socket). Input: `StatusOptions` (the command line,
checked here: `check_options`) and the environment. Output: the daemon's
answer on its socket, as it is (`read_answer`, `print_local`).

Why a module of its own, on the standard library only: `status` runs this reader
through `pods/exec` in the daemon's container, under the daemon's memory limit, once
per node asked and per operator asking. It imports neither the event loop, the API
client nor an HTTP library (tests/unit/status/test_status_cli.py holds it to that):
the process is a plain interpreter, not a second daemon-sized one beside the daemon.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from probemarker.api.names import dns1123_label_problems, dns1123_subdomain_problems
from probemarker.kit.printable import printable

__all__ = [
    "ANSWER_LIMIT",
    "DAEMON_CONTAINER",
    "DAEMON_NAMESPACE",
    "DAEMON_SELECTOR",
    "DEFAULT_SOCKET",
    "SOCKET_ENV",
    "SOCKET_WAIT",
    "StatusOptions",
    "UsageError",
    "check_namespace",
    "check_node",
    "check_options",
    "check_ref",
    "print_local",
    "read_answer",
    "request_line",
    "socket_path",
]

DAEMON_NAMESPACE = "probemarker-system"
DAEMON_SELECTOR = "app.kubernetes.io/name=probemarker"
DAEMON_CONTAINER = "probemarker"
DEFAULT_SOCKET = "/run/probemarker/status.sock"
SOCKET_ENV = "PROBEMARKER_STATUS_SOCKET"
ANSWER_LIMIT = 32 << 20  # bytes of one daemon's answer
SOCKET_WAIT = 20.0  # seconds for the daemon's answer on its socket


class UsageError(Exception):
    """A problem with the command line: printed, exit 2."""


@dataclass(frozen=True, slots=True)
class StatusOptions:
    node: str | None = None
    pod: str | None = None  # NS/NAME
    marker: str | None = None  # NS/NAME
    namespace: str | None = None  # only the pods of this namespace
    output: str = "text"
    local: bool = False
    socket: str | None = None
    daemon_namespace: str = DAEMON_NAMESPACE
    daemon_selector: str = DAEMON_SELECTOR
    daemon_container: str = DAEMON_CONTAINER


def check_ref(text: str | None, flag: str) -> None:
    """`NS/NAME` (a namespace and an object's name as the API server takes them) or
    UsageError naming the flag and the fix: a value no object can have would match
    nothing and be passed on to the daemon's reader as an argument."""
    if text is None:
        return
    namespace, sep, name = text.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise UsageError(
            f"{flag} '{printable(text)}': expected NAMESPACE/NAME, for example default/web-0"
        )
    problems = dns1123_label_problems(namespace)
    if problems:
        raise UsageError(
            f"{flag} '{printable(text)}': the namespace {problems[0]}; expected NAMESPACE/NAME, "
            "for example default/web-0"
        )
    problems = dns1123_subdomain_problems(name)
    if problems:
        raise UsageError(
            f"{flag} '{printable(text)}': the name {problems[0]}; expected NAMESPACE/NAME, "
            "for example default/web-0"
        )


def check_namespace(text: str | None, flag: str, example: str) -> None:
    """A namespace's name (a DNS label) or UsageError naming `flag` and the fix: an
    empty one would ask the API server for `/namespaces//pods` (a 404) or the daemon for
    no namespace at all."""
    if text is None:
        return
    problems = dns1123_label_problems(text)
    if problems:
        raise UsageError(
            f"{flag} '{printable(text)}': a namespace {problems[0]}; {example} "
            "(kubectl get namespaces lists them)"
        )


def check_node(text: str | None) -> None:
    """A node's name (a DNS subdomain) or UsageError naming --node and the fix: an empty
    or malformed one would select other pods than a node's (`spec.nodeName=`)."""
    if text is None:
        return
    problems = dns1123_subdomain_problems(text)
    if problems:
        raise UsageError(
            f"--node '{printable(text)}': a node's name {problems[0]} "
            "(kubectl get nodes lists them)"
        )


def check_options(options: StatusOptions) -> None:
    """UsageError, naming the flag and the fix, for any value no object can have, and
    for `-n` with a `--pod` or `--marker` of another namespace."""
    check_node(options.node)
    check_namespace(options.namespace, "-n", "the namespace whose pods to show")
    check_ref(options.pod, "--pod")
    check_ref(options.marker, "--marker")
    check_namespace(
        options.daemon_namespace,
        "--daemon-namespace",
        "the namespace the DaemonSet runs in (probemarker-system by default)",
    )
    for flag, ref in (("--pod", options.pod), ("--marker", options.marker)):
        if (
            options.namespace is not None
            and ref is not None
            and not ref.startswith(f"{options.namespace}/")
        ):
            raise UsageError(
                f"{flag} '{printable(ref)}' is not in namespace {options.namespace} (-n): "
                "give one namespace, or leave -n out"
            )


def request_line(options: StatusOptions) -> bytes:
    """The request the socket reads (observe/statussocket.py); the namespace only when
    asked, so that a daemon older than `-n` still answers the rest."""
    body: dict[str, str | None] = {"pod": options.pod, "marker": options.marker}
    if options.namespace is not None:
        body["namespace"] = options.namespace
    return json.dumps(body).encode() + b"\n"


def socket_path(options: StatusOptions, environ: Mapping[str, str]) -> str:
    return options.socket or environ.get(SOCKET_ENV) or DEFAULT_SOCKET


def read_answer(
    path: str, request: bytes, *, wait: float = SOCKET_WAIT, limit: int | None = None
) -> bytes:
    """The daemon's answer at `path` to `request`, all of it within `wait` seconds and
    `limit` bytes (`ANSWER_LIMIT`); OSError (with a message that says what to check)
    when there is none."""
    limit = ANSWER_LIMIT if limit is None else limit
    deadline = time.monotonic() + wait
    chunks: list[bytes] = []
    size = 0
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(wait)
            conn.connect(path)
            conn.sendall(request)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                conn.settimeout(left)
                chunk = conn.recv(1 << 16)
                if not chunk:
                    break
                size += len(chunk)
                if size > limit:
                    break
                chunks.append(chunk)
    except TimeoutError as exc:
        raise OSError(f"status socket {path}: no answer within {wait:.0f}s") from exc
    except FileNotFoundError as exc:
        raise OSError(
            f"status socket {path}: not found; is the daemon running with "
            f"--status-socket {path} (PROBEMARKER_STATUS_SOCKET)?"
        ) from exc
    except OSError as exc:
        raise OSError(f"status socket {path}: {exc.strerror or exc}") from exc
    if size > limit:
        raise OSError(
            f"status socket {path}: the answer is larger than {limit >> 20} MiB; "
            "narrow it with --pod or --marker"
        )
    return b"".join(chunks)


def print_local(options: StatusOptions, environ: Mapping[str, str], *, out: Any) -> None:
    """`--local`: the daemon's answer on stdout as it is (bytes, `out` a binary stream)."""
    out.write(read_answer(socket_path(options, environ), request_line(options)))
    out.flush()
