"""Whole-document garbage from the corpus: a clear message each, exit 1, no traceback."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from probemarker.check.validate import validate_text

GARBAGE = sorted((Path(__file__).resolve().parents[2] / "data" / "markers" / "garbage").glob("*"))
EXPECT = re.compile(r"^# expect: (?P<path>.*?): (?P<text>.+)$", re.MULTILINE)
EXPECT_YAML = re.compile(r"^# expect-yaml-error: (?P<text>.+)$", re.MULTILINE)


@pytest.mark.parametrize("path", GARBAGE, ids=[p.stem for p in GARBAGE])
def test_garbage(path: Path) -> None:
    text = path.read_text()
    out = io.StringIO()
    assert not validate_text(str(path), text, out=out).ok
    printed = out.getvalue()
    expected = [
        f"{m['path']}: {m['text']}" if m["path"] else m["text"] for m in EXPECT.finditer(text)
    ]
    expected += [m["text"] for m in EXPECT_YAML.finditer(text)]
    assert expected, f"{path.name} states no expectation"
    if EXPECT_YAML.search(text):
        assert "not valid YAML: line " in printed
    for line in expected:
        assert line in printed, f"{path.name}: {line!r} not in {printed!r}"
    assert "Traceback" not in printed


def test_there_is_garbage() -> None:
    assert len(GARBAGE) >= 10
