"""`{{.Result}}` in markerPolicy values: the probe's answer as a label or annotation value.

Stage: api (pure). Used by the validator (what a value may hold), the CRD (the same
rule as OpenAPI patterns, `rules.py`), the engine (which probes need their answer) and
the desired state (rendering). docs/api.md states these rules for users.

The grammar is Go template's, cut down to one action:
- `{{.Result}}`, with any Go template space (space, tab, CR, LF) after `{{` and before
  `}}`, as Go allows: `{{ .Result }}`. Go's trim markers (`{{- .Result -}}`), other
  fields, pipelines, functions and comments are refused, as is a `{{` that begins no
  action: every `{{` in a value must begin `{{.Result}}`. A lone `}}` is text, as in Go.
- `render(value, result)` puts the result in (what `{{.Result}}` stands for is made
  from the probe's answer by `probe.output.result_text`); a value without an action
  renders as itself. `render_pieces` gives the same value as the pieces it is made
  of, for a view that shows it cut (`kit.text.shown`): a 4 KiB value that repeats the
  action renders hundreds of KB, which a view never needs to build.
- `rendered_size(value, result)` is the rendered value's length, in characters and in
  UTF-8 bytes, from the text around the actions and their count: the desired state
  refuses a value that cannot fit from its size, without building it.

Whether a rendered value fits where it goes (a label value's alphabet and length, the
pod's annotation room) is the desired state's question (`value_problem`), asked on
every render: the validator can only check that *some* result makes a valid value.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final, NamedTuple

from probemarker.api import rules

__all__ = [
    "RenderedSize",
    "render",
    "render_pieces",
    "rendered_size",
    "template_problems",
    "uses_result",
]

_ACTION: Final = re.compile(rules.RESULT_ACTION_RE)
_OPEN: Final = "{{"


def uses_result(value: str) -> bool:
    """Whether `value` holds a `{{.Result}}` action."""
    return _ACTION.search(value) is not None


def template_problems(value: str) -> list[str]:
    """Why `value` is not a valid template: a `{{` that does not begin `{{.Result}}`."""
    position = 0
    while (start := value.find(_OPEN, position)) >= 0:
        action = _ACTION.match(value, start)
        if action is None:
            shown = value[start : start + 24]
            return [
                f"at {shown!r}: only {{{{.Result}}}} may appear between {{{{ and }}}} (the probe's "
                "answer; spaces inside the braces are allowed); write it so, or remove the {{"
            ]
        position = action.end()
    return []


def render(value: str, result: str) -> str:
    """`value` with every `{{.Result}}` replaced by `result` (`probe.output.result_text`)."""
    return _ACTION.sub(lambda _: result, value)


def render_pieces(value: str, result: str) -> Iterator[str]:
    """`render(value, result)` as the pieces it joins: the text around each action, and
    `result` for each action, in order."""
    parts = _ACTION.split(value)
    yield parts[0]
    for part in parts[1:]:
        yield result
        yield part


class RenderedSize(NamedTuple):
    """The length of a rendered value: `chars` (what a label value's 63 count) and
    `bytes` of UTF-8 (what the API server counts of annotations)."""

    chars: int
    bytes: int


def rendered_size(value: str, result: str) -> RenderedSize:
    """The size of `render(value, result)`, computed without building it: the text
    around the actions once, plus `result` once per action."""
    parts = _ACTION.split(value)
    actions = len(parts) - 1
    text_chars = sum(len(part) for part in parts)
    text_bytes = sum(len(_utf8(part)) for part in parts)
    return RenderedSize(
        text_chars + actions * len(result), text_bytes + actions * len(_utf8(result))
    )


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")
