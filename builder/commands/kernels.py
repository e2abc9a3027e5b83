"""`kernels STACK --env ENV --kernels REQUEST_JSON`: compile a stack's just-in-time kernels into
an env the builder did not build (a machine image's venv, one made by hand), for the request's
GPU arch, on a host without a GPU; `stackgate/kernels.json` in ENV then lists them, and a later
`builder build --kernels REQUEST_JSON --kernels-from ENV` copies them into the stack's env
instead of compiling them again. An env the builder built takes its kernels at build time
(`builder build --kernels`): adding files to it afterwards would break its tree hash."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

from builder.kernels.request import load_request
from builder.kernels.step import EXPORT, KernelsJob, build_kernels, missing_lines
from builder.venv.envprofile import site_packages
from builder.venv.installed import installed_distributions
from stackgate.build_record import RECORD_RELPATH
from stackgate.cli import emit_json
from stackgate.cli_paths import FOLDER
from stackgate.errors import EXIT_CHECK_FAILED, EXIT_OK, BadInput
from stackgate.manifest.loading import load_stack
from stackgate.output import console_err, styled
from stackgate.paths import display_path

NAME = "kernels"
HELP = "compile a stack's just-in-time kernels into an existing env (no GPU needed)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack", help="a stack name in stacks/ or a path to a manifest")
    parser.add_argument("--env", type=FOLDER, required=True, help="the env to compile them into")
    parser.add_argument(
        "--kernels",
        type=Path,
        action="append",
        required=True,
        metavar="REQUEST_JSON",
        help="a kernels request (builder/kernels/request.py); repeatable",
    )
    parser.add_argument(
        "--kernels-required",
        action="store_true",
        help="exit 1 when a requested kernel cannot be built (default: listed, exit 0)",
    )


def run(args: argparse.Namespace) -> int:
    manifest = load_stack(args.stack).manifest
    env: Path = args.env
    if not (env / "bin" / "python").exists():
        raise BadInput(f"--env {display_path(env)}: no bin/python (not a Python env)")
    if (env / RECORD_RELPATH).is_file():
        raise BadInput(
            f"--env {display_path(env)}: built by the builder; build it with "
            f"`builder build {manifest.name} --kernels ...` so its tree hash covers them"
        )
    requests = [(p, load_request(p, list(manifest.host.target_archs))) for p in args.kernels]
    site = site_packages(env)
    scratch = Path(tempfile.mkdtemp(prefix="stackgate-kernels-"))
    console = console_err()
    try:
        record = build_kernels(
            env,
            site,
            [site],
            installed_distributions(env),
            KernelsJob(requests, required=args.kernels_required),
            scratch,
            len(os.sched_getaffinity(0)),
            on_line=lambda line: console.print(line, markup=False, highlight=False),
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    out = env / EXPORT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(record.model_dump_json(indent=2) + "\n", encoding="utf-8")
    if args.json:
        emit_json(record.model_dump(mode="json"))
    done = [k for k in record.kernels if k.ok]
    size = sum(f.bytes for k in done for f in k.files)
    for line in missing_lines(record):
        console.print(line, markup=False, highlight=False)
    summary = (
        f"{len(done)} of {len(record.kernels)} kernels in {display_path(env)} "
        f"({size / 2**20:.1f} MiB, {record.seconds:.0f} s); listed in {display_path(out)}"
    )
    if len(done) < len(record.kernels):
        console.print(styled("[bold yellow]INCOMPLETE[/] {}", summary))
        return EXIT_CHECK_FAILED if args.kernels_required else EXIT_OK
    console.print(styled("[bold green]OK[/] {}", summary))
    return EXIT_OK
