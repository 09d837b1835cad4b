"""Log lines carry what markers and pods hold; none of their control or format
characters reaches the terminal raw, in JSON or on the console."""

from __future__ import annotations

import io
import unicodedata

import orjson
import structlog

from probemarker.observe.logging import configure_logging

# A probe name the API lets through (a C1 CSI, a bidi override) and a message with ESC,
# OSC 52 and a newline.
NAME = "idle\x9b2J\u202e"
MESSAGE = "busy\x1b[31m\n\x1b]52;c;eA==\x07"


def hidden(text: str) -> list[str]:
    return [c for c in text if c != "\n" and unicodedata.category(c)[0] == "C"]


def logged(format: str) -> str:
    stream = io.StringIO()
    configure_logging(format=format, level="info", stream=stream)
    try:
        structlog.get_logger().info("probe.decided", probe=NAME, message=MESSAGE, pod="ns/p")
    finally:
        structlog.reset_defaults()
    return stream.getvalue()


def test_json_lines_escape_them_and_hold_the_same_values() -> None:
    line = logged("json")
    assert hidden(line) == []
    assert line.count("\n") == 1
    event = orjson.loads(line)
    assert (event["probe"], event["message"], event["pod"]) == (NAME, MESSAGE, "ns/p")
    assert "idle\\u009b2J\\u202e" in line


def test_console_lines_show_them_escaped() -> None:
    line = logged("console")
    assert hidden(line) == []
    assert line.count("\n") == 1
    assert "probe='idle\\x9b2J\\u202e'" in line
    assert "pod=ns/p" in line  # a plain value is shown as it was
