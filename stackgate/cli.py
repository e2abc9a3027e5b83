"""The CLI contract shared by `python -m builder`, `python -m validators` and `stackgate`.

Each package keeps its subcommands as modules in `<package>/commands/`; a command module
defines NAME, HELP, add_arguments(parser) and run(args) -> int. Discovery is by module, so a
new command is a new file. Discovery is lazy: the command names come from the file names and
the help lines from the sources, and only the module of the command being run is imported
(`--help` imports none), so start-up does not pay for every command's libraries
(benchmarks/startup/startup.py). Exit codes: 0 ok, 1 check failed, 2 bad input, 3 environment.
Every command takes --json (machine-readable result on stdout) and --debug (tracebacks).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import json
import logging
import pkgutil
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, cast

from stackgate import __version__, proc
from stackgate.errors import (
    EXIT_BAD_INPUT,
    EXIT_ENVIRONMENT,
    EXIT_INTERRUPTED,
    MEANING,
    EnvironmentProblem,
    StackgateError,
)
from stackgate.safe_text import redact_data


class Command(Protocol):
    NAME: str
    HELP: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


@dataclass(frozen=True)
class CommandEntry:
    """A command known by its module, imported only when it is the one being run."""

    name: str  # the module name with "_" -> "-" (a test holds each module's NAME to it)
    module: str  # dotted module path
    help: str

    def load(self) -> Command:
        try:
            module: ModuleType = importlib.import_module(self.module)
        except ImportError as exc:
            # One command's missing library (e.g. pyelftools in a minimal image) must not take
            # every other command down with it: the command stays listed and says why.
            return _Unavailable(self.name, exc)
        return cast(Command, module)


def _help_of(path: Path | None) -> str:
    """The HELP string of a command module, read from its source without importing it."""
    if path is None or not path.is_file():
        return ""
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if line.startswith("HELP =") or line.startswith("HELP: str ="):
            # The assignment and its continuation lines (indented, or the closing bracket).
            end = i + 1
            while end < len(lines) and lines[end][:1] in (" ", ")"):
                end += 1
            text = "\n".join([line.split("=", 1)[1], *lines[i + 1 : end]])
            try:
                value = ast.literal_eval(text.strip())
            except (ValueError, SyntaxError):
                return ""
            return value if isinstance(value, str) else ""
    return ""


def discover(package: str) -> list[CommandEntry]:
    """Command modules in `<package>.commands`, in name order, none of them imported."""
    spec = importlib.util.find_spec(f"{package}.commands")
    if spec is None or spec.submodule_search_locations is None:
        return []
    found: list[CommandEntry] = []
    for info in sorted(pkgutil.iter_modules(spec.submodule_search_locations), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = f"{package}.commands.{info.name}"
        origin = getattr(info.module_finder, "path", None)
        path = Path(origin) / f"{info.name}.py" if origin else None
        found.append(CommandEntry(info.name.replace("_", "-"), module, _help_of(path)))
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
        if (self._error.name or "").split(".")[0] in DEPENDENCY_MODULES:
            raise self._error  # stackgate itself is not installed: main_for says how to run it
        raise EnvironmentProblem(
            f"command '{self.NAME}' is unavailable here: {self._error}",
            error_id="command-unavailable",
            hint="install stackgate with its dependencies (uv sync)",
        )


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print a JSON result on stdout")
    common.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    return common


# The commands in the order a newcomer uses them, by step of the journey (`--help` lists them
# so; a command missing here comes last, and a test holds every command to a step).
JOURNEY: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("1. a stack, before any download", ("check", "show")),
    ("2. lock and build it", ("lock", "static", "build", "verify")),
    ("3. validate it on this host", ("preflight", "run", "serve-bench")),
    ("4. record it, gate an upgrade", ("mark-good", "gate", "diff", "report", "records")),
    ("5. reproduce, bisect, fleets", ("reproduce", "bisect", "fleet")),
    (
        "more tools",
        ("wheelhouse", "image", "image-pins", "plan", "compile", "kernels", "compat", "schema"),
    ),
)
_STEP = {name: i for i, (_title, names) in enumerate(JOURNEY) for name in names}
_ORDER = {name: i for i, name in enumerate(n for _t, names in JOURNEY for n in names)}


def journey_epilog(names: Sequence[str]) -> str:
    """The commands of `names` grouped by step, one line per step."""
    lines = ["order of use (COMMAND --help for its options):"]
    for title, step in JOURNEY:
        here = [n for n in step if n in names]
        if here:
            lines.append(f"  {title + ':':<34} {', '.join(here)}")
    rest = sorted(n for n in names if n not in _STEP)
    if rest:
        lines.append(f"  {'other:':<34} {', '.join(rest)}")
    return "\n".join(lines)


def build_parser(
    prog: str, commands: Sequence[CommandEntry], description: str, chosen: str | None = None
) -> argparse.ArgumentParser:
    """The parser; only the `chosen` command's module is imported for its arguments."""
    commands = sorted(commands, key=lambda c: (_ORDER.get(c.name, len(_ORDER)), c.name))
    parser = argparse.ArgumentParser(
        prog=prog,
        description=description,
        epilog=journey_epilog([c.name for c in commands]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"stackgate {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = _common()
    for entry in commands:
        if entry.name != chosen:
            sub.add_parser(entry.name, help=entry.help, parents=[common])
            continue
        command = entry.load()
        child = sub.add_parser(entry.name, help=command.HELP, parents=[common])
        command.add_arguments(child)
        child.set_defaults(_run=command.run)
    return parser


def _chosen(argv: Sequence[str], names: set[str]) -> str | None:
    """The command named on the command line: the first word that is not an option."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in names else None
    return None


def emit_json(payload: Any) -> None:
    """The one way commands print machine-readable results."""
    # One redaction at the boundary (stackgate.safe_text): no command's JSON carries a
    # secret, whatever its fields hold; JSON escapes control characters itself.
    plain = json.loads(json.dumps(payload, default=str))  # what default=str makes, redacted too
    text = json.dumps(redact_data(plain), indent=2, sort_keys=True)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


# Import names of stackgate's own dependencies (pyproject.toml; a test keeps them in step).
DEPENDENCY_MODULES = frozenset(
    {"pydantic", "packaging", "rich", "elftools", "pynvml", "docker", "httpx", "psutil", "numpy"}
    | {"jinja2", "uv", "httpcore", "variantlib"}
)


def missing_dependency_hint(prog: str, words: Sequence[str]) -> str:
    """How to run `prog` with its dependencies: the two ways the README gives."""
    from stackgate.cli_hint import uv_prefix

    shown = " ".join([prog, *words])
    uv = uv_prefix()
    where = "" if uv != "uv" or proc.find("uv") else " (.ci/bootstrap tools installs uv)"
    return (
        f"run it with its locked dependencies from the checkout: {uv} run {shown}{where}\n"
        f"  or install it as a tool ({uv} tool install . from the checkout), then: stackgate "
        + " ".join(words)
    ).rstrip()


def verdict_after_error(verdict: str, prog: str, command: str | None, code: int) -> str:
    """The verdict line a command ends with after an error message: "REFUSED stackgate lock:
    bad input, nothing was changed (exit 2)"."""
    what = command or prog  # the same line whichever way it was run (stackgate, python -m)
    return f"{verdict} {what}: {MEANING.get(code, 'error')} (exit {code})"


def _os_error(exc: OSError) -> EnvironmentProblem:
    """An OSError can carry no file name (os.getcwd() after its folder went away): it says where
    it was raised, so a failure seen only as a child's last stderr line is findable."""
    last = traceback.extract_tb(exc.__traceback__)[-1:]
    where = "".join(f"{f.filename}:{f.lineno} in {f.name}" for f in last) or "unknown"
    hint = "the file or folder it names is missing, unreadable or full; --debug for the traceback"
    return EnvironmentProblem(f"{exc} (raised at {where})", error_id="os-error", hint=hint)


def main_for(
    packages: Sequence[str], prog: str, description: str, argv: Sequence[str] | None = None
) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main_for(packages, prog, description, words)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in DEPENDENCY_MODULES:
            raise
        # Before rich can be imported there is no console: plain text, no traceback.
        sys.stderr.write(
            f"error: {exc} -- stackgate's dependencies are not installed in this Python "
            f"({sys.executable})\n  {missing_dependency_hint(prog, words)}\n"
        )
        return EXIT_ENVIRONMENT


def _main_for(packages: Sequence[str], prog: str, description: str, words: list[str]) -> int:
    commands = [c for p in packages for c in discover(p)]
    chosen = _chosen(words, {c.name for c in commands})
    parser = build_parser(prog, commands, description, chosen)
    try:
        args = parser.parse_args(words)
    except SystemExit as exc:  # argparse: 2 on bad arguments, 0 on --help
        if exc.code in (0, None):
            return 0
        sys.stderr.write(verdict_after_error("REFUSED", prog, chosen, EXIT_BAD_INPUT) + "\n")
        return EXIT_BAD_INPUT
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    run = cast(Callable[[argparse.Namespace], int], args._run)
    # Error lines go through stackgate.lines: rich is imported only where it draws colours.
    from stackgate.lines import lines_err

    try:
        return run(args)
    except KeyboardInterrupt:
        lines_err().plain(verdict_after_error("INCOMPLETE", prog, args.command, EXIT_INTERRUPTED))
        return EXIT_INTERRUPTED
    except (StackgateError, OSError) as raised:
        if args.debug:
            traceback.print_exc()
        error = raised if isinstance(raised, StackgateError) else _os_error(raised)
        if args.json:
            from stackgate.cli_output import ErrorOutput  # pydantic: only on this path

            failed = ErrorOutput(
                exit_code=error.exit_code,
                error=error.message,
                details=error.details,
                error_id=error.error_id,
                hint=error.hint,
            )
            emit_json(failed.model_dump(mode="json"))
        err = lines_err()
        err.styled("[bold red]error:[/] {}", error.message)
        for line in error.details:
            err.plain(f"  {line}")
        err.styled("[bold]hint:[/] {} [{}]", error.hint, error.error_id)
        err.plain(verdict_after_error(error.verdict, prog, args.command, error.exit_code))
        return error.exit_code


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
