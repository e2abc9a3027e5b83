"""Submitting a fleet to Slurm: held job arrays, their pins, an `afterany` collector, release.

In order (real Slurm commands; `plan_commands` lists them for --dry-run):
1. `sbatch --parsable --hold validate.sbatch` -> held array job ids A1, A2... (with pinning,
   arrays of the pin way's size, `array_size`);
2. with pinning, every element pinned to its node and read back (slurm/pin.py). Slurm skips the
   rest of an array in a scheduling pass once one element cannot start (job_scheduler.c
   `fill_array_reasons`), so nodes Slurm calls unavailable are left out at submit time
   (`states.unavailable_nodes`) and reported MISSING with Slurm's reason; `--no-pin` trades
   pinning for no waiting;
3. `sbatch --parsable --dependency=afterany:A1:A2... collect.sbatch` -> the collector C;
4. `scontrol release A1,A2...`.

Before step 1, `limits.check_room` refuses a fleet Slurm's MaxJobCount cannot hold (sbatch would
sleep and retry forever). A failure after step 1 cancels every array, leaving none held.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from stackgate.errors import CommandFailed, EnvironmentProblem, StackgateError
from stackgate.proc import run
from validators.fleet.slurm.limits import (
    DEFAULT_MAX_ARRAY_SIZE,
    Limits,
    check_room,
    job_records,
    limits,
)
from validators.fleet.slurm.options import SlurmFleet
from validators.fleet.slurm.pin import PinnedWith, PinWay, choose_pin_way, pin_all, pin_commands
from validators.fleet.slurm.templates import ARRAY_SCRIPT, COLLECT_SCRIPT

ARRAY_ID = "<ARRAY_JOB_ID>"
SBATCH_TIMEOUT_S = 120.0  # sbatch sleeps and retries forever while slurmctld says "not now"


@dataclass(frozen=True)
class Chunk:
    """One array of the fleet: elements 0..count-1 are targets offset..offset+count-1."""

    offset: int
    count: int


def chunks(targets: int, max_array_size: int) -> list[Chunk]:
    """Slurm refuses an array index >= MaxArraySize: a fleet larger than that is several
    arrays (each element finds its node index as offset + SLURM_ARRAY_TASK_ID)."""
    size = max(1, max_array_size)
    return [Chunk(o, min(size, targets - o)) for o in range(0, targets, size)]


def array_size(spec: SlurmFleet, max_array: int, way: PinWay) -> int:
    """Elements per array: MaxArraySize, or the pin way's size when pinning."""
    size = max(1, max_array)
    return min(size, way.array_size) if spec.slurm.pin else size


def array_id(i: int) -> str:
    return ARRAY_ID if i == 0 else f"<ARRAY_JOB_ID_{i}>"


def throttle_lag(spec: SlurmFleet, size: int) -> int:
    """With --throttle K, array i waits for array i - lag to end (`afterany`): at most lag
    arrays run at once, each `%K`, so at most K elements of the fleet (lag = K // size)."""
    throttle = spec.slurm.throttle
    return max(1, throttle // max(1, size)) if throttle else 0


def _after(ids: list[str], i: int, lag: int) -> str | None:
    return ids[i - lag] if lag and i >= lag else None


def _array_command(spec: SlurmFleet, script: Path, chunk: Chunk, after: str | None) -> list[str]:
    throttle = f"%{spec.slurm.throttle}" if spec.slurm.throttle else ""
    chain = [f"--dependency=afterany:{after}"] if after else []
    return [
        "sbatch",
        "--parsable",
        "--hold",
        *chain,
        f"--array=0-{chunk.count - 1}{throttle}",
        # On the command line, one argv word: a path with a space needs no quoting here.
        f"--output={spec.folder / 'logs' / 'validate-%A_%a.out'}",
        f"--export=ALL,STACKGATE_FLEET_OFFSET={chunk.offset}",
        str(script),
    ]


def plan_commands(
    spec: SlurmFleet,
    scripts_dir: Path,
    way: PinWay,
    arrays: list[str] | None = None,
    max_array: int = DEFAULT_MAX_ARRAY_SIZE,
) -> list[list[str]]:
    """Every command submit runs, in order (array ids are known only after their sbatch); a pin
    is listed as the `scontrol update` it is (through libslurm: that command's one RPC)."""
    size = array_size(spec, max_array, way)
    parts = chunks(len(spec.targets), size)
    ids = arrays or [array_id(i) for i in range(len(parts))]
    lag = throttle_lag(spec, size)
    commands = [
        _array_command(spec, scripts_dir / ARRAY_SCRIPT, c, _after(ids, i, lag))
        for i, c in enumerate(parts)
    ]
    commands += pin_commands(spec, ids, size)
    commands.append(
        [
            "sbatch",
            "--parsable",
            f"--dependency=afterany:{':'.join(ids)}",
            f"--output={spec.folder / 'logs' / 'collect-%j.out'}",
            str(scripts_dir / COLLECT_SCRIPT),
        ]
    )
    commands.append(["scontrol", "release", ",".join(ids)])
    return commands


def _released(stderr: str) -> bool:
    """`scontrol release` exits 1 when one element already ended (cancelled while held),
    printing `1_0-1: No error` / `1_2: Job has already finished`; the others were released."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    return bool(lines) and all(
        line.endswith(("No error", "Job has already finished")) for line in lines
    )


def _job_id(stdout: str) -> str:
    """`sbatch --parsable` prints `id` or `id;cluster`."""
    first = stdout.strip().split(";")[0]
    if not first.isdigit():
        raise EnvironmentProblem(f"sbatch printed no job id: {stdout.strip()!r}")
    return first


@dataclass(frozen=True)
class Submitted:
    arrays: list[str]
    offsets: list[int]
    collector_job: str
    commands: list[list[str]]
    max_array_size: int
    pinned_with: PinnedWith = "none"


def submit(
    spec: SlurmFleet, scripts_dir: Path, *, before_release: Callable[[Submitted], None]
) -> Submitted:
    """Run the plan for real; the scripts must already be in scripts_dir. Held arrays, pins,
    the collector, then `before_release` (the caller makes the job folder final), then
    release. Any failure before the release cancels every job submitted: all or nothing."""
    limit = limits()
    check_room(len(spec.targets), limit, job_records())
    with choose_pin_way(spec.slurm.pin, spec.slurm.pin_with, spec.slurm.cc) as way:
        return _submit(spec, scripts_dir, limit, way, before_release)


def _submit(
    spec: SlurmFleet,
    scripts_dir: Path,
    limit: Limits,
    way: PinWay,
    before_release: Callable[[Submitted], None],
) -> Submitted:
    size = array_size(spec, limit.max_array_size, way)
    parts = chunks(len(spec.targets), size)
    lag = throttle_lag(spec, size)
    arrays: list[str] = []
    done: list[list[str]] = []
    try:
        for i, chunk in enumerate(parts):
            argv = _array_command(spec, scripts_dir / ARRAY_SCRIPT, chunk, _after(arrays, i, lag))
            arrays.append(_job_id(run(argv, timeout=SBATCH_TIMEOUT_S).stdout))
            done.append(argv)
        planned = plan_commands(spec, scripts_dir, way, arrays, limit.max_array_size)
        *rest, release = planned[len(parts) :]
        pins, collect = rest[:-1], rest[-1]
        pin_all(pins, way)
        done += pins
        collector = _job_id(run(collect, timeout=SBATCH_TIMEOUT_S).stdout)
        done.append(collect)
        offsets = [c.offset for c in parts]
        submitted = Submitted(arrays, offsets, collector, done, limit.max_array_size, way.way)
        before_release(submitted)
    except (StackgateError, OSError):
        if arrays:
            run(["scancel", *arrays], check=False)
        raise
    result = run(release, check=False)
    if result.returncode != 0 and not _released(result.stderr):
        run(["scancel", *arrays], check=False)
        raise CommandFailed(release, result.returncode, result.stdout, result.stderr)
    return Submitted(arrays, offsets, collector, [*done, release], limit.max_array_size, way.way)
