"""Slurm: a job array (one element per node) and an `afterany` collector, from fleet/slurm/.

Submission, in order (every step a real Slurm command; `plan_commands` lists them for --dry-run):

1. `sbatch --parsable --hold validate.sbatch` -> the array job id A (held: nothing starts yet)
2. with pinning, `scontrol update JobId=A_i NodeList=<node i>` for every element: a job array
   has one node request for all its elements, so Slurm alone may run two elements on one node
   and none on another; updating a pending element splits it off with its own node.
   The price: when Slurm cannot start one element of an array, its schedulers skip the rest of
   that array in the same pass (an optimization, src/slurmctld/job_scheduler.c
   `fill_array_reasons`), so an element pinned to a busy node holds back the ones behind it.
   Nodes Slurm already calls unavailable (down, drained, draining, failing, not responding)
   are therefore left out at submit time (`unavailable_nodes`) and reported MISSING with
   Slurm's reason; `--no-pin` trades the pinning for no waiting.
3. `sbatch --parsable --dependency=afterany:A collect.sbatch` -> the collector C
4. `scontrol release A`

A failure after step 1 cancels A, so no held array is left behind.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import jinja2

from stackgate.errors import CommandFailed, EnvironmentProblem, StackgateError
from stackgate.proc import run
from validators.fleet.spec import FleetSpec

ARRAY_SCRIPT = "validate.sbatch"
COLLECT_SCRIPT = "collect.sbatch"
ARRAY_ID = "<ARRAY_JOB_ID>"


def templates_dir() -> Path:
    """fleet/slurm in the checkout this package runs from (data, like stacks/ and images/)."""
    return Path(__file__).resolve().parents[2] / "fleet" / "slurm"


def render(spec: FleetSpec) -> dict[str, str]:
    """The two batch scripts, by file name."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir()),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # shell scripts, quoted by the `q` filter where a value is a word
    )
    env.filters["q"] = lambda value: shlex.quote(str(value))
    return {
        name: env.get_template(f"{name}.j2").render(spec=spec)
        for name in (ARRAY_SCRIPT, COLLECT_SCRIPT)
    }


def plan_commands(spec: FleetSpec, scripts_dir: Path, array_id: str = ARRAY_ID) -> list[list[str]]:
    """Every command submit runs, in order (the array id is known only after the first)."""
    commands = [["sbatch", "--parsable", "--hold", str(scripts_dir / ARRAY_SCRIPT)]]
    if spec.slurm.pin:
        commands += [
            ["scontrol", "update", f"JobId={array_id}_{i}", f"NodeList={node}"]
            for i, node in enumerate(spec.targets)
        ]
    commands.append(
        [
            "sbatch",
            "--parsable",
            f"--dependency=afterany:{array_id}",
            str(scripts_dir / COLLECT_SCRIPT),
        ]
    )
    commands.append(["scontrol", "release", array_id])
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
    array_job: str
    collector_job: str
    commands: list[list[str]]


def submit(spec: FleetSpec, scripts_dir: Path) -> Submitted:
    """Run the plan for real; the scripts must already be in scripts_dir."""
    first, *_ = plan_commands(spec, scripts_dir)
    array = _job_id(run(first).stdout)
    collector = ""
    done = [first]
    try:
        for argv in plan_commands(spec, scripts_dir, array)[1:]:
            result = run(argv, check=argv[1] != "release")
            done.append(argv)
            if argv[0] == "sbatch":
                collector = _job_id(result.stdout)
            elif result.returncode != 0 and not _released(result.stderr):
                raise CommandFailed(argv, result.returncode, result.stdout, result.stderr)
    except (StackgateError, OSError):
        run(["scancel", array], check=False)
        raise
    return Submitted(array, collector, done)


_UNAVAILABLE = ("down", "drain", "fail", "maint", "inval", "future", "unknown", "power")


def parse_sinfo_nodes(text: str) -> dict[str, tuple[str, str]]:
    """{node: (state, reason)} from `sinfo -h -N -o %N|%T|%E`."""
    out: dict[str, tuple[str, str]] = {}
    for line in text.splitlines():
        parts = line.strip().split("|", 2)
        if len(parts) == 3 and parts[0]:
            out[parts[0]] = (parts[1], parts[2])
    return out


def unavailable_nodes(nodes: list[str], text: str) -> dict[str, str]:
    """Nodes of the set Slurm would not start a job on now, with Slurm's words."""
    states = parse_sinfo_nodes(text)
    out: dict[str, str] = {}
    for node in nodes:
        if node not in states:
            out[node] = "not a node of this Slurm cluster (sinfo does not list it)"
            continue
        state, reason = states[node]
        if state.endswith("*") or any(word in state.lower() for word in _UNAVAILABLE):
            why = f"slurm says {state}" + (f" ({reason})" if reason and reason != "none" else "")
            out[node] = f"not submitted: {why}"
    return out


def probe_unavailable(nodes: list[str]) -> dict[str, str]:
    done = run(["sinfo", "-h", "-N", "-n", ",".join(nodes), "-o", "%N|%T|%E"])
    return unavailable_nodes(nodes, done.stdout)


_FIELD = re.compile(r"(\w+)=(\S*)")


@dataclass(frozen=True)
class ElementState:
    task: int
    state: str
    node: str | None
    exit_code: str | None
    reason: str | None


def parse_show_job(text: str) -> list[ElementState]:
    """Elements of an array from `scontrol show job -o <A>` (one line per job record)."""
    out: list[ElementState] = []
    for line in text.splitlines():
        fields = dict(_FIELD.findall(line))
        task = fields.get("ArrayTaskId", "")
        if not task.isdigit():
            continue  # a still-pending remainder prints as e.g. 0-3%2
        node = fields.get("NodeList")
        reason = fields.get("Reason")
        out.append(
            ElementState(
                task=int(task),
                state=fields.get("JobState", "UNKNOWN"),
                node=None if node in (None, "(null)") else node,
                exit_code=fields.get("ExitCode"),
                reason=None if reason in (None, "None") else reason,
            )
        )
    return sorted(out, key=lambda e: e.task)


def element_states(array_job: str) -> list[ElementState]:
    """What Slurm says about each element; [] when it no longer knows the job."""
    done = run(["scontrol", "show", "job", "-o", array_job], check=False)
    if done.returncode != 0:
        return []
    return parse_show_job(done.stdout)
