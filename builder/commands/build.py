"""`build STACK`: install the stack's lock into a fresh env, atomically, and select it."""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from builder.compile.watched import Terminal
from builder.kernels.request import load_request
from builder.kernels.step import KernelsJob
from builder.lock.uvproject import index_map_credentials, parse_index_map
from builder.venv.build import BuildOptions, BuildOutcome, Reporter, build_env
from builder.venv.fault_hook import with_fault_hook
from stackgate.build_record import BuildOutput
from stackgate.cli import emit_json
from stackgate.cli_paths import FOLDER
from stackgate.errors import EXIT_OK, BadInput
from stackgate.heartbeat import Heartbeat
from stackgate.layout import venv_root
from stackgate.manifest.loading import load_stack
from stackgate.output import console_err, styled
from stackgate.paths import display_path
from stackgate.resource_limits import GIB
from stackgate.topology import TOPOLOGIES

NAME = "build"
HELP = "build the stack's locked venv into <venv-root>/<stack>/<stack>-<lockhash> and select it"

_COUNT = re.compile(r"(Prepared|Installed|Downloading|Built|Resolved)\s+(\d+)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack", help="a stack name in stacks/ or a path to a manifest")
    parser.add_argument(
        "--venv-root",
        type=FOLDER,
        default=None,
        help="where envs live (default <repo>/envs, or $STACKGATE_VENV_ROOT)",
    )
    parser.add_argument(
        "--locks-dir",
        type=FOLDER,
        default=None,
        help="the folder of lock folders (default: locks/ beside the manifest)",
    )
    parser.add_argument("--python", default=None, help="interpreter path or version to use")
    parser.add_argument(
        "--topology",
        choices=TOPOLOGIES,
        default=None,
        help="environment profile to apply (default: detect with NVML)",
    )
    parser.add_argument(
        "--index-map",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="fetch the manifest's index NAME from URL (a mirror or a local folder)",
    )
    parser.add_argument("--offline", action="store_true", help="use no network at all")
    parser.add_argument(
        "--wheelhouse",
        type=FOLDER,
        default=None,
        help="folder from `stackgate wheelhouse STACK --to DIR`",
    )
    parser.add_argument(
        "--repair",
        action="store_true",
        help="when the env built for this lock was changed since, build a fresh copy beside it "
        "(default: refuse)",
    )
    parser.add_argument(
        "--base-site",
        type=Path,
        default=None,
        metavar="SITE_PACKAGES",
        help="layer the venv over this site-packages of another Python of the same X.Y (a "
        "host's preinstalled PyTorch) through a .pth; the build record lists what it brings",
    )
    parser.add_argument(
        "--kernels",
        type=Path,
        action="append",
        default=[],
        metavar="REQUEST_JSON",
        help="compile these just-in-time kernels into the env for the request's GPU arch "
        "(builder/kernels/request.py); a kernel that cannot be built is reported with its cost, "
        "the build goes on",
    )
    parser.add_argument(
        "--kernels-required",
        action="store_true",
        help="fail the build (exit 1) when a requested kernel cannot be built",
    )
    parser.add_argument(
        "--kernels-from",
        type=FOLDER,
        default=None,
        metavar="ENV",
        help="copy requested kernels from this env (or its kernels export) when it built them "
        "for the same engine versions; compile the rest",
    )


class RichReporter(Reporter):
    """On a terminal: a spinner with the step, its elapsed time and uv's latest line; while uv
    installs, uv's own progress (bars, bytes downloaded) drawn on a pty of the terminal's size,
    the spinner stopped meanwhile. Piped (CI logs, `| tee`): one line per finished step with
    the time since the start, and uv's own summary lines (Resolved/Prepared/Installed N ...)
    as they come."""

    def __init__(self, progress: Progress, console: Console) -> None:
        self.progress = progress
        self.console = console
        self.piped = not console.is_terminal
        self.started = time.monotonic()
        self.task = progress.add_task("starting", total=None, detail="")
        self._step = "starting"
        self._step_started = self.started
        self._uv_line = ""
        # Piped, a quiet step says it is still running (a cold cu128 install printed nothing
        # for 60-95 s after `done venv`: uv downloads without a line when piped).
        self._beat = Heartbeat(self._print, self._still)

    def __enter__(self) -> RichReporter:
        if self.piped:
            self._beat.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._beat.__exit__(None, None, None)

    def _still(self, since_start: float) -> str:
        last = f"; uv: {self._uv_line[:120]}" if self._uv_line else ""
        running = time.monotonic() - self._step_started
        return f"  ... {self._step} still running ({running:.0f} s, t+{since_start:.0f} s){last}"

    def _print(self, text: str) -> None:
        self._beat.touched()
        self.console.print(text, markup=False, highlight=False)

    def step(self, name: str, detail: str = "") -> None:
        self._step, self._step_started, self._uv_line = name, time.monotonic(), ""
        self.progress.update(self.task, description=escape(name), detail=escape(detail))

    def note(self, text: str) -> None:
        self._print(text)

    def line(self, text: str) -> None:
        text = text.strip()
        if not text:
            return
        if self.piped:
            self._uv_line = text
            if _COUNT.search(text):
                self._print(f"    uv: {text}")
            return
        self.progress.update(self.task, detail=escape(text[:120]))

    @contextmanager
    def terminal(self) -> Iterator[Terminal | None]:
        if self.piped or self.console.is_dumb_terminal:
            yield None
            return
        self.progress.stop()  # transient: the spinner line is cleared for uv to draw below
        out = self.console.file

        def write(text: str) -> None:
            out.write(text)
            out.flush()

        try:
            yield Terminal(self.console.width, self.console.height, write)
        finally:
            self.progress.start()

    def done(self, name: str, seconds: float) -> None:
        elapsed = time.monotonic() - self.started
        self._beat.touched()
        self.console.print(
            styled("  [green]done[/] {}", f"{name:<10} {seconds:7.2f} s  (t+{elapsed:.0f} s)")
        )


def _summary(console: Console, outcome: BuildOutcome, source_builds: bool, took: float) -> None:
    record = outcome.record
    plan = record.job_plan
    table = Table(title=f"stack {record.stack}", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("environment", display_path(outcome.env))
    table.add_row("status", "reused (already built for this lock)" if outcome.reused else "built")
    table.add_row("lock", record.lock_hash[:12])
    table.add_row("python", f"{record.tools.python} ({record.tools.python_path})")
    table.add_row("packages", str(len(record.packages)))
    table.add_row(
        "tree hash",
        f"{record.tree.sha256[:16]} ({record.tree.files} files, {record.tree.bytes / GIB:.2f} GiB)",
    )
    if record.topology is None:
        how = (
            "no interconnect detected"
            if record.topology_source == "none"
            else record.topology_source
        )
        table.add_row("topology", f"common environment only ({how})")
    else:
        table.add_row("topology", f"{record.topology} ({record.topology_source})")
    if source_builds:  # a plan for compile jobs means nothing to a stack of wheels only
        table.add_row("job plan", plan.summary())
    if record.peak_rss_per_job_bytes:
        table.add_row(
            "peak RSS / job",
            f"{record.peak_rss_per_job_bytes / GIB:.2f} GiB "
            f"({record.watchdog_pauses} watchdog pause(s))",
        )
    steps = " ".join(f"{k}={v:.1f}s" for k, v in record.timings_s.items())
    if outcome.reused:
        table.add_row("time", f"{took:.1f} s now (reused); the original build: {steps}")
    else:
        table.add_row("time", f"{took:.1f} s: {steps}")
    if record.kernels is not None:
        k = record.kernels
        done = [x for x in k.kernels if x.ok]
        size = sum(f.bytes for x in done for f in x.files)
        table.add_row(
            "kernels",
            f"{len(done)} of {len(k.kernels)} in the env ({size / 2**20:.1f} MiB, "
            f"{k.seconds:.0f} s); missing: {len(k.kernels) - len(done)}",
        )
    if outcome.removed_partials:
        table.add_row("cleaned", ", ".join(p.name for p in outcome.removed_partials))
    console.print(table)


def _kernels_job(args: argparse.Namespace, target_archs: list[str]) -> KernelsJob | None:
    if not args.kernels:
        if args.kernels_required or args.kernels_from is not None:
            raise BadInput("--kernels-required and --kernels-from need --kernels REQUEST_JSON")
        return None
    if args.kernels_from is not None and not args.kernels_from.is_dir():
        raise BadInput(f"--kernels-from {args.kernels_from}: no such folder")
    requests = [(p, load_request(p, list(target_archs))) for p in args.kernels]
    return KernelsJob(requests, required=args.kernels_required, source=args.kernels_from)


def run(args: argparse.Namespace) -> int:
    loaded = load_stack(args.stack)
    if args.wheelhouse is not None and not args.wheelhouse.is_dir():
        raise BadInput(f"--wheelhouse {args.wheelhouse}: no such folder")
    kernels = _kernels_job(args, loaded.manifest.host.target_archs)
    options = BuildOptions(
        venv_root=venv_root(args.venv_root),
        locks_root=args.locks_dir,
        python=args.python,
        topology=args.topology,
        index_map=parse_index_map(args.index_map, loaded.manifest),
        offline=args.offline or args.wheelhouse is not None,
        wheelhouse=args.wheelhouse,
        repair=args.repair,
        base_site=args.base_site,
        kernels=kernels,
        credentials=index_map_credentials(args.index_map),
    )
    console = console_err()
    started = time.monotonic()
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(bar_width=20),
        TimeElapsedColumn(),
        TextColumn("[dim]{task.fields[detail]}"),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
    with progress, RichReporter(progress, console) as reporter:
        outcome = build_env(loaded, options, with_fault_hook(reporter))
    if args.json:
        built = BuildOutput(
            stack=loaded.manifest.name,
            env=str(outcome.env),
            reused=outcome.reused,
            removed_partials=[str(p) for p in outcome.removed_partials],
            log=str(outcome.log),
            record=outcome.record,
        )
        emit_json(built.model_dump(mode="json"))
    source_builds = any(p.git for p in loaded.manifest.packages.values())
    _summary(console, outcome, source_builds, time.monotonic() - started)
    if source_builds:
        console.print("job plan: " + "; ".join(outcome.record.job_plan.reasons))
    verb = "reused" if outcome.reused else "built"
    console.print(
        styled(
            "[bold green]OK[/] {}", f"{loaded.manifest.name} {verb}: {display_path(outcome.env)}"
        )
    )
    return EXIT_OK
