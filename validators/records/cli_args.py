"""Arguments the record commands share (one spelling, one help text)."""

from __future__ import annotations

import argparse
from pathlib import Path

from validators.records.store import STORE_FILENAME


def store_file(text: str) -> Path:
    """--store names the store file; a folder is bad input (argparse: exit 2, no traceback)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; give the store file inside it")
    return path


def add_store_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        type=store_file,
        default=None,
        # the default is not computed here: a bad $STACKGATE_STATE_DIR is the command's exit 2,
        # not a traceback while the parser is being built
        help=f"record store file (default .state/{STORE_FILENAME} in the checkout; env "
        "STACKGATE_STATE_DIR moves its folder)",
    )


def add_run_argument(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument(
        "--run",
        dest="runs",
        action="append",
        type=Path,
        default=[],
        required=required,
        metavar="RESULT.json",
        help="a `stackgate run STACK --json > RESULT.json` report; repeat it once per repeated run",
    )
