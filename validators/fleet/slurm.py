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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
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


DEFAULT_MAX_ARRAY_SIZE = 1001  # Slurm's default MaxArraySize: indices 0..1000
PIN_WORKERS = 8  # `scontrol update` calls at once (slurmctld serves RPCs on many threads)


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


def max_array_size() -> int:
    """MaxArraySize from `scontrol show config` (Slurm's default when it does not say)."""
    done = run(["scontrol", "show", "config"], check=False)
    match = re.search(r"^MaxArraySize\s*=\s*(\d+)", done.stdout, re.MULTILINE)
    return int(match[1]) if done.returncode == 0 and match else DEFAULT_MAX_ARRAY_SIZE


def array_id(i: int) -> str:
    return ARRAY_ID if i == 0 else f"<ARRAY_JOB_ID_{i}>"


def _array_command(spec: FleetSpec, script: Path, chunk: Chunk) -> list[str]:
    throttle = f"%{spec.slurm.throttle}" if spec.slurm.throttle else ""
    return [
        "sbatch",
        "--parsable",
        "--hold",
        f"--array=0-{chunk.count - 1}{throttle}",
        # On the command line, one argv word: a path with a space needs no quoting here.
        f"--output={spec.folder / 'logs' / 'validate-%A_%a.out'}",
        f"--export=ALL,STACKGATE_FLEET_OFFSET={chunk.offset}",
        str(script),
    ]


def plan_commands(
    spec: FleetSpec,
    scripts_dir: Path,
    arrays: list[str] | None = None,
    max_array: int = DEFAULT_MAX_ARRAY_SIZE,
) -> list[list[str]]:
    """Every command submit runs, in order (array ids are known only after their sbatch)."""
    parts = chunks(len(spec.targets), max_array)
    ids = arrays or [array_id(i) for i in range(len(parts))]
    commands = [_array_command(spec, scripts_dir / ARRAY_SCRIPT, c) for c in parts]
    commands += pin_commands(spec, ids, max_array)
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


def pin_commands(spec: FleetSpec, ids: list[str], max_array: int) -> list[list[str]]:
    if not spec.slurm.pin:
        return []
    size = max(1, max_array)
    return [
        ["scontrol", "update", f"JobId={ids[i // size]}_{i % size}", f"NodeList={node}"]
        for i, node in enumerate(spec.targets)
    ]


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

    @property
    def array_job(self) -> str:
        return self.arrays[0]


def _pin_all(commands: list[list[str]]) -> None:
    """Every `scontrol update`, PIN_WORKERS at once; the first failure is raised."""
    if not commands:
        return
    with ThreadPoolExecutor(max_workers=PIN_WORKERS) as pool:
        for _ in pool.map(run, commands):
            pass


def submit(
    spec: FleetSpec, scripts_dir: Path, *, before_release: Callable[[Submitted], None]
) -> Submitted:
    """Run the plan for real; the scripts must already be in scripts_dir. Held arrays, pins,
    the collector, then `before_release` (the caller makes the job folder final), then
    release. Any failure before the release cancels every job submitted: all or nothing."""
    limit = max_array_size()
    parts = chunks(len(spec.targets), limit)
    arrays: list[str] = []
    done: list[list[str]] = []
    try:
        for chunk in parts:
            argv = _array_command(spec, scripts_dir / ARRAY_SCRIPT, chunk)
            arrays.append(_job_id(run(argv).stdout))
            done.append(argv)
        *rest, release = plan_commands(spec, scripts_dir, arrays, limit)[len(parts) :]
        pins, collect = rest[:-1], rest[-1]
        _pin_all(pins)
        done += pins
        collector = _job_id(run(collect).stdout)
        done.append(collect)
        submitted = Submitted(arrays, [c.offset for c in parts], collector, done, limit)
        before_release(submitted)
    except (StackgateError, OSError):
        if arrays:
            run(["scancel", *arrays], check=False)
        raise
    result = run(release, check=False)
    if result.returncode != 0 and not _released(result.stderr):
        run(["scancel", *arrays], check=False)
        raise CommandFailed(release, result.returncode, result.stdout, result.stderr)
    return Submitted(arrays, submitted.offsets, collector, [*done, release], limit)


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
    array: str
    task: int
    state: str
    node: str | None
    exit_code: str | None
    reason: str | None
    source: str = "scontrol"

    @property
    def job(self) -> str:
        return f"{self.array}_{self.task}"


def parse_show_job(text: str) -> list[ElementState]:
    """Elements of arrays from `scontrol show job -o <A>` (one line per job record)."""
    out: list[ElementState] = []
    for line in text.splitlines():
        fields = dict(_FIELD.findall(line))
        task = fields.get("ArrayTaskId", "")
        array = fields.get("ArrayJobId", "")
        if not task.isdigit() or not array.isdigit():
            continue  # a still-pending remainder prints as e.g. 0-3%2
        node = fields.get("NodeList")
        reason = fields.get("Reason")
        out.append(
            ElementState(
                array=array,
                task=int(task),
                state=fields.get("JobState", "UNKNOWN"),
                node=None if node in (None, "(null)", "None assigned") else node,
                exit_code=fields.get("ExitCode"),
                reason=None if reason in (None, "None") else reason,
            )
        )
    return sorted(out, key=lambda e: (e.array, e.task))


_SACCT_JOB = re.compile(r"^(\d+)_(\d+)\Z")


def parse_sacct(text: str) -> list[ElementState]:
    """Elements from `sacct -n -P -X -o JobID,State,ExitCode,NodeList,Reason -j A,...`."""
    out: list[ElementState] = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 5:
            continue
        match = _SACCT_JOB.match(parts[0])
        if match is None:
            continue  # a pending remainder (A_[0-3]) or a step line
        state = parts[1].split()[0] if parts[1].strip() else "UNKNOWN"  # "CANCELLED by 0"
        node, reason = parts[3], parts[4]
        out.append(
            ElementState(
                array=match[1],
                task=int(match[2]),
                state=state,
                node=None if node in ("", "None assigned", "(null)") else node,
                exit_code=parts[2] or None,
                reason=None if reason in ("", "None") else reason,
                source="sacct",
            )
        )
    return sorted(out, key=lambda e: (e.array, e.task))


def element_states(arrays: list[str]) -> list[ElementState]:
    """What Slurm says about each element: `scontrol show job` while slurmctld remembers the
    job (MinJobAge, 300 s by default, after it ended), else `sacct` where accounting exists;
    [] when neither knows (callers keep what they learned before)."""
    found: list[ElementState] = []
    forgotten: list[str] = []
    for array in arrays:
        done = run(["scontrol", "show", "job", "-o", array], check=False)
        states = parse_show_job(done.stdout) if done.returncode == 0 else []
        if states:
            found += states
        else:
            forgotten.append(array)
    if forgotten:
        fields = "JobID,State,ExitCode,NodeList,Reason"
        argv = ["sacct", "-n", "-P", "-X", "-o", fields, "-j", ",".join(forgotten)]
        try:
            done = run(argv, check=False)
        except StackgateError:  # no sacct on this machine
            return found
        if done.returncode == 0:
            found += parse_sacct(done.stdout)
    return found
