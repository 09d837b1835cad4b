"""The cause a WriteRefused event quotes: each of the server's causes once, in order."""

from __future__ import annotations

import pytest

from probemarker.kube.connect.errors import ApiInvalid, Cause
from probemarker.write.flush import refusal_cause

TOO_LONG = Cause(
    "FieldValueTooLong", "Too long: may not be more than 262144 bytes", "metadata.annotations"
)


@pytest.mark.parametrize(
    ("causes", "text"),
    [
        pytest.param((TOO_LONG,) * 3, "metadata.annotations: Too long: may not be more than 262144 bytes", id="a-real-1.32-repeats-it"),
        pytest.param((Cause("X", "bad", ""), TOO_LONG), "bad; metadata.annotations: Too long: may not be more than 262144 bytes", id="no-field"),
        pytest.param((), "Pod is invalid", id="no-causes-the-message"),
    ],
)  # fmt: skip
def test_refusal_cause(causes: tuple[Cause, ...], text: str) -> None:
    assert refusal_cause(ApiInvalid("Pod is invalid", causes=causes, code=422)) == text
