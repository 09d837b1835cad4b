"""cel-go's rendering of compile issues (common.Errors.ToDisplayString).

Stage: last step of a failed compile. Input: the source and (offset, message) pairs.
Output: the text kube-apiserver puts after `compilation failed: `: one block per error,
sorted by position (stable), each `ERROR: <input>:LINE:COL: message`, then the source line
and a caret line (`.` per code point before the error, `^` under it; full-width dot and caret
under wide, multi-byte characters). At most 100 errors are shown.
"""

from __future__ import annotations

_MAX_ERRORS = 100
_MAX_SNIPPET = 16384


def _location(source: str, offset: int) -> tuple[int, int]:
    """1-based line, 0-based column (code points) of `offset`."""
    line = source.count("\n", 0, offset) + 1
    start = source.rfind("\n", 0, offset) + 1
    return line, offset - start


def _render(source: str, offset: int, message: str) -> str:
    line, column = _location(source, offset)
    text = f"ERROR: <input>:{line}:{column + 1}: {message}"
    lines = source.split("\n")
    snippet = lines[line - 1] if line - 1 < len(lines) else ""
    if len(snippet.encode()) > _MAX_SNIPPET:
        return text
    snippet = snippet.replace("\t", " ")
    marks = "".join("\uff0e" if len(ch.encode()) > 1 else "." for ch in snippet[:column])
    under = snippet[column : column + 1]
    marks += "\uff3e" if under and len(under.encode()) > 1 else "^"
    return f"{text}\n | {snippet}\n | {marks}"


def render_issues(source: str, issues: list[tuple[int, str]]) -> str:
    ordered = sorted(issues, key=lambda item: _location(source, item[0]))
    shown = [_render(source, offset, message) for offset, message in ordered[:_MAX_ERRORS]]
    if len(ordered) > _MAX_ERRORS:
        shown.append(f"{len(ordered) - _MAX_ERRORS} more errors were truncated")
    return "\n".join(shown)
