"""Where the demo's text goes: plain lines in a pipe, a table redrawn in place on a
terminal; which one, from the stream and the environment."""

from __future__ import annotations

import io
import os
import re
from types import MappingProxyType

import pytest

from probemarker.demo.examples import Mark
from probemarker.demo.model import PodState
from probemarker.demo.screen import LiveScreen, PlainScreen, choose_screen
from probemarker.demo.view import Frame, Layout, Section

READY = Mark("condition", "Ready")
LAYOUT = Layout(sections=(Section("games", "games", (READY,), ("game-0",)),))
ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def frame(ready: str = "True") -> Frame:
    snapshot = MappingProxyType({"games/game-0": PodState(MappingProxyType({READY: ready}))})
    return Frame(1.0, "step 1/1", (), snapshot, ("    1.0s a change",))


def test_plain_prints_notes_and_ignores_frames() -> None:
    out = io.StringIO()
    screen = PlainScreen(out)
    screen.note("    1.0s games/game-0 condition Ready: - -> True")
    screen.show(frame())
    screen.close()
    screen.write("summary: done")
    assert out.getvalue() == "    1.0s games/game-0 condition Ready: - -> True\nsummary: done\n"


def test_live_redraws_in_place_and_gives_the_cursor_back() -> None:
    out = Terminal()
    screen = LiveScreen(out, LAYOUT, colour=True, size=lambda: os.terminal_size((60, 30)))
    screen.note("not printed: the frames carry the notes")
    screen.show(frame("True"))
    first = out.getvalue()
    assert first.startswith("\x1b[?25l\x1b[J")  # cursor hidden, nothing to move over yet
    drawn = first.count("\n")
    screen.show(frame("False"))
    second = out.getvalue()[len(first) :]
    assert second.startswith(f"\x1b[{drawn}F\x1b[J")  # back to the first line, cleared
    screen.close()
    assert out.getvalue().endswith("\x1b[?25h")
    assert "not printed" not in out.getvalue()
    plain = ESCAPE.sub("", second)
    assert "  game-0  False  -" in plain.splitlines()
    assert "\x1b[31mFalse\x1b[0m" in second  # not ready: red


def test_live_without_colour_moves_the_cursor_but_paints_nothing() -> None:
    out = Terminal()
    screen = LiveScreen(out, LAYOUT, colour=False, size=lambda: os.terminal_size((60, 30)))
    screen.show(frame())
    screen.close()
    codes = set(ESCAPE.findall(out.getvalue()))
    assert codes == {"\x1b[?25l", "\x1b[J", "\x1b[?25h"}


def test_live_lines_never_wrap() -> None:
    out = Terminal()
    screen = LiveScreen(out, LAYOUT, colour=True, size=lambda: os.terminal_size((25, 30)))
    screen.show(frame())
    lines = ESCAPE.sub("", out.getvalue()).splitlines()
    assert max(len(line) for line in lines) <= 24


@pytest.mark.parametrize(
    ("tty", "environ", "plain", "kind", "colour"),
    [
        pytest.param(False, {}, False, PlainScreen, False, id="pipe"),
        pytest.param(True, {"TERM": "xterm"}, False, LiveScreen, True, id="terminal"),
        pytest.param(True, {"TERM": "dumb"}, False, PlainScreen, False, id="dumb-terminal"),
        pytest.param(True, {"TERM": "xterm"}, True, PlainScreen, False, id="plain-asked"),
        pytest.param(
            True, {"TERM": "xterm", "NO_COLOR": "1"}, False, LiveScreen, False, id="no-color"
        ),
        pytest.param(True, {"NO_COLOR": ""}, False, LiveScreen, True, id="no-color-empty"),
    ],
)
def test_choose_screen(
    tty: bool, environ: dict[str, str], plain: bool, kind: type, colour: bool
) -> None:
    out = Terminal() if tty else io.StringIO()
    screen = choose_screen(out, environ, LAYOUT, plain=plain)
    assert type(screen) is kind
    screen.show(frame())
    screen.close()
    assert ("\x1b[3" in out.getvalue()) is colour
