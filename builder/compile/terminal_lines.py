"""The lines a terminal would keep from a program's output drawn for it (uv on a pty).

uv (through indicatif) draws its progress bars in place: `\\r`, "erase line" (CSI K), "cursor
up/down" (CSI A/B) and colour codes, redrawn many times a second, and never ends a bar with a
newline; what it prints for good ("Resolved 12 packages in 3ms", " + torch==2.9.1") it prints
after erasing the bars, ending in a newline. So a line is kept exactly when a newline ends it,
and what it holds is what follows the last `\\r` or cursor/erase sequence before that newline,
colour codes removed (a recorded example: tests/builder/data/uv_pty_install.raw).

The rule holds for a program that never moves the cursor above a line it ended with a newline:
indicatif pads each bar to the terminal's width and lets it wrap instead. One that does (rich's
transient spinner: newline, then cursor up and erase) leaves its last frame in the result; this
is not a terminal emulator, and is used only for uv.
"""

from __future__ import annotations

import re

# A carriage return, or a CSI sequence that moves the cursor or erases (A-H, J, K): what is
# written after it replaces the line on the screen.
_REDRAW = re.compile(r"\r|\x1b\[[0-9;?]*[A-HJK]")
# Every escape sequence: CSI (colours, cursor visibility, ...), OSC (titles, links), and the
# two-byte ones.
_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


def _last_redraw(text: str) -> re.Match[str] | None:
    found = None
    for found in _REDRAW.finditer(text):  # noqa: B007 (the last one is wanted)
        pass
    return found


def kept_text(segment: str) -> str:
    """What stays on the screen of one newline-ended segment (its newline not included)."""
    segment = segment.rstrip("\r")  # the pty turns "\n" into "\r\n"
    last = _last_redraw(segment)
    if last is not None:
        segment = segment[last.end() :]
    return _ESCAPE.sub("", segment).rstrip()


class TerminalLines:
    """Feed decoded text as it comes; get back the lines that a terminal keeps, in order."""

    def __init__(self) -> None:
        self._pending = ""

    def feed(self, text: str) -> list[str]:
        *done, self._pending = (self._pending + text).split("\n")
        # Bars are redrawn for minutes without a newline: keep only the latest redraw.
        last = _last_redraw(self._pending)
        if last is not None and last.start() > 0:
            self._pending = self._pending[last.start() :]
        return [kept_text(segment) for segment in done]

    def finish(self) -> list[str]:
        """The text after the last newline, if a terminal would still show any."""
        rest, self._pending = kept_text(self._pending), ""
        return [rest] if rest else []
