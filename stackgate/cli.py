"""The CLI contract shared by `python -m builder`, `python -m validators` and `stackgate`.

Each package keeps its subcommands as modules in `<package>/commands/`; a command module
defines NAME, HELP, add_arguments(parser) and run(args) -> int. Discovery is by module, so a
new command is a new file. Exit codes: 0 ok, 1 check failed, 2 bad input, 3 environment.
Every command takes --json (machine-readable result on stdout) and --debug (tracebacks).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import pkgutil
import sys
import traceback
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, Protocol, cast

from stackgate import __version__
from stackgate.errors import (
    EXIT_BAD_INPUT,
    EXIT_ENVIRONMENT,
    EnvironmentProblem,
    StackgateError,
)
from stackgate.output import console_err


class Command(Protocol):
    NAME: str
    HELP: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def discover(package: str) -> list[Command]:
    """Command modules in `<package>.commands`, in name order."""
    pkg = importlib.import_module(f"{package}.commands")
    found: list[Command] = []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        try:
            module: ModuleType = importlib.import_module(f"{package}.commands.{info.name}")
        except ImportError as exc:
            # One command's missing library (e.g. pyelftools in a minimal image) must not take
            # every other command down with it: the command stays listed and says why.
            found.append(_Unavailable(info.name.replace("_", "-"), exc))
            continue
        if hasattr(module, "NAME") and hasattr(module, "run"):
            found.append(cast(Command, module))
    return found


class _Unavailable:
    """Stands in for a command whose module could not be imported; running it exits 3."""

    def __init__(self, name: str, error: ImportError) -> None:
        self.NAME = name
        self.HELP = f"(unavailable: {error})"
        self._error = error

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("rest", nargs=argparse.REMAINDER)

    def run(self, args: argparse.Namespace) -> int:
        raise EnvironmentProblem(
            f"command '{self.NAME}' is unavailable here: {self._error}; "
            "install stackgate with its dependencies (uv sync)"
        )


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print a JSON result on stdout")
    common.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    return common


def build_parser(
    prog: str, commands: Sequence[Command], description: str
) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--version", action="version", version=f"stackgate {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = _common()
    for command in commands:
        child = sub.add_parser(command.NAME, help=command.HELP, parents=[common])
        command.add_arguments(child)
        child.set_defaults(_run=command.run)
    return parser


def emit_json(payload: Any) -> None:
    """The one way commands print machine-readable results."""
    sys.stdout.write(json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()


def main_for(
    packages: Sequence[str], prog: str, description: str, argv: Sequence[str] | None = None
) -> int:
    commands = [c for p in packages for c in discover(p)]
    parser = build_parser(prog, commands, description)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: 2 on bad arguments, 0 on --help
        return int(exc.code or 0) if exc.code in (0, None) else EXIT_BAD_INPUT
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    run = cast(Callable[[argparse.Namespace], int], args._run)
    try:
        return run(args)
    except StackgateError as exc:
        if args.debug:
            traceback.print_exc()
        if args.json:
            emit_json(
                {
                    "ok": False,
                    "exit_code": exc.exit_code,
                    "error": exc.message,
                    "details": exc.details,
                }
            )
        err = console_err()
        err.print(f"[bold red]error:[/] {exc.message}", highlight=False)
        for line in exc.details:
            err.print(f"  {line}", highlight=False, markup=False)
        return exc.exit_code
    except KeyboardInterrupt:
        console_err().print("interrupted")
        return 130
    except OSError as exc:
        if args.debug:
            traceback.print_exc()
        console_err().print(f"[bold red]error:[/] {exc}", highlight=False)
        return EXIT_ENVIRONMENT


def main(argv: Sequence[str] | None = None) -> int:
    """`stackgate`: every command of both packages."""
    return main_for(
        ["builder", "validators"],
        "stackgate",
        "Build GPU inference stacks reproducibly and validate them before calling them good.",
        argv,
    )


if __name__ == "__main__":
    sys.exit(main())
