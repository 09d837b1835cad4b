"""String formats a CRD schema may use (apiextensions' supported list, checked like kube-openapi's
strfmt registry). Formats outside that list (int32, int64, float, double, anything unknown) are
stripped by apiextensions-apiserver before validation, so they always pass here.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from collections.abc import Callable
from urllib.parse import urlparse

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATE_TIME = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})?$"
)
_DURATION = re.compile(
    r"^(\s*[-+]?\d+(\.\d+)?\s*(ns|us|µs|ms|s|m|h|d|w|"
    r"nanoseconds?|microseconds?|milliseconds?|seconds?|minutes?|hours?|days?|weeks?)\s*)+$"
)
_UUID = re.compile(
    r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"
)
_HOSTNAME = re.compile(
    r"^[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$"
)
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+$")
_MAC = re.compile(r"^([0-9A-Fa-f]{2}[:-]){5,7}[0-9A-Fa-f]{2}$")
_HEXCOLOR = re.compile(r"^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")
_RGBCOLOR = re.compile(r"^rgb\(\s*\d{1,3}\s*,\s*\d{1,3}\s*,\s*\d{1,3}\s*\)$")
_BSON = re.compile(r"^[0-9a-fA-F]{24}$")


def _ip(version: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        try:
            return ipaddress.ip_address(value).version == version
        except ValueError:
            return False

    return check


def _cidr(value: str) -> bool:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return "/" in value


def _byte(value: str) -> bool:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _uri(value: str) -> bool:
    try:
        parsed = urlparse(value)
    except ValueError:
        return False
    return bool(parsed.scheme or parsed.path)


def _regex(pattern: re.Pattern[str]) -> Callable[[str], bool]:
    return lambda value: pattern.match(value) is not None


_CHECKS: dict[str, Callable[[str], bool]] = {
    "bsonobjectid": _regex(_BSON),
    "uri": _uri,
    "email": _regex(_EMAIL),
    "hostname": lambda v: len(v) <= 255 and _HOSTNAME.match(v) is not None,
    "ipv4": _ip(4),
    "ipv6": _ip(6),
    "cidr": _cidr,
    "mac": _regex(_MAC),
    "uuid": _regex(_UUID),
    "uuid3": _regex(_UUID),
    "uuid4": _regex(_UUID),
    "uuid5": _regex(_UUID),
    "hexcolor": _regex(_HEXCOLOR),
    "rgbcolor": _regex(_RGBCOLOR),
    "byte": _byte,
    "date": _regex(_DATE),
    "duration": _regex(_DURATION),
    "datetime": _regex(_DATE_TIME),
    "date-time": _regex(_DATE_TIME),
}


def check(format_name: str, value: str) -> bool:
    """True when `value` is valid for `format_name` (or the format is not validated)."""
    checker = _CHECKS.get(format_name)
    return checker is None or checker(value)
