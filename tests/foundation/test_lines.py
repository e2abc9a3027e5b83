"""stackgate.lines: the plain writer prints what rich prints to a non-terminal, character for
character, and styled() never parses a value."""

from __future__ import annotations

import io

import pytest

from stackgate.lines import PlainLines, RichLines, lines_err, rich_draws_plain
from stackgate.output import console_on, styled

# Text a manifest, a log or an error message can carry.
HOSTILE = [
    "plain",
    "",
    " leading and trailing   ",
    "[/oops] [bold]not a style[/bold] [link=http://x]x[/link]",
    "\\[bold] escaped, a trailing backslash\\",
    "x\\",
    "emoji codes stay :smile: :warning:",
    "control \x07\x08\x0b\x0c\r codes, escape \x1b[31m, nul \x00, del \x7f, c1 \x85",
    "tab\tstops\tand wide 漢字\tafter",
    "\tleading tab",
    "two\nlines",
    "bidi \u202eevil\u202c, zero-width \u200b",
    "a" * 400,
]
TEMPLATES = [
    "[bold red]{}[/] {}",
    "[yellow]{}[/] {}",
    "[bold red]REFUSED[/] {}",
    "[bold green]OK[/] {}",
    "[bold red]error:[/] {}",
    "[bold red]error:[/] {} (raised at {})",
    "[bold]hint:[/] {} [{}]",
]


def _both(calls: list[tuple[str, tuple[object, ...]]]) -> tuple[str, str]:
    plain_buf, rich_buf = io.StringIO(), io.StringIO()
    for writer in (PlainLines(plain_buf), RichLines(console_on(rich_buf))):
        for template, values in calls:
            if template == "":
                writer.plain(str(values[0]))
            else:
                writer.styled(template, *values)
    return plain_buf.getvalue(), rich_buf.getvalue()


@pytest.mark.parametrize("text", HOSTILE)
def test_plain_lines_print_what_rich_prints_to_a_pipe(text: str) -> None:
    calls: list[tuple[str, tuple[object, ...]]] = [("", (text,)), ("", (f"    {text}",))]
    for template in TEMPLATES:
        calls.append((template, (text, f"{text} {text}")[: template.count("{}")]))
    plain, rich = _both(calls)
    assert plain == rich
    assert plain.count("\n") >= len(calls)


def test_styled_never_parses_a_value() -> None:
    for value in ("[bold]x[/bold]", ":smile:", "ends with\\", "[/]"):
        assert styled("[bold red]{}[/] {}", value, value).plain == f"{value} {value}"
    text = styled("[bold red]{}[/] {}", "error", "rule")
    # rich 13.0 also leaves empty spans from slicing: they style nothing.
    spans = [(s.start, s.end, str(s.style)) for s in text.spans if s.style and s.end > s.start]
    assert spans == [(0, 5, "bold red")]


def test_a_pipe_is_plain_unless_the_environment_forces_colour(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    assert rich_draws_plain(io.StringIO())
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert not rich_draws_plain(io.StringIO())
    assert isinstance(lines_err(), RichLines)
