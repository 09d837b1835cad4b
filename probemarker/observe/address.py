"""The address the health and metrics server listens on, from `--metrics-address`.

Stage: configuration (pure). Input: the setting's text. Output: a `ListenAddress`
(host and port), or None for `0`: the server is off. A `ValueError` whose message
says what is accepted otherwise (daemon/settings.py puts the flag and the value in front).

Accepted: `HOST:PORT` (an IPv4 address or a host name), `:PORT` (every interface, IPv4
and IPv6: what a pod needs for the kubelet's probes, which come to the pod's IP),
`[IPV6]:PORT`. Port 0 takes a free port from the kernel (tests read the bound one);
`0` alone turns the server off, so the two never mix.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from probemarker.probe.ports import join_host_port

__all__ = ["OFF", "ListenAddress", "parse_listen_address"]

OFF = "0"

_ACCEPTED = (
    "must be HOST:PORT, :PORT (every interface) or [IPV6]:PORT, with PORT 0-65535 "
    "(0: any free port), or 0 to turn the server off"
)
# A host name as RFC 1123 spells one (letters, digits, hyphens, dots); IP literals apart.
_LABEL = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
_HOST_NAME = re.compile(rf"(?i)^{_LABEL}(\.{_LABEL})*$")


@dataclass(frozen=True, slots=True)
class ListenAddress:
    host: str | None  # None: every interface
    port: int

    def __str__(self) -> str:
        return f":{self.port}" if self.host is None else join_host_port(self.host, self.port)


def parse_listen_address(text: str) -> ListenAddress | None:
    """See the module docstring."""
    text = text.strip()
    if text == OFF:
        return None
    host_text, colon, port_text = text.rpartition(":")
    if not colon:
        raise ValueError(f"{_ACCEPTED}; a port alone is written :PORT")
    port = _port(port_text)
    if host_text == "":
        return ListenAddress(None, port)
    if host_text.startswith("[") and host_text.endswith("]"):
        inner = host_text[1:-1]
        try:
            return ListenAddress(str(ipaddress.IPv6Address(inner)), port)
        except ValueError:
            raise ValueError(f"{inner!r} in brackets is not an IPv6 address; {_ACCEPTED}") from None
    if ":" in host_text:
        raise ValueError(f"an IPv6 address goes in brackets, as [::1]:{port_text}; {_ACCEPTED}")
    if not _HOST_NAME.match(host_text) or len(host_text) > 253:
        raise ValueError(f"{host_text!r} is not an IP address or host name; {_ACCEPTED}")
    return ListenAddress(host_text, port)


def _port(text: str) -> int:
    if not text.isdigit() or not text.isascii() or int(text) > 65535:
        raise ValueError(f"port {text!r} is not a number from 0 to 65535; {_ACCEPTED}")
    return int(text)
