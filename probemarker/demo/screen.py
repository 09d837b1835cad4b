"""Where the demo's text goes: a live table redrawn in place, or plain lines.

Stage: demo edge (output). `choose_screen` picks: a terminal (stdout is a TTY, `TERM`
is not `dumb`, no `--plain`) gets `LiveScreen`, which redraws the table (view.py) in
place with ANSI cursor movement, coloured unless `NO_COLOR` is set (no-color.org);
anything else gets `PlainScreen`: one line per change, no colours, no escape codes.

Both take `note(text)` (a plain line: a step, a change) and `show(frame)` (the table
now, with the latest notes under it); `PlainScreen` prints the notes and ignores the
frames, `LiveScreen` draws the frames.
`close()` leaves the last table on the terminal and the cursor visible.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from typing import Protocol, TextIO

from probemarker.demo.view import Frame, Layout, paint, render_frame

_HIDE_CURSOR, _SHOW_CURSOR, _CLEAR_DOWN = "\x1b[?25l", "\x1b[?25h", "\x1b[J"


class Screen(Protocol):
    def note(self, text: str) -> None: ...

    def show(self, frame: Frame) -> None: ...

    def close(self) -> None: ...

    def write(self, text: str) -> None:
        """A line after the demo (the summary), below whatever is on the screen."""
        ...


class PlainScreen:
    """One line per note; frames are not drawn."""

    def __init__(self, out: TextIO) -> None:
        self._out = out

    def __repr__(self) -> str:
        return "PlainScreen()"

    def note(self, text: str) -> None:
        self.write(text)

    def show(self, frame: Frame) -> None:
        pass

    def close(self) -> None:
        self._out.flush()

    def write(self, text: str) -> None:
        self._out.write(text + "\n")
        self._out.flush()


class LiveScreen:
    """The table, redrawn in place; the latest notes below it."""

    def __init__(
        self,
        out: TextIO,
        layout: Layout,
        *,
        colour: bool,
        size: Callable[[], os.terminal_size] = shutil.get_terminal_size,
    ) -> None:
        self._out, self._layout, self._colour, self._size = out, layout, colour, size
        self._drawn = 0  # lines of the frame on the screen now
        self._cursor_hidden = False

    def __repr__(self) -> str:
        return f"LiveScreen(colour={self._colour}, drawn={self._drawn})"

    def note(self, text: str) -> None:
        pass  # the frames show the latest notes under the table

    def show(self, frame: Frame) -> None:
        columns, rows = self._size()
        lines = render_frame(self._layout, frame, width=max(20, columns - 1), height=rows - 1)
        text = "\n".join(paint(line, colour=self._colour) for line in lines) + "\n"
        prefix = "" if self._cursor_hidden else _HIDE_CURSOR
        self._cursor_hidden = True
        if self._drawn:
            prefix += f"\x1b[{self._drawn}F"  # to the first line of the last frame
        self._out.write(prefix + _CLEAR_DOWN + text)
        self._out.flush()
        self._drawn = len(lines)

    def close(self) -> None:
        if self._cursor_hidden:
            self._out.write(_SHOW_CURSOR)
            self._cursor_hidden = False
        self._out.flush()

    def write(self, text: str) -> None:
        self._out.write(text + "\n")
        self._out.flush()


def wants_live(out: TextIO, environ: Mapping[str, str], *, plain: bool) -> bool:
    """A live table only on a terminal that can move its cursor, unless told `plain`."""
    return not plain and out.isatty() and environ.get("TERM", "") != "dumb"


def choose_screen(
    out: TextIO, environ: Mapping[str, str], layout: Layout, *, plain: bool
) -> Screen:
    if wants_live(out, environ, plain=plain):
        return LiveScreen(out, layout, colour=not environ.get("NO_COLOR"))
    return PlainScreen(out)
