"""Line output for commands that print lines, not tables: rich only where it draws something.

`check` and the CLI's error lines print a few lines on stderr. Where stderr is not a terminal
(piped, redirected, CI) rich renders no colours and no wrapping, so importing it (a good part
of a `check`: benchmarks/startup/results/startup.md) buys nothing: PlainLines writes the same
characters rich would (tests/foundation/test_lines.py compares the two on hostile text).
On a terminal, or where FORCE_COLOR / TTY_COMPATIBLE ask rich to colour a pipe, the lines go
through stackgate.output's rich console. Templates are ours, with style tags only
(`[bold red]{}[/] {}`); the values are never parsed as markup.
"""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Protocol, TextIO

from stackgate.safe_text import for_terminal

if TYPE_CHECKING:
    from rich.console import Console

# Style tags of our templates: `[bold red]`, `[yellow]`, `[/]`, `[/bold]`.
_TAG = re.compile(r"\[/?[a-z][a-z ]*\]|\[/\]")
# What rich strips from any text it prints (rich.control.STRIP_CONTROL_CODES: BEL, BS, VT,
# FF, CR).
_STRIP = dict.fromkeys((7, 8, 11, 12, 13))


class LineWriter(Protocol):
    def plain(self, text: str) -> None:
        """One line of text, printed as it is."""

    def styled(self, template: str, *values: object) -> None:
        """One line from our template; each value is inserted as text, never as markup."""


class PlainLines:
    """Lines written straight to the stream, as rich writes them to a non-terminal. A line
    with a tab goes through rich: it expands tabs by terminal cells (a CJK character is two,
    an escape code none), which str.expandtabs does not know."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._rich: RichLines | None = None

    def plain(self, text: str) -> None:
        if "\t" in text:
            if self._rich is None:
                from stackgate.output import console_on

                self._rich = RichLines(console_on(self._stream))
            self._rich.plain(text)
            return
        self._stream.write(for_terminal(text.translate(_STRIP)) + "\n")
        self._stream.flush()

    def styled(self, template: str, *values: object) -> None:
        self.plain(_TAG.sub("", template).format(*(str(v) for v in values)))


class RichLines:
    """Lines through a rich console (colours on a terminal)."""

    def __init__(self, console: Console) -> None:
        self._console = console

    def plain(self, text: str) -> None:
        self._console.print(text, highlight=False, markup=False)

    def styled(self, template: str, *values: object) -> None:
        from stackgate.output import styled

        self._console.print(styled(template, *values))


def rich_draws_plain(stream: TextIO) -> bool:
    """True where rich would print `stream` without escape codes: not a terminal, and nothing
    in the environment forcing it to act as one (rich's `Console.is_terminal`)."""
    if "FORCE_COLOR" in os.environ or "TTY_COMPATIBLE" in os.environ:
        return False
    try:
        return not stream.isatty()
    except ValueError:  # a closed stream: rich calls it no terminal too
        return True


def lines_err() -> LineWriter:
    """Diagnostics and verdicts on stderr."""
    if rich_draws_plain(sys.stderr):
        return PlainLines(sys.stderr)
    from stackgate.output import console_err

    return RichLines(console_err())
