"""The one output layer. Human output goes to stderr, what the user asked to see to stdout.

Markup is off on every console: user, record and log text (a stack named `[/oops]`, a log
line with `[/dev/nvidia0]`) is printed as it is and can never break rendering. Styles come
only from `styled()`, whose template is ours and whose values are escaped. When not a
terminal (piped, redirected, CI) lines are never wrapped: tables keep whole rows, tokens are
never broken.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import TextIO

from rich.console import Console
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from stackgate.credentials import redact
from stackgate.safe_text import escape_controls

WIDE = 100_000  # "no width": a piped table is as wide as its longest row


class SafeConsole(Console):
    """A rich console whose output is safe (stackgate.safe_text): the text of every segment
    has its control characters escaped before rich adds its own styles (which stay codes),
    and the whole output has secrets hidden. Values from files, engines, nodes and indexes
    reach a table cell or a line only through here."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        cleaned = (
            seg if seg.control else Segment(escape_controls(seg.text), seg.style, seg.control)
            for seg in buffer
        )
        return redact(super()._render_buffer(cleaned))


def _console(stream: TextIO, stderr: bool) -> Console:
    plain = os.environ.get("CI") == "true" or os.environ.get("NO_COLOR") is not None
    terminal = stream.isatty() and os.environ.get("CI") != "true"
    return SafeConsole(
        stderr=stderr,
        file=None if stderr else stream,
        no_color=plain,
        markup=False,
        emoji=False,
        highlight=False,
        soft_wrap=not terminal,
        width=None if terminal else WIDE,
    )


def console_err() -> Console:
    """Diagnostics, progress and verdicts: stderr."""
    return _console(sys.stderr, True)


def console_out() -> Console:
    """What the user asked to see (`show`, `serve-bench --dry-run`): stdout."""
    return _console(sys.stdout, False)


def console_on(stream: TextIO) -> Console:
    """A console on `stream` with the same settings (stackgate.lines, tests)."""
    return _console(stream, False)


# Stand-ins for the values while the template's markup is parsed (Unicode private use: never
# in our templates).
_SLOT = 0xE000


def styled(template: str, *values: object) -> Text:
    """`template` is our markup with `{}` placeholders; each value is inserted as text and
    takes the style around its placeholder. Values are never parsed: no markup, no emoji
    codes (`:smile:`), and a trailing backslash stays one (escaping them for
    `Text.from_markup` did neither)."""
    parsed = Text.from_markup(
        template.format(*(chr(_SLOT + i) for i in range(len(values)))), emoji=False
    )
    out = Text()
    start = 0
    for at, char in enumerate(parsed.plain):
        slot = ord(char) - _SLOT
        if 0 <= slot < len(values):
            out.append_text(parsed[start:at])
            value = Text(str(values[slot]))
            for span in parsed[at : at + 1].spans:
                value.stylize(span.style)
            out.append_text(value)
            start = at + 1
    out.append_text(parsed[start:])
    return out


def print_table(console: Console, table: Table) -> None:
    """A table on a terminal as rich draws it; piped (logs, `| less`, CI) without borders, the
    title on the left and no trailing padding, so a line is as long as its own row, not as
    wide as the longest reason in the table.
    Rows stay whole (never wrapped); put the long free-text column last."""
    if console.is_terminal:
        console.print(table)
        return
    table.box = None
    table.show_edge = False
    table.title_justify = "left"
    table.caption_justify = "left"
    with console.capture() as captured:
        console.print(table)
    lines = [line.rstrip() for line in captured.get().splitlines()]
    console.file.write("\n".join(lines) + "\n")
    console.file.flush()
