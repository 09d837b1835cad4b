"""Where a network probe connects: the pod IP and the port, named or numbered.

Stage: probe (pure). Input: an action's `port` (a number, or the name of one of the
target container's `ports`) and the `ProbeTarget`. Output: the address to connect to,
or the reason there is none. As the kubelet does (`probe.ResolveContainerPort`): a
number is used as it is; a name is looked up in the container's ports (a restartable
init container's too, `pods.ContainerFacts.ports`), by exact name.

Invariants:
- the host is always the pod's own IP, as an IP address (`pod_address`): a pod
  without one, or with something else in `status.podIP`, has no address, so the run
  is Unknown and nothing on the node (or anywhere else) is probed (docs/security.md);
- a name not in the container's ports has no address either; the engine reports it
  once as an event on the pod (`unresolved_port`) and the probe decides nothing;
- an error that says this host is short of something (`local_shortage`: file
  descriptors, buffers, memory) is not the pod's answer, so the network handlers
  make it Unknown, never Failed.
"""

from __future__ import annotations

import errno
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass

from probemarker.api.model import Handler, HTTPGetAction, TCPSocketAction
from probemarker.probe.handler import ProbeTarget

__all__ = [
    "Address",
    "NoAddress",
    "address_of",
    "join_host_port",
    "local_shortage",
    "os_reason",
    "unresolved_port",
]


@dataclass(frozen=True, slots=True)
class Address:
    host: str  # the pod IP, IPv4 or IPv6 (without brackets)
    port: int

    @property
    def authority(self) -> str:
        """`host:port`, with an IPv6 host in brackets (for URLs and Host headers)."""
        return join_host_port(self.host, self.port)

    def __str__(self) -> str:
        return self.authority


@dataclass(frozen=True, slots=True)
class NoAddress:
    reason: str  # says what is missing and where, for the Unknown outcome's message


def join_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _number(port: int | str, ports: Mapping[str, int]) -> int | None:
    number = port if isinstance(port, int) else ports.get(port)
    return number if number is not None and 0 < number < 65536 else None


def pod_address(pod_ip: str | None) -> str | None:
    """`pod_ip` in its canonical form if it is one host's IP address, else None.

    Never a name (`localhost`), a short or hex form a resolver would widen
    (`127.1`, `0x7f.0.0.1`), a zone (`fe80::1%eth0`), an unspecified address (`0.0.0.0`
    reaches this host) or a multicast one: the API server stores only proper IPs, but
    the probes' promise to reach the pod IP and nothing else should not rest on that.
    """
    if not pod_ip:
        return None
    try:
        ip = ipaddress.ip_address(pod_ip)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id is not None:
        return None
    if ip.is_unspecified or ip.is_multicast:
        return None
    return str(ip)


def address_of(port: int | str, target: ProbeTarget) -> Address | NoAddress:
    """The pod IP and the resolved port of `target`, or why there is none."""
    if not target.pod_ip:
        return NoAddress(f"pod {target.namespace}/{target.pod} has no IP yet (status.podIP)")
    host = pod_address(target.pod_ip)
    if host is None:
        return NoAddress(
            f"pod {target.namespace}/{target.pod} has status.podIP {target.pod_ip!r}, "
            "which is not one host's IP address"
        )
    number = _number(port, target.ports)
    if number is None:
        if isinstance(port, str):
            return NoAddress(
                f"container {target.container} has no port named {port!r} in its ports"
            )
        return NoAddress(f"port {port} is not a TCP port number (1-65535)")
    return Address(host, number)


def unresolved_port(action: Handler, ports: Mapping[str, int]) -> str | None:
    """The named port of `action` that the container does not declare, or None.

    Checked by the engine before a run, so the event on the pod names the marker,
    the probe and the port (gRPC ports are numbers only, as in core/v1).
    """
    if isinstance(action, HTTPGetAction | TCPSocketAction) and isinstance(action.port, str):
        return None if _number(action.port, ports) is not None else action.port
    return None


# Errors that say this host is short of something, not that the pod answered.
_LOCAL = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, errno.EADDRNOTAVAIL})


def local_shortage(err: BaseException) -> bool:
    """True when `err` (or an error it wraps) is a shortage on this host."""
    seen: set[int] = set()
    todo: list[BaseException] = [err]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _LOCAL:
            return True
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)
        todo.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        os_error = getattr(current, "os_error", None)  # aiohttp's connector errors
        if isinstance(os_error, OSError):
            todo.append(os_error)
    return False


def os_reason(err: OSError) -> str:
    """The system's words for `err` ("Connection refused"): asyncio puts "Connect call
    failed (addr)" in strerror, where the errno says more."""
    return os.strerror(err.errno) if err.errno else str(err) or type(err).__name__
