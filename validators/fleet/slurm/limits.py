"""The slurm.conf limits a fleet runs into: MaxArraySize (how many arrays) and MaxJobCount
(whether the fleet fits at all)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from stackgate.errors import EnvironmentProblem
from stackgate.proc import run

DEFAULT_MAX_ARRAY_SIZE = 1001  # Slurm's default MaxArraySize: indices 0..1000
DEFAULT_MAX_JOB_COUNT = 10_000  # Slurm's default MaxJobCount: job records slurmctld holds


@dataclass(frozen=True)
class Limits:
    """The slurm.conf limits a fleet runs into."""

    max_array_size: int = DEFAULT_MAX_ARRAY_SIZE
    max_job_count: int = DEFAULT_MAX_JOB_COUNT


def parse_limits(config: str) -> Limits:
    """MaxArraySize and MaxJobCount from `scontrol show config` (Slurm's defaults if absent)."""

    def value(name: str, default: int) -> int:
        match = re.search(rf"^{name}\s*=\s*(\d+)", config, re.MULTILINE)
        return int(match[1]) if match else default

    return Limits(
        value("MaxArraySize", DEFAULT_MAX_ARRAY_SIZE), value("MaxJobCount", DEFAULT_MAX_JOB_COUNT)
    )


def limits() -> Limits:
    done = run(["scontrol", "show", "config"], check=False)
    return parse_limits(done.stdout) if done.returncode == 0 else Limits()


def job_records() -> int:
    """What slurmctld counts against MaxJobCount now: every job, every element of an array
    (a pending array counts as its number of elements), finished ones not yet purged."""
    done = run(["squeue", "-h", "-r", "-t", "all", "-o", "%i"])
    return sum(1 for line in done.stdout.splitlines() if line.strip())


def check_room(targets: int, limit: Limits, held: int) -> None:
    """Refuse a fleet that MaxJobCount cannot hold. slurmctld takes a submit only while the
    jobs it counts, the new ones included, stay below MaxJobCount (an array counts as its
    elements: MaxJobCount=5 took an array of 4 and refused one of 5), and answers one over
    the limit with EAGAIN: sbatch then sleeps and retries for ever. A fleet is one job per
    node and the collector."""
    need = targets + 1
    room = limit.max_job_count - 1 - held
    if need > room:
        raise EnvironmentProblem(
            f"Slurm's MaxJobCount ({limit.max_job_count}) leaves room for {max(room, 0)} "
            f"job(s); this fleet needs {need} ({targets} node(s), one job each, and the collector)",
            details=[
                f"slurmctld counts {held} job(s) now (squeue -r -t all: every array element, "
                "finished ones not yet purged)",
                f"set MaxJobCount >= {need + held + 1} in slurm.conf and restart slurmctld, "
                "or submit fewer nodes at once",
            ],
        )
