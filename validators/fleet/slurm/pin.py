"""Pinning element i of a fleet's arrays to node i, and reading back what Slurm holds.

A job array has one node request for all its elements, so Slurm may run two elements on one
node; updating a pending element (`scontrol update JobId=A_i NodeList=<node i>`) splits it off
with its own node. scontrol loads every job record of the array for each such update; the helper
fleet/slurm/pin_elements.c sends only the update through the host's libslurm.

The helper is compiled per submit into a private temporary folder with a fixed system C compiler
(or --cc) and a clean environment (stackgate/compiler.py) against the host's <slurm/slurm.h>: no
cached binary is trusted, and neither PATH nor CPATH may choose the code of a helper that often
runs as root. A dry run compiles nothing (`can_build` only looks). Where it cannot be built
(`PinHelperUnavailable` says why), submit pins through scontrol fed on stdin (`--pin-with auto`)
or stops (`--pin-with libslurm`). One squeue reads back what Slurm holds (`_verify_pins`); the
way chosen sizes the arrays (`PinWay.array_size`).
"""

from __future__ import annotations

import logging
import shlex
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from stackgate.compiler import CompilerUnavailable, can_include, compiler_env, find_compiler
from stackgate.errors import EnvironmentProblem
from stackgate.proc import Completed, run
from validators.fleet.slurm.options import PinWith, SlurmFleet

log = logging.getLogger(__name__)

# Array sizes that cost least (benchmarks/fleet/results/fleet_pin.md): through scontrol, whose
# array load grows with the array, 25; through libslurm, where the number of arrays costs, 100,
# not 1,000: an element pinned to a busy node holds back the rest of its array (submission.py).
PIN_ARRAY_SIZE = 25
LIBSLURM_ARRAY_SIZE = 100
PIN_WORKERS = 8  # scontrol processes at once, each reading its share of the updates on stdin
HELPER_WORKERS = 4  # libslurm helper processes at once (faster than one, same results)
PinnedWith = Literal["libslurm", "scontrol", "none"]
SOURCE_NAME = "pin_elements.c"
COMPILE_TIMEOUT_S = 120.0
HEADERS_HINT = "libslurm's headers (Debian/Ubuntu: libslurm-dev; RHEL: slurm-devel)"


@dataclass(frozen=True)
class PinWay:
    """How a submit pins its elements: decided before its arrays are sized (the size that
    costs least differs: LIBSLURM_ARRAY_SIZE, PIN_ARRAY_SIZE), the helper built once for it."""

    way: PinnedWith
    helper: Path | None = None

    @property
    def array_size(self) -> int:
        return LIBSLURM_ARRAY_SIZE if self.way == "libslurm" else PIN_ARRAY_SIZE


@contextmanager
def choose_pin_way(
    pin: bool, how: PinWith, cc: str | None = None, *, build: bool = True
) -> Iterator[PinWay]:
    """The way a fleet pins (`spec.slurm.pin`, `.pin_with`): none without pinning; scontrol
    when asked; else libslurm, its helper built into a private temporary folder that lasts as
    long as the caller needs it, or scontrol with a warning where it cannot be built (an
    error with --pin-with libslurm). `build=False` (a dry run) compiles nothing: the way is
    the one the helper's compiler and header, looked at, would give; no helper is made."""
    if not pin or how == "scontrol":
        yield PinWay("scontrol" if pin else "none")
        return
    if not build:
        yield PinWay("libslurm" if can_build(cc) else "scontrol")
        return
    with tempfile.TemporaryDirectory(prefix="stackgate-pin-") as work:
        try:
            helper: Path | None = build_helper(Path(work), cc)
        except PinHelperUnavailable as exc:
            if how == "libslurm":
                raise EnvironmentProblem(
                    f"--pin-with libslurm: the pin helper cannot be built here: {exc}",
                    details=["--pin-with scontrol pins through scontrol instead"],
                ) from None
            log.warning("pinning through scontrol: the libslurm helper cannot be built: %s", exc)
            helper = None
        yield PinWay("libslurm", helper) if helper is not None else PinWay("scontrol")


def pin_commands(spec: SlurmFleet, ids: list[str], size: int) -> list[list[str]]:
    """One `scontrol update` per element (`pin_all` feeds them to scontrol on stdin)."""
    if not spec.slurm.pin:
        return []
    return [
        ["scontrol", "update", f"JobId={ids[i // size]}_{i % size}", f"NodeList={node}"]
        for i, node in enumerate(spec.targets)
    ]


def pin_all(commands: list[list[str]], way: PinWay) -> None:
    """Every pin (`scontrol update JobId=A_i NodeList=node` in the plan) the way decided, then
    `_verify_pins` reads back what Slurm holds."""
    if not commands:
        return
    if way.helper is None:
        _pin_with_scontrol(commands)
        return
    pairs = [(a[2].removeprefix("JobId="), a[3].removeprefix("NodeList=")) for a in commands]
    _verify_pins(commands, pin_with_helper(way.helper, pairs, HELPER_WORKERS))


def _pin_with_scontrol(commands: list[list[str]]) -> None:
    """Every `scontrol update`, as lines on the stdin of PIN_WORKERS scontrol processes (one
    process start per share, not per element), then `_verify_pins` reads back what Slurm
    holds: scontrol reading commands exits 1 when one failed without saying which."""
    lines = [shlex.join(argv[1:]) for argv in commands]  # "update JobId=A_i NodeList=node"
    ended = run_sharded(["scontrol"], lines, PIN_WORKERS)
    errors = [e for _, done in ended if done.returncode and (e := done.stderr.strip())]
    _verify_pins(commands, errors)


def parse_requested(text: str) -> dict[str, str]:
    """{`A_i`: requested nodes} from `squeue -h -r -o %i|%n` (an element not pinned: '')."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        job, _, nodes = line.strip().partition("|")
        if job:
            out[job] = nodes
    return out


def _verify_pins(commands: list[list[str]], errors: list[str]) -> None:
    """Every element's requested node is the one it was pinned to, as squeue reads it back."""
    wanted = {
        argv[2].removeprefix("JobId="): argv[3].removeprefix("NodeList=") for argv in commands
    }
    arrays = sorted({job.split("_")[0] for job in wanted})
    done = run(["squeue", "-h", "-r", "-t", "all", "-j", ",".join(arrays), "-o", "%i|%n"])
    held = parse_requested(done.stdout)
    wrong = [f"{job}: wanted {node}, Slurm holds {held.get(job) or 'no node'}"
             for job, node in wanted.items() if held.get(job) != node]  # fmt: skip
    if wrong:
        raise EnvironmentProblem(
            f"Slurm did not pin {len(wrong)} of {len(wanted)} element(s) to their node",
            details=[*wrong[:20], *(e for text in errors[:3] for e in text.splitlines()[-3:])],
        )


class PinHelperUnavailable(Exception):
    """The helper cannot be built here (no C compiler, no Slurm headers or library)."""


def source_path() -> Path:
    """fleet/slurm/pin_elements.c in the checkout this package runs from."""
    return Path(__file__).resolve().parents[3] / "fleet" / "slurm" / SOURCE_NAME


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


def run_sharded(
    argv: list[str], lines: Sequence[str], workers: int
) -> list[tuple[list[str], Completed]]:
    """`argv` started `workers` times at once (never more than there are lines), each process
    reading its share of `lines` (every workers-th) on stdin: (its share, how it ended) each.
    One process start per share, not per line; scontrol and the helper are both fed so."""
    shares = [list(lines[k::workers]) for k in range(min(workers, len(lines)))]

    def one(share: list[str]) -> tuple[list[str], Completed]:
        return share, run(argv, input_text="\n".join(share) + "\n", check=False)

    with ThreadPoolExecutor(max_workers=max(1, len(shares))) as pool:
        return list(pool.map(one, shares))


def pin_with_helper(helper: Path, pairs: Sequence[tuple[str, str]], workers: int) -> list[str]:
    """Every (element, node) pin, as lines on the stdin of `workers` helper processes; the
    problems each reported ("A_i: Slurm's words"), or how a process failed."""
    problems: list[str] = []
    for share, done in run_sharded(
        [str(helper)], [f"{job} {node}" for job, node in pairs], workers
    ):
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
