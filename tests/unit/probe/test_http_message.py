"""failure_message: an httpGet failure says what the kubelet says, and a line at most."""

from __future__ import annotations

import pytest

from probemarker.probe.http import FAILURE_LINE_LIMIT, failure_message

NGINX_404 = """<html>
<head><title>404 Not Found</title></head>
<body>
<center><h1>404 Not Found</h1></center>
<hr><center>nginx/1.25.3</center>
</body>
</html>
"""

KUBELET = "HTTP probe failed with statuscode: "


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        pytest.param(404, "", f"{KUBELET}404", id="no-body"),
        pytest.param(404, NGINX_404, f"{KUBELET}404", id="html-page-left-out"),
        pytest.param(
            500,
            '<!DOCTYPE html>\n<html lang="en">\n<p>Internal error</p>',
            f"{KUBELET}500",
            id="doctype-left-out",
        ),
        pytest.param(502, '<?xml version="1.0"?>\n<error/>', f"{KUBELET}502", id="xml-left-out"),
        pytest.param(503, "draining", f"{KUBELET}503: draining", id="short-text-shown"),
        pytest.param(
            503, "db unreachable\nretry in 5s\n", f"{KUBELET}503: db unreachable", id="first-line"
        ),
        pytest.param(
            500,
            '{"status":"down","checks":{"db":"timeout"}}',
            f'{KUBELET}500: {{"status":"down","checks":{{"db":"timeout"}}}}',
            id="json-shown",
        ),
        pytest.param(
            429,
            "\n\n   slow down  \n",
            f"{KUBELET}429: slow down",
            id="leading-blank-lines",
        ),
        pytest.param(
            500,
            "\x1b[31mFAIL\x1b[0m\x07\x00 bad\u202e",
            f"{KUBELET}500: FAIL bad",
            id="controls-removed",
        ),
        pytest.param(
            500,
            "e" * 5000,
            f"{KUBELET}500: " + "e" * (FAILURE_LINE_LIMIT - 3) + "\u2026",
            id="long-line-cut",
        ),
        pytest.param(101, "", f"{KUBELET}101", id="below-200"),
        pytest.param(418, "   ", f"{KUBELET}418", id="whitespace-body"),
    ],
)
def test_failure_message(status: int, body: str, expected: str) -> None:
    message = failure_message(status, body)
    assert message == expected
    assert "\n" not in message
    assert len(message.encode()) <= len(f"{KUBELET}{status}: ".encode()) + FAILURE_LINE_LIMIT
