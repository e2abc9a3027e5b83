"""Byte-code at build time: every `.py` of the env's site-packages compiled by the env's own
interpreter, so no process of the env compiles modules on its first import (an SGLang server
imports its ~2,900 modules in the main process and again in each spawned scheduler and
detokenizer; measured in benchmarks/kernels_ahead/).

How the `.pyc` files are made, and why:
- PEP 552 checked-hash: each `.pyc` holds a hash of its `.py` source instead of its mtime, and
  the interpreter compares it with the source at every import, recompiling when they differ.
  So a `.py` edited after the build (a patch, a user's fix) never runs stale byte-code, and the
  bytes do not depend on file times (uv links files out of its cache with their old mtimes).
  Timestamp `.pyc` would trust an mtime/size match; unchecked-hash ones would ignore an edited
  source altogether.
- They stay out of the tree hash (stackgate.envtree leaves every `__pycache__` out): a `.pyc`
  embeds the path its source was compiled at (length-prefixed, so the tree's own-path
  normalization cannot neutralize it: two venv roots would hash differently), imports write
  more of them at run time (modules this step skipped, other optimization levels), and what
  runs is pinned by the hashed `.py` the interpreter checks each `.pyc` against.
- Recorded as the env's final path (`-s`/`-p`), not the `.partial` folder it is built in.
- PYTHONHASHSEED=0 and no other PYTHON* variable: set and frozenset constants are marshalled in
  hash order, PYTHONPYCACHEPREFIX would put the files outside the env and PYTHONOPTIMIZE
  would write `.opt-1.pyc` names no plain import reads.
- As many workers as the build's job plan allows (CPUs and memory, never swap), under the same
  watchdog as every other build step.

A `.py` the interpreter cannot compile (test data, templates, Python-2 files some wheels ship)
cannot be imported either: it is counted and named in the record, not a build failure.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from stackgate.build_record import BytecodeRecord, PycMode
from stackgate.errors import EnvironmentProblem

MODE: PycMode = "checked-hash"
_ERROR_PREFIX = "*** Error compiling "
_EXAMPLES = 5

# Runs argv with env, each output line to the callback; returns (exit code, the output's tail).
Runner = Callable[[Sequence[str], Mapping[str, str], Callable[[str], None]], tuple[int, list[str]]]


def compile_argv(python: Path, site: Path, recorded_as: Path, jobs: int) -> list[str]:
    """`python -m compileall` over site, quiet but for errors, the paths recorded as recorded_as."""
    return [
        str(python),
        "-m",
        "compileall",
        "-q",
        "-j",
        str(jobs),
        "--invalidation-mode",
        MODE,
        "-s",
        str(site),
        "-p",
        str(recorded_as),
        str(site),
    ]


def compile_env(base: Mapping[str, str]) -> dict[str, str]:
    """The child's environment: base without any PYTHON* variable, with a fixed hash seed."""
    env = {k: v for k, v in base.items() if not k.startswith("PYTHON")}
    env["PYTHONHASHSEED"] = "0"
    return env


def failed_path(line: str, site: Path) -> str | None:
    """The file a compileall error line names, relative to site; None for any other line."""
    if not line.startswith(_ERROR_PREFIX):
        return None
    quoted = line[len(_ERROR_PREFIX) :].removesuffix("...")
    name = quoted[1:-1] if len(quoted) >= 2 and quoted[0] in "'\"" else quoted
    prefix = str(site) + os.sep
    return name.removeprefix(prefix)


def pyc_totals(site: Path) -> tuple[int, int]:
    """(files, bytes) of every `.pyc` in the `__pycache__` folders under site."""
    files = total = 0
    for top, dirs, names in os.walk(site):  # Path.walk: Python >= 3.12 only
        folder = Path(top)
        if folder.name != "__pycache__":
            continue
        dirs.clear()
        for name in names:
            if name.endswith(".pyc"):
                files += 1
                total += (folder / name).lstat().st_size
    return files, total


def compile_site(
    python: Path,
    site: Path,
    recorded_as: Path,
    jobs: int,
    base_env: Mapping[str, str],
    run: Runner,
) -> BytecodeRecord:
    """Compile site's sources with python (the env's interpreter: the `.pyc` magic is its
    version's); EnvironmentProblem when compileall itself fails, not a source it cannot read."""
    failed: list[str] = []

    def seen(line: str) -> None:
        path = failed_path(line, site)
        if path is not None:
            failed.append(path)

    started = time.monotonic()
    code, tail = run(compile_argv(python, site, recorded_as, jobs), compile_env(base_env), seen)
    seconds = round(time.monotonic() - started, 3)
    # compileall exits 1 when a file did not compile; anything else (or 1 without an error
    # line: an exception, a killed worker) is the step failing
    if code != 0 and not (code == 1 and failed):
        raise EnvironmentProblem(
            f"compiling the env's byte-code failed (exit {code})", details=tail[-8:]
        )
    files, size = pyc_totals(site)
    return BytecodeRecord(
        mode=MODE,
        jobs=jobs,
        pyc_files=files,
        pyc_bytes=size,
        failed=len(failed),
        failed_examples=sorted(failed)[:_EXAMPLES],
        seconds=seconds,
    )
