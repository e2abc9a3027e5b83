"""Pinning array elements through libslurm: scontrol's update RPC without scontrol's load.

`scontrol update JobId=A_i NodeList=NODE` sends two RPCs per element: it first loads every job
record of array A (to check that the id names a single job; every element already split off
is one more record to pack) and then the update itself, which slurmctld serves in ~0.3 ms.
fleet/slurm/pin_elements.c sends only the update (the same REQUEST_UPDATE_JOB: job id string
and requested nodes), through the host's libslurm. On one-host Slurm 22.05, 2,000 elements in
arrays of 25 (benchmarks/fleet/fleet_pin.py, benchmarks/fleet/results/fleet_pin.md): 2.0-2.5 s
wall and 2.2-2.6 s of CPU in all against 5.4-7.6 s and 6.8-8.4 s for scontrol on its stdin.

It is compiled for each submit (about 0.2 s) into a private temporary folder with the host's C
compiler against the host's <slurm/slurm.h>, so the structures are always the installed
Slurm's and no cached binary is ever trusted. The compiler is a fixed system one or the one
--cc names, run with a clean environment (stackgate/compiler.py): the helper runs as the
submitting user, often root, so neither PATH nor CPATH/C_INCLUDE_PATH may choose its code.
A dry run compiles nothing (`can_build` only looks). Where that cannot be done (no compiler, no
headers: Debian/Ubuntu libslurm-dev, RHEL slurm-devel), `PinHelperUnavailable` says why and
submit pins with scontrol instead (`--pin-with auto`), or stops (`--pin-with libslurm`).
What Slurm holds afterwards is read back with squeue either way (slurm._verify_pins).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from stackgate.compiler import CompilerUnavailable, can_include, compiler_env, find_compiler
from stackgate.proc import Completed, run

SOURCE_NAME = "pin_elements.c"
COMPILE_TIMEOUT_S = 120.0
HEADERS_HINT = "libslurm's headers (Debian/Ubuntu: libslurm-dev; RHEL: slurm-devel)"


class PinHelperUnavailable(Exception):
    """The helper cannot be built here (no C compiler, no Slurm headers or library)."""


def source_path() -> Path:
    """fleet/slurm/pin_elements.c in the checkout this package runs from."""
    return Path(__file__).resolve().parents[2] / "fleet" / "slurm" / SOURCE_NAME


def can_build(cc: str | None = None) -> bool:
    """Whether the helper would build here, found by looking only (a compiler, the header):
    what a dry run sizes its plan by."""
    try:
        find_compiler(cc)
    except CompilerUnavailable:
        return False
    return source_path().is_file() and can_include("slurm/slurm.h")


def build_helper(work: Path, cc: str | None = None) -> Path:
    """Compile the helper into `work` (a private folder of the caller's) with the system
    compiler (or `cc`, an explicit --cc) and a clean environment."""
    try:
        compiler = find_compiler(cc)
    except CompilerUnavailable as exc:
        raise PinHelperUnavailable(str(exc)) from None
    source = source_path()
    if not source.is_file():
        raise PinHelperUnavailable(f"{source}: missing from this checkout")
    # The source is copied into the private folder and compiled there: "..." includes and the
    # compiler's working folder are then the private folder too.
    private_source = work / SOURCE_NAME
    shutil.copyfile(source, private_source)
    binary = work / "pin_elements"
    argv = [str(compiler), "-O2", "-o", str(binary), str(private_source), "-lslurm"]
    done = run(argv, check=False, timeout=COMPILE_TIMEOUT_S, env=compiler_env(work), cwd=work)
    if done.returncode != 0:
        words = done.stderr.strip().splitlines()
        if any("slurm/slurm.h" in w for w in words):
            raise PinHelperUnavailable(f"{HEADERS_HINT} are not installed")
        if any("-lslurm" in w for w in words):
            raise PinHelperUnavailable(f"libslurm.so is not found by {compiler} ({HEADERS_HINT})")
        raise PinHelperUnavailable(
            f"{compiler} could not build {source.name}: {' / '.join(words[-3:])}"
        )
    return binary


def fed(argv: list[str], lines: Sequence[str], workers: int) -> list[tuple[list[str], Completed]]:
    """`argv` started `workers` times at once (never more than there are lines), each process
    reading its share of `lines` (every workers-th) on stdin: (its share, how it ended) each.
    One process start per share, not per line; scontrol and the helper are both fed so."""
    shares = [list(lines[k::workers]) for k in range(min(workers, len(lines)))]

    def one(share: list[str]) -> tuple[list[str], Completed]:
        return share, run(argv, input_text="\n".join(share) + "\n", check=False)

    with ThreadPoolExecutor(max_workers=max(1, len(shares))) as pool:
        return list(pool.map(one, shares))


def pin(helper: Path, pairs: Sequence[tuple[str, str]], workers: int) -> list[str]:
    """Every (element, node) pin, as lines on the stdin of `workers` helper processes; the
    problems each reported ("A_i: Slurm's words"), or how a process failed."""
    problems: list[str] = []
    for share, done in fed([str(helper)], [f"{job} {node}" for job, node in pairs], workers):
        answers = done.stdout.splitlines()
        problems += [
            f"{parts[1]}: {parts[2] if len(parts) > 2 else 'refused'}"
            for parts in (line.split(" ", 2) for line in answers)
            if parts[0] == "error"
        ]
        answered = sum(1 for line in answers if line.startswith(("ok ", "error ")))
        if answered < len(share):
            tail = " / ".join(done.stderr.strip().splitlines()[-3:]) or "no message"
            problems.append(
                f"{helper.name} answered {answered} of {len(share)} pins (exit "
                f"{done.returncode}): {tail}"
            )
    return problems
