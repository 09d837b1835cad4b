"""The container runtime endpoint (`--cri-endpoint`): a unix socket, as the kubelet's.

Stage: edge (configuration, pure). Input: the setting's text. Output: the socket's
path, or `ValueError` saying what is accepted. Only `unix:///ABSOLUTE/PATH` is: the
kubelet's own `--container-runtime-endpoint` form on Linux. A bare path (which the
kubelet still takes with a deprecation warning), a TCP address or a relative path
is refused with the form to write instead, so a typo stops the daemon at start-up
instead of leaving every exec probe Unknown.
"""

from __future__ import annotations

__all__ = ["DEFAULT_ENDPOINT", "socket_path"]

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
