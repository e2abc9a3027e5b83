"""Walk every argparse action of a command-line tree (the parser walks of issue 23 section 5)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator


def walk_actions(
    parser: argparse.ArgumentParser, path: str
) -> Iterator[tuple[str, argparse.Action]]:
    """(command path, action) for every action of `parser` and its subcommands."""
    for action in parser._actions:  # argparse keeps no public list of a parser's actions
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from walk_actions(child, f"{path} {name}")
        else:
            yield path, action
