"""PORT_NAME_RE, the one pattern the CRD uses for port names, says exactly what
IANA_SVC_NAME (RFC 6335, k8s.io/apimachinery IsValidPortName) says: at most 15
lower-case alphanumerics or '-', at least one letter, no leading, trailing or doubled '-'.
Checked exhaustively over a small alphabet and on random longer strings, in both
Python re and RE2 (the API server's dialect for OpenAPI `pattern`)."""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable

import pytest
import re2

from probemarker.api import rules
from probemarker.api.fields import matches
from probemarker.api.names import port_problems


def is_iana_svc_name(name: str) -> bool:
    """IsValidPortName, written the long way round as Kubernetes does."""
    return (
        1 <= len(name) <= 15
        and re.fullmatch("[-a-z0-9]+", name) is not None
        and re.search("[a-z]", name) is not None
        and "--" not in name
        and not name.startswith("-")
        and not name.endswith("-")
    )


def candidates() -> list[str]:
    small = ["".join(p) for n in range(7) for p in itertools.product("a1-", repeat=n)]
    rng = random.Random(6)
    alphabet = "ab09-Z_. \n"
    large = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 20))) for _ in range(3000)]
    return small + large + ["a" * 15, "a" * 16, "1" * 15 + "a", "http", "8080-tcp", "x\n"]


def re2_matches(pattern: str, text: str) -> bool:
    return re2.search(pattern, text) is not None


@pytest.mark.parametrize(
    "search", [pytest.param(matches, id="validator"), pytest.param(re2_matches, id="re2")]
)
def test_pattern_matches_iana_svc_name(search: Callable[[str, str], bool]) -> None:
    for name in candidates():
        by_pattern = len(name) <= rules.MAX_PORT_NAME_LENGTH and search(rules.PORT_NAME_RE, name)
        assert by_pattern == is_iana_svc_name(name), repr(name)


def test_validator_uses_the_same_rule() -> None:
    for name in candidates():
        assert (port_problems(name) == []) == is_iana_svc_name(name), repr(name)
