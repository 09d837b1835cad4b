"""The container runtime endpoint (`--cri-endpoint`): a unix socket, as the kubelet's.

Stage: edge (configuration, pure). Input: the setting's text. Output: the socket's
path, or `ValueError` saying what is accepted. Only `unix:///ABSOLUTE/PATH` is: the
kubelet's own `--container-runtime-endpoint` form on Linux. A bare path (which the
kubelet still takes with a deprecation warning), a TCP address or a relative path
is refused with the form to write instead, so a typo stops the daemon at start-up
instead of leaving every exec probe Unknown.

`socket_problem` is the one function here that looks at the file system: when the
runtime refuses a call, it tells a path that is no socket at all (a regular file, a
directory: connect() says "Connection refused" for those too, the text docs/cri.md
gives for a stale socket mount) from a socket nobody listens on.
"""

from __future__ import annotations

import os
import stat

__all__ = ["DEFAULT_ENDPOINT", "socket_path", "socket_problem"]

DEFAULT_ENDPOINT = "unix:///run/containerd/containerd.sock"
_SCHEME = "unix://"
_SUN_PATH_MAX = 107  # bytes of sockaddr_un.sun_path on Linux, less its NUL
_EXAMPLES = (
    "containerd: unix:///run/containerd/containerd.sock, CRI-O: unix:///var/run/crio/crio.sock"
)


def socket_path(endpoint: str) -> str:
    """The path of the socket that `endpoint` names (see the module docstring)."""
    text = endpoint.strip()
    if text.startswith("/"):
        raise ValueError(f"must be a unix:// URL: write unix://{text}")
    if not text.startswith(_SCHEME):
        raise ValueError(f"must be a unix socket, unix:///PATH ({_EXAMPLES})")
    path = text.removeprefix(_SCHEME)
    if not path.startswith("/"):
        raise ValueError(f"must name an absolute path after unix://, e.g. unix:///{path}")
    if "?" in path or "#" in path:
        raise ValueError("must be a plain socket path, without a query or fragment")
    if len(path.encode()) > _SUN_PATH_MAX:
        raise ValueError(f"must name a socket path of at most {_SUN_PATH_MAX} bytes")
    return path


_KINDS = (
    (stat.S_ISREG, "a regular file"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def socket_problem(path: str) -> str | None:
    """Why `path` cannot be the runtime's socket, when the file there is not a socket;
    None for a socket, a missing path or one that cannot be looked at (the connection's
    own error says enough then)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISSOCK(mode):
        return None
    kind = next((name for test, name in _KINDS if test(mode)), "not a socket")
    return (
        f"{path} is {kind}, not a socket: --cri-endpoint must name the container "
        f"runtime's socket ({_EXAMPLES})"
    )
